"""Writing: routing, framing offsets, size limit, null keys, results, fencing hints."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import pravega_spark as ps
from pravega_spark.store.schema import HEADER_SIZE
from tests.helpers import events_rows, table_versions


def _contiguous(rows):
    """Per segment, offsets start at 0 and each event starts where the previous one ended."""
    by_seg = {}
    for r in sorted((r for r in rows if r.record_type == 0), key=lambda r: (r.segment_id, r.offset)):
        by_seg.setdefault(r.segment_id, []).append(r)
    for seg_rows in by_seg.values():
        expected = 0
        for r in seg_rows:
            assert r.offset == expected, (r.segment_id, r.offset, expected)
            assert r.next_offset == r.offset + HEADER_SIZE + len(r.event)
            expected = r.next_offset
    return by_seg


@pytest.mark.connect
@pytest.mark.cluster
@pytest.mark.both_backends
def test_write_events_routes_frames_and_reports(manager, spark, root, stream2, delta_backend):
    scope, stream = stream2
    df = spark.createDataFrame([(f"dev-{i % 7}", f"payload-{i}") for i in range(50)], "device string, body string")
    writer = manager.create_event_writer(scope, stream, writer_id="w1")
    result = writer.write_events(df, routing_key="device", event="body")
    assert result.event_count == 50
    payload_bytes = sum(len(f"payload-{i}") for i in range(50))
    assert result.byte_count == payload_bytes + 50 * HEADER_SIZE
    assert sum(result.tail_stream_cut.positions.values()) == result.byte_count
    # the commit's version on both backends (over Connect found on first access): time travel to it
    events_path = f"{root}/{scope}/{stream}"
    at = spark.read.format("delta").option("versionAsOf", int(result.version)).load(events_path)
    before = spark.read.format("delta").option("versionAsOf", int(result.version) - 1).load(events_path)
    assert at.where("record_type = 0").count() == 50 and before.where("record_type = 0").count() == 0
    assert repr(result).count(f"version={result.version}") == 1
    rows = events_rows(spark, root, scope, stream)
    by_seg = _contiguous(rows)
    # routing: a key always lands in the segment whose range holds key_position
    positions = dict(spark.createDataFrame([(f"dev-{i}",) for i in range(7)], "k string")
                     .select("k", ps.key_position("k").alias("p")).collect())
    for seg_id, seg_rows in by_seg.items():
        lo, hi = (0.0, 0.5) if seg_id == 0 else (0.5, 1.0)
        for r in seg_rows:
            assert lo <= positions[r.routing_key] < hi
            assert r.writer_id == "w1"
    # strings are UTF-8 encoded, append order per key is the DataFrame's order
    got = manager.read_events(scope, stream).orderBy("segment_id", "offset").collect()
    per_key = {}
    for r in got:
        per_key.setdefault(r.routing_key, []).append(int(r.event.decode().split("-")[1]))
    for key, seqs in per_key.items():
        assert seqs == sorted(seqs), key


def test_key_position_matches_documented_sql(spark):
    df = spark.createDataFrame([("a",), ("dev-7",), ("",)], "k string")
    got = df.select(ps.key_position("k").alias("p"),
                    F.expr("shiftrightunsigned(xxhash64(k), 12) / 4503599627370496D").alias("sql")).collect()
    for r in got:
        assert 0.0 <= r.p < 1.0 and r.p == r.sql


def test_second_write_continues_offsets_and_order_by(manager, spark, root, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    first = writer.write_event("x" * 10, routing_key="k")
    df = spark.createDataFrame([("k", 3, "c"), ("k", 1, "a"), ("k", 2, "b")], "k string, n int, e string")
    second = writer.write_events(df, routing_key="k", event="e", order_by="n")
    assert second.event_count == 3 and second.byte_count == 3 * 9
    seg = next(iter(second.segments))
    assert first.tail_stream_cut.positions[seg] == 18
    assert second.tail_stream_cut.positions[seg] == 18 + 27
    got = manager.read_events(scope, stream).orderBy("segment_id", "offset").collect()
    assert [r.event for r in got] == [b"x" * 10, b"a", b"b", b"c"]
    _contiguous(events_rows(spark, root, scope, stream))
    # a second writer sees the first's tail (no cached state needed)
    other = manager.create_event_writer(scope, stream).write_event(b"z", routing_key="k")
    assert other.tail_stream_cut.positions[seg] == 45 + 9


def test_null_keys_spread_randomly(manager, spark, stream2):
    scope, stream = stream2
    df = spark.createDataFrame([(None, b"e")] * 200, "routing_key string, event binary")
    manager.create_event_writer(scope, stream).write_events(df)
    counts = {r.segment_id: r["count"] for r in manager.read_events(scope, stream).groupBy("segment_id").count().collect()}
    assert set(counts) == {0, 1} and min(counts.values()) > 50


@pytest.mark.connect
def test_event_too_large_writes_nothing(manager, spark, root, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    before = table_versions(spark, root)
    with pytest.raises(ps.EventTooLargeError):
        writer.write_event(b"x" * (ps.MAX_EVENT_SIZE + 1), routing_key="k")
    big = spark.range(3).select(F.lit("k").alias("routing_key"),
                                F.expr(f"CASE WHEN id = 2 THEN repeat('x', {ps.MAX_EVENT_SIZE + 1}) ELSE 'ok' END").alias("event"))
    files = sorted(Path(root).rglob("*.parquet"))
    with pytest.raises(ps.EventTooLargeError, match="an event of 8388609 bytes exceeds the 8388608-byte limit"):
        writer.write_events(big)
    assert table_versions(spark, root) == before
    assert sorted(Path(root).rglob("*.parquet")) == files  # the failed task removed what it wrote
    assert writer.write_event(b"x" * ps.MAX_EVENT_SIZE, routing_key="k").event_count == 1


@pytest.mark.connect
def test_bad_input_writes_nothing(manager, spark, root, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    before = table_versions(spark, root)
    with pytest.raises(ps.InvalidConfigError):
        writer.write_events(spark.createDataFrame([("k", "v")], "a string, b string"))
    with pytest.raises(ps.InvalidEventError):
        writer.write_events(spark.createDataFrame([("k", 1)], "routing_key string, event int"))
    with pytest.raises(ps.InvalidEventError):  # a few in-memory rows: checked in this process
        writer.write_events(spark.createDataFrame([("k", None)], "routing_key string, event binary"))
    with pytest.raises(ps.InvalidEventError):  # rows of a Spark job: checked by the job
        writer.write_events(spark.range(2).select(F.lit("k").alias("routing_key"),
                                                  F.lit(None).cast("binary").alias("event")))
    with pytest.raises(ps.InvalidEventError):
        writer.write_event(12, routing_key="k")
    assert table_versions(spark, root) == before


def test_empty_write_commits_nothing(manager, spark, root, stream2):
    scope, stream = stream2
    before = table_versions(spark, root)
    result = manager.create_event_writer(scope, stream).write_events(
        spark.createDataFrame([], "routing_key string, event binary"))
    assert result.event_count == 0 and result.version is None
    assert table_versions(spark, root) == before


def test_place_files_lays_out_task_extents_in_rank_order_after_the_tails():
    from pravega_spark.writers.routing import PendingFile, place_files

    files = [PendingFile(7, (0, 1), 0, 30),   # task 1 of segment 7
             PendingFile(7, (0, 0), 0, 50),   # task 0: goes first
             PendingFile(9, (0, 0), 0, 8),
             PendingFile(7, (0, 2), 0, 20),   # task 2, split into two files sharing its base
             PendingFile(7, (0, 2), 20, 45)]
    placements, lengths = place_files(files, {7: 100, 9: 0, 11: 5})
    assert placements == [(150, 180), (100, 150), (0, 8), (180, 225), (180, 225)]
    assert lengths == {7: 225, 9: 8, 11: 5}


@pytest.mark.cluster
@pytest.mark.slow
def test_small_and_parallel_write_paths_lay_out_the_same_offsets(manager, spark, stream2, monkeypatch):
    """A few in-memory events are routed and framed in this process; more are written by one
    Spark task (a small input of known size) or by several tasks (a global sort), each writing
    its files itself (pyarrow) or through Delta's writer after the offsets' UDF (stores that
    Python tasks cannot open). All give every segment the same contiguous layout, in
    ``order_by`` order (nulls first), then the DataFrame's own order."""
    from pravega_spark.writers import appender as appender_mod

    scope, stream = stream2
    import pyarrow as pa

    df = spark.createDataFrame(pa.table({"k": [f"dev-{i % 9}" for i in range(120)],
                                         "e": [f"payload-{i:03d}" for i in range(120)],
                                         "n": [None if i % 7 == 0 else (i * 37) % 11 for i in range(120)]}))
    assert appender_mod.is_small(df)
    layouts = []
    for rows, size, task_files in ((appender_mod.SMALL_WRITE_ROWS, appender_mod.SMALL_WRITE_BYTES, True),
                                   (0, appender_mod.SMALL_WRITE_BYTES, True), (0, -1, True),  # in process; one task; sorted
                                   (0, appender_mod.SMALL_WRITE_BYTES, False), (0, -1, False)):  # Delta's writer
        monkeypatch.setattr(appender_mod, "SMALL_WRITE_ROWS", rows)
        monkeypatch.setattr(appender_mod, "SMALL_WRITE_BYTES", size)
        w = manager.create_event_writer(scope, stream, writer_id=f"w{rows}{size}{task_files}")
        w.appender.task_files = task_files
        before = w.write_event(b"-", routing_key="sep").tail_stream_cut.positions
        result = w.write_events(df, routing_key="k", event="e", order_by="n")
        assert result.event_count == 120
        got = (manager.read_events(scope, stream, start=ps.StreamCut(f"{scope}/{stream}", before))
               .orderBy("segment_id", "offset").collect())
        layouts.append([(r.segment_id, r.offset - before[r.segment_id], r.routing_key, r.event) for r in got])
    assert all(layout == layouts[0] for layout in layouts) and len(layouts[0]) == 120


def test_a_writer_that_is_gone_leaves_no_session_behind(manager, stream2):
    """Each writer on the classic backend has a Spark session of its own (``newSession``: a
    session state, a Hadoop configuration of ~1,000 entries). Once the writer is gone, nothing of
    the library's keeps that session alive: a long-lived driver that makes a writer per job must
    not keep every one of them (it grew by one session per writer)."""
    scope, stream = stream2
    first = manager.create_event_writer(scope, stream)
    first.write_events(manager._store.spark.createDataFrame([("k", "e")], "routing_key string, event string"))
    session = weakref.ref(first._appender.session)
    assert session() is not manager._store.spark
    del first
    # pyspark's RDD.toDF keeps the session made last: make another before collecting
    manager.create_event_writer(scope, stream).write_events(
        manager._store.spark.createDataFrame([("k", "f")], "routing_key string, event string"))
    gc.collect()
    assert session() is None
