"""validate_stream: the Great Expectations suites of a stream's invariants hold on a stream that
went through everything (writes, a scale, a large event, a truncation, an open transaction, a
subscriber, retention records, watermarks), and each corruption written straight into its Delta
tables (with Delta's own API, as a buggy writer would) fails its own expectation, and only that one."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

import pravega_spark as ps
from pravega_spark.admin.validation import INVARIANTS, KV_ENTRIES, epoch_rows, segment_rows
from pravega_spark.store.schema import (
    EVENTS_SCHEMA,
    RECORD_CHUNK_END,
    RECORD_EVENT,
    RECORD_SEAL,
    RECORD_STAGED,
)
from pravega_spark.store.store import stream_key

MIB = 1024 * 1024
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _rows(spark, batch: int, n: int = 40):
    return spark.createDataFrame([(f"key-{i % 10}", f"w:{batch}:{i:04d}") for i in range(n)],
                                 "routing_key string, event string")


@pytest.fixture(scope="module")
def rich_template(spark, tmp_path_factory) -> str:
    """A store whose stream 'iot/sensors' has every kind of row and record (built once)."""
    root = str(tmp_path_factory.mktemp("rich") / "store")
    m = ps.StreamManager(spark, root)
    m.create_scope("iot")
    m.create_stream("iot", "sensors", ps.StreamConfiguration(
        scaling_policy=ps.ScalingPolicy.fixed(2), retention_policy=ps.RetentionPolicy.by_size_bytes(10**12)))
    w = m.create_event_writer("iot", "sensors", writer_id="w")
    w.write_events(_rows(spark, 0))
    head = w.write_events(_rows(spark, 1)).tail_stream_cut
    w.note_time(T0)
    m.compute_watermarks(now=T0 + timedelta(seconds=1))
    m.run_retention(now=T0)
    w.write_events(_rows(spark, 2))
    m.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    w.write_events(_rows(spark, 3))
    m.add_subscriber("iot", "sensors", "rg", 1)  # its cut: before the large event
    m.update_subscriber_stream_cut("iot", "sensors", "rg", 1, m.tail_stream_cut("iot", "sensors"))
    with w.stream_event(routing_key="key-1", chunk_size=4 * MIB) as event:  # 3 chunk rows
        event.write(b"x" * (8 * MIB + 1024))
        event.commit()
    w.note_time(T0 + timedelta(seconds=10))
    m.compute_watermarks(now=T0 + timedelta(seconds=11))
    m.run_retention(now=T0 + timedelta(hours=1))
    m.truncate_stream("iot", "sensors", head)
    txn = m.create_transactional_writer("iot", "sensors", "tx").begin_txn(timedelta(seconds=600))
    txn.write_events(_rows(spark, 9, 5))  # stays open: staged files and their manifest rows
    txn.flush()
    return root


@pytest.fixture
def rich(spark, rich_template, tmp_path):
    root = str(tmp_path / "store")
    shutil.copytree(rich_template, root)
    return ps.StreamManager(spark, root)


@pytest.mark.slow
def test_every_expectation_holds_on_a_stream_that_went_through_everything(spark, rich, tmp_path):
    result = rich.validate_stream("iot", "sensors")
    assert result.success, str(result)
    assert bool(result) and result.failures == []
    assert {r.expectation for r in result.results} == {i.name for i in INVARIANTS if i.table != KV_ENTRIES}
    assert all(len(r) == 3 and r.details["unexpected_count"] == 0 for r in result.results)
    counts = result.counts
    assert counts["event"] == rich.read_events("iot", "sensors").count() - 1  # the large event: 3 chunk rows
    # staged: one manifest row per staged file (the 5 events went to at most the 3 open segments)
    assert counts["chunk"] == 3 and 1 <= counts["staged"] <= 3 and counts["seal"] == 1 and counts["truncate"] >= 1
    assert counts["subscriber"] == 1 and counts["retention_record"] == 2 and counts["watermark"] == 2
    assert counts["epochs"] == 2 and counts["segment"] == 4 and counts["epoch_member"] == 5
    assert counts["catalog"] == 1 and counts["stream_table"] == 1 and counts["shard_table"] >= 3  # placement
    assert repr(result).startswith("StreamValidation(iot/sensors, success=True, 23 expectations")
    table = result.to_df(spark)
    assert table.count() == 23 and table.where("success").count() == 23
    index = result.to_html(str(tmp_path / "docs"))
    assert index.endswith("index.html") and (tmp_path / "docs" / "index.html").is_file()
    assert list((tmp_path / "docs" / "validations").rglob("*.html"))


def _events_path(m: ps.StreamManager) -> str:
    return f"{m.root}/iot/sensors"


def _segment_rows(spark, m, segment_id: int):
    """A segment's event rows as stored (layout v2: offsets relative to base_offset), in order."""
    return (spark.read.format("delta").load(_events_path(m))
            .where((F.col("segment_id") == segment_id) & (F.col("record_type") == RECORD_EVENT))
            .orderBy(F.col("base_offset") + F.col("rel_offset")).collect())


def _open_segment_of_epoch_0(m) -> int:
    return next(r.segment_id for r in m.controller.store.segment_records("iot", "sensors") if r.key_start == 0.5)


def _gap(spark, m):
    rows = _segment_rows(spark, m, _open_segment_of_epoch_0(m))
    middle = rows[len(rows) // 2]
    DeltaTable.forPath(spark, _events_path(m)).delete(
        (F.col("segment_id") == middle.segment_id)
        & (F.col("base_offset") + F.col("rel_offset") == middle.base_offset + middle.rel_offset))


def _duplicate(spark, m):
    row = _segment_rows(spark, m, _open_segment_of_epoch_0(m))[3]
    copy = spark.createDataFrame([row], EVENTS_SCHEMA)
    copy.write.format("delta").mode("append").save(_events_path(m))


def _beyond_seal(spark, m):
    sealed = next(r for r in m.controller.store.segment_records("iot", "sensors") if r.sealed_size is not None)
    size = sealed.sealed_size
    row = (sealed.segment_id, size, size + 8 + 3, 0, 8 + 3, RECORD_EVENT, "key-0", b"abc", "w",
           datetime.now(timezone.utc), None)
    spark.createDataFrame([row], EVENTS_SCHEMA).write.format("delta").mode("append").save(_events_path(m))


def _epoch_hole(spark, m):
    """Segment 0 (epoch 0 only, sealed by the split) shrinks from [0, 0.5) to [0, 0.4): epoch 0
    has a hole; its successors still cover its (smaller) range; no cut in use includes it."""
    key = stream_key("iot", "sensors")
    shrunk = F.transform("segments", lambda s: F.when(s["segment_id"] == 0, s.withField("key_end", F.lit(0.4)))
                         .otherwise(s))
    DeltaTable.forPath(spark, m.controller.store.catalog_path(key)).update(
        F.col("stream_key") == key, {"segments": shrunk})


def _staged_row_made_readable(spark, m):
    staged = (spark.read.format("delta").load(_events_path(m)).where(F.col("record_type") == RECORD_STAGED)
              .orderBy("rel_offset").first())
    DeltaTable.forPath(spark, _events_path(m)).update(
        (F.col("segment_id") == staged.segment_id) & (F.col("rel_offset") == staged.rel_offset),
        {"record_type": F.lit(RECORD_EVENT)})


def _seal_record_in_a_data_file(spark, m):
    """The seal record's file claims a byte: a read picking data files by partition values
    would return it as an event."""
    DeltaTable.forPath(spark, _events_path(m)).update(
        (F.col("record_type") == RECORD_SEAL) & (F.col("segment_id") >= 0),
        {"end_offset": F.col("end_offset") + 1})


def _orphan_chunks(spark, m):
    """The large event loses its last chunk: its other chunks are left without an end."""
    DeltaTable.forPath(spark, _events_path(m)).delete(F.col("record_type") == RECORD_CHUNK_END)


def _subscriber_behind_head(spark, m):
    head = m.head_stream_cut("iot", "sensors")
    assert all(o > 0 for o in head.positions.values())
    behind = F.array(*[F.struct(F.lit(s).cast("long").alias("segment_id"), F.lit(0).cast("long").alias("offset"))
                       for s in sorted(head.positions)])
    key = stream_key("iot", "sensors")
    DeltaTable.forPath(spark, m.controller.store.shard_path("subscribers", key)).update(
        (F.col("stream_key") == key) & (F.col("subscriber") == "rg"), {"stream_cut": behind})


def _row_in_a_second_shard(spark, m):
    """A copy of the stream's subscriber row committed into another shard's subscribers table."""
    store, key = m.controller.store, stream_key("iot", "sensors")
    home = store.shard_path("subscribers", key)
    other = next(p for p in store.shard_paths("subscribers") if p != home)
    (spark.read.format("delta").load(home).where(F.col("stream_key") == key)
     .write.format("delta").mode("append").partitionBy("stream_key").save(other))


def _format2_table_left_in_the_stream(spark, m):
    """A table of the format-2 layout (a segments table) left under the stream's own."""
    spark.createDataFrame([(0,)], "segment_id bigint").write.format("delta").save(f"{m.root}/iot/sensors/segments")


@pytest.mark.parametrize("corrupt, expectation", [
    (_gap, "offsets_contiguous"),
    (_duplicate, "offsets_unique"),
    (_beyond_seal, "nothing_beyond_seal"),
    (_epoch_hole, "epoch_covers_key_space"),
    (_staged_row_made_readable, "staged_data_hidden"),
    (_orphan_chunks, "large_events_complete"),
    (_seal_record_in_a_data_file, "records_in_their_files"),
    (_subscriber_behind_head, "subscriber_cuts_not_behind_head"),
    (_row_in_a_second_shard, "rows_in_their_shard"),
    (_format2_table_left_in_the_stream, "stream_is_one_table"),
], ids=lambda v: v if isinstance(v, str) else v.__name__.strip("_"))
def test_each_corruption_fails_its_own_expectation_and_only_it(spark, rich, corrupt, expectation):
    corrupt(spark, rich)
    result = rich.validate_stream("iot", "sensors")
    assert not result.success
    assert [r.expectation for r in result.failures] == [expectation], str(result)
    (failed,) = result.failures
    assert failed.details["unexpected_count"] >= 1 and failed.details["examples"]
    assert f"FAILED {expectation}" in str(result)


# ---- the small tables' preparation (pure Python) ----------------------------------------------
def _seg(sid, number, epoch, start, end, sealed_epoch=None, size=None):
    return {"segment_id": sid, "segment_number": number, "creation_epoch": epoch, "key_start": start,
            "key_end": end, "sealed_epoch": sealed_epoch, "sealed_size": size}


def test_epoch_rows_give_each_member_its_neighbours_and_mark_an_empty_epoch():
    history = [_seg(0, 0, 0, 0.0, 0.5, 1, 10), _seg(1, 1, 0, 0.5, 1.0),
               _seg(1 << 32 | 2, 2, 1, 0.0, 0.25), _seg(1 << 32 | 3, 3, 1, 0.25, 0.5)]
    rows = epoch_rows(history, 2)
    by_epoch = {}
    for r in rows:
        by_epoch.setdefault(r["epoch"], []).append((r.get("segment_id"), r["expected_key_start"], r["expected_key_end"]))
    assert by_epoch[0] == [(0, 0.0, 0.5), (1, 0.5, 1.0)]
    assert by_epoch[1] == [(1 << 32 | 2, 0.0, 0.25), (1 << 32 | 3, 0.25, 0.5), (1, 0.5, 1.0)]
    assert by_epoch[2] == by_epoch[1]
    assert epoch_rows([], 0) == [{"table": "epochs", "kind": "epoch_member", "name": "0", "epoch": 0,
                                  "expected_key_start": 0.0, "expected_key_end": 1.0}]


def test_segment_rows_measure_what_the_successors_cover():
    history = [_seg(0, 0, 0, 0.0, 0.5, 1, 10), _seg(1, 1, 0, 0.5, 1.0, 1, 10),
               _seg(1 << 32 | 2, 2, 1, 0.0, 0.3)]  # 1's successor is missing, 0's covers 0.3 of 0.5
    coverage = {r["segment_id"]: r["successor_coverage"] for r in segment_rows(history)}
    assert coverage[0] == pytest.approx(0.3) and coverage[1] == 0.0 and coverage[1 << 32 | 2] is None


def test_every_commit_that_adds_events_is_a_pure_append(rich):
    """Delta's streaming source skips or fails on a commit that adds and removes data: appends,
    transaction and large-event commits only add; truncation (DELETE) and clean-up commit apart,
    and clean-up and compaction remove with ``dataChange=false``."""
    import glob
    import json

    commits = 0
    logs = sorted(glob.glob(f"{rich.root.removeprefix('file:')}/iot/sensors/_delta_log/*.json"))
    assert logs
    for path in logs:
        with open(path) as f:
            actions = [json.loads(line) for line in f if line.strip()]
        operation = next(a["commitInfo"]["operation"] for a in actions if "commitInfo" in a)
        adds = [a["add"] for a in actions if "add" in a and a["add"]["dataChange"]]
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"]["dataChange"]]
        if adds and operation != "DELETE":
            commits += 1
            assert not removes, (path, operation)
    assert commits >= 6  # writes, seals, the large event, staging manifests...
