"""The public-API (``sql``) backend's own mechanisms, each scenario on both backends (the local
suite runs it on a classic session with ``PRAVEGA_SPARK_BACKEND`` set, the Connect tier on a
real Connect server): write numbers kept in write marks and applied once, fenced appends that
refuse stale tails and sealed segments, truncation by DELETEs that really removes rows,
``read_stream`` with ``availableNow``, and a VACUUM of a short retention without session
settings. On ``sql`` the ``both_backends`` guard fails any test in which pravega_spark set a
session setting."""

from __future__ import annotations

import os
import re
from datetime import timedelta

import pytest

import pravega_spark as ps
from tests.invariants import check_key_order, check_stream_consistent

pytestmark = [pytest.mark.connect, pytest.mark.both_backends]


def events_df(spark, rows):
    return spark.createDataFrame(rows, "routing_key string, event string")


@pytest.mark.both_backends(slow=("sql",))
def test_write_numbers_are_applied_once(spark, manager, stream2, delta_backend):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "numbered")
    rows = [(f"k{i % 3}", f"numbered:0000:{i:06d}") for i in range(12)]
    first = writer.write_events(events_df(spark, rows), write_number=1)
    replay = writer.write_events(events_df(spark, rows), write_number=1)
    lower = writer.write_events(events_df(spark, rows), write_number=0)
    second = writer.write_events(events_df(spark, rows[:3]), write_number=2)
    assert (first.event_count, replay.event_count, lower.event_count, second.event_count) == (12, 0, 0, 3)
    assert replay.tail_stream_cut == first.tail_stream_cut
    # a new writer object with the same id (a restarted process) is skipped too
    again = manager.create_event_writer(scope, stream, "numbered").write_events(events_df(spark, rows), write_number=2)
    assert again.event_count == 0
    assert manager.read_events(scope, stream).count() == 15
    # a numbered write whose known tails went stale: its first attempt must not record the number
    # (regression: a stale insert-only MERGE committed nothing but the number, and the retry was
    # skipped: the write was lost)
    manager.create_event_writer(scope, stream, "other").write_events(events_df(spark, rows[:4]))
    stale = writer.write_events(events_df(spark, rows[:5]), write_number=3)
    # (classic checks a writer's known tails against the log at its commit's snapshot: no retry)
    assert stale.event_count == 5 and stale.retries >= (1 if delta_backend == "sql" else 0)
    assert writer.write_events(events_df(spark, rows[:5]), write_number=3).event_count == 0
    assert manager.read_events(scope, stream).count() == 24


@pytest.mark.both_backends(slow=("sql",))
def test_fenced_append_refuses_stale_tails_and_sealed_segments(spark, manager, stream2, delta_backend):
    """Two writers whose known tails go stale: each retries from fresh tails (no overlap), and
    after a seal no write lands."""
    scope, stream = stream2
    a = manager.create_event_writer(scope, stream, "a")
    b = manager.create_event_writer(scope, stream, "b")
    rows = lambda w, n: [(f"k{i % 4}", f"{w}:{n:04d}:{i:06d}") for i in range(20)]  # noqa: E731
    a.write_events(events_df(spark, rows("a", 0)))
    b.write_events(events_df(spark, rows("b", 0)))  # a's tails are now stale
    result = a.write_events(events_df(spark, rows("a", 1)))
    assert result.retries >= (1 if delta_backend == "sql" else 0)  # classic: the tails checked in its snapshot
    event_rows = check_stream_consistent(spark, manager, scope, stream)
    assert len(event_rows) == 60
    check_key_order(event_rows)
    manager.seal_stream(scope, stream)
    with pytest.raises(ps.StreamSealedError):
        b.write_events(events_df(spark, rows("b", 1)))
    assert len(check_stream_consistent(spark, manager, scope, stream)) == 60


@pytest.mark.both_backends(slow=("sql",))
def test_truncation_deletes_below_the_cut_and_appends_go_on(spark, manager, stream2, delta_backend):
    """Truncation over Connect (partition-only DELETEs, a straddling write rewritten): what is
    below the cut is gone from the table, the head is the cut, and writers go on."""
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "t")
    first = writer.write_events(events_df(spark, [(f"k{i % 4}", f"t:0000:{i:06d}") for i in range(20)]))
    cut = first.tail_stream_cut
    writer.write_events(events_df(spark, [(f"k{i % 4}", f"t:0001:{i:06d}") for i in range(20)]))
    assert manager.truncate_stream(scope, stream, cut)
    assert manager.head_stream_cut(scope, stream) == cut
    left = [r.event.decode() for r in manager.read_events(scope, stream).collect()]
    assert sorted(left) == sorted(f"t:0001:{i:06d}" for i in range(20))
    stored = spark.read.format("delta").load(f"{manager.root}/{scope}/{stream}").where("record_type = 0")
    assert stored.count() == 20  # the truncated events are gone from the table, not just hidden
    writer.write_events(events_df(spark, [("k0", "t:0002:000000")]))
    assert len(check_stream_consistent(spark, manager, scope, stream)) == 21


@pytest.mark.both_backends(slow=("sql",))
def test_read_stream_with_available_now_delivers_each_event_once(spark, manager, stream2, delta_backend, tmp_path):
    """``read_stream`` as serverless runs it (``availableNow``): each run delivers what was
    appended since the last, across a scale, each event once and in order per key."""
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "s")
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")

    def run() -> None:
        query = (manager.read_stream(scope, stream).writeStream.format("delta")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(sink))
        query.awaitTermination(180)
        assert query.exception() is None

    writer.write_events(events_df(spark, [(f"k{i % 5}", f"s:0000:{i:06d}") for i in range(25)]))
    run()
    manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    writer.write_events(events_df(spark, [(f"k{i % 5}", f"s:0001:{i:06d}") for i in range(25)]))
    run()
    got = spark.read.format("delta").load(sink).select("routing_key", "segment_id", "offset", "event").collect()
    payloads = [r.event.decode() for r in got]
    assert sorted(payloads) == sorted([f"s:0000:{i:06d}" for i in range(25)] + [f"s:0001:{i:06d}" for i in range(25)])
    check_key_order(got)



@pytest.mark.both_backends(slow=("sql",))
def test_a_vacuum_of_a_short_retention_removes_deleted_bytes_and_keeps_the_tables_property(spark, manager, stream2,
                                                                                           delta_backend):
    """Truncated events leave storage at ``vacuum(retention=timedelta(0))``; on ``sql`` without
    the session setting that turns Delta's retention check off (the table's retention property
    is lowered for the command, then put back)."""
    from pravega_spark import _delta

    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "v")
    payload = "vacuumed-secret-0001"
    cut = writer.write_events(events_df(spark, [("k0", payload)] * 5)).tail_stream_cut
    writer.write_events(events_df(spark, [("k0", "kept")]))
    assert manager.truncate_stream(scope, stream, cut)
    events = f"{manager.root}/{scope}/{stream}"

    def files_holding(text: str) -> list[str]:
        import pyarrow.parquet as pq

        found = []
        for folder, _, names in os.walk(events.removeprefix("file:")):
            for name in names:
                if name.endswith(".parquet") and "_delta_log" not in folder:
                    values = pq.read_table(os.path.join(folder, name), columns=["event"]).column("event").to_pylist()
                    if text.encode() in values:
                        found.append(name)
        return found

    assert files_holding(payload)  # truncated, still on disk
    manager.vacuum(retention=timedelta(0))
    assert files_holding(payload) == []
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{events}`").collect()}
    assert "delta.deletedFileRetentionDuration" not in props, props
    assert [r.event.decode() for r in manager.read_events(scope, stream).collect()] == ["kept"]
    assert _delta.backend_for(spark).__class__.__name__ == ("SqlBackend" if delta_backend == "sql" else "ClassicBackend")


@pytest.mark.both_backends(slow=("sql",))
def test_handles_pickle_by_root_and_names_and_rebuild_in_the_active_session(spark, manager, stream2, delta_backend):
    """A ``StreamManager``, writer or reader group captured by a ``foreachBatch`` function is
    pickled by its root and names (no session, no JVM object) and rebuilt where it is unpickled;
    a rebuilt writer keeps its id, so its write numbers carry on."""
    import pickle

    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "pickled")
    assert writer.write_events(events_df(spark, [("k", "p:0")]), write_number=1).event_count == 1
    manager.create_reader_group(scope, "g", ps.ReaderGroupConfig({f"{scope}/{stream}": "earliest"}))
    group = manager.reader_group(scope, "g")
    blobs = [pickle.dumps(h) for h in (manager, writer, group)]
    assert all(len(b) < 2000 for b in blobs), [len(b) for b in blobs]
    again_manager, again_writer, again_group = (pickle.loads(b) for b in blobs)
    assert repr(again_manager) == repr(manager) and repr(again_writer) == repr(writer)
    assert repr(again_group) == repr(group)
    assert again_writer.write_events(events_df(spark, [("k", "p:0")]), write_number=1).event_count == 0
    assert again_writer.write_events(events_df(spark, [("k", "p:1")]), write_number=2).event_count == 1
    assert sorted(r.event.decode() for r in again_manager.read_events(scope, stream).collect()) == ["p:0", "p:1"]


@pytest.mark.both_backends(slow=("sql",))
def test_deleted_streams_and_key_value_tables_leave_storage_at_the_next_vacuum(spark, manager, stream2, delta_backend):
    """Bytes that ``delete_stream`` and ``delete_key_value_table`` removed are gone from storage
    after ``vacuum(retention=timedelta(0))``, though the stream or table has left the catalogue
    (the public-API backend empties their tables and records them for VACUUM; classic removes
    their folders)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    scope, stream = stream2
    secret = b"deleted-payload-7f3a"
    manager.create_event_writer(scope, stream, "d").write_events(events_df(spark, [("k", secret.decode())] * 3))
    manager.create_key_value_table(scope, "kv", ps.KeyValueTableConfiguration(partition_count=1, primary_key_length=4))
    manager.key_value_table(scope, "kv").put(b"key1", secret)
    root = manager.root.removeprefix("file:")

    def holders() -> list[str]:
        found = []
        for folder, _, names in os.walk(root):
            for name in names:
                if name.endswith(".parquet") and "_delta_log" not in folder:
                    table = pq.read_table(os.path.join(folder, name))
                    if any(secret in (v or b"") for c in table.column_names if pa.types.is_binary(table.schema.field(c).type)
                           for v in table.column(c).to_pylist()):
                        found.append(os.path.join(folder, name))
        return found

    assert len(holders()) >= 2
    manager.seal_stream(scope, stream)
    assert manager.delete_stream(scope, stream)
    assert manager.delete_key_value_table(scope, "kv")
    manager.vacuum(retention=timedelta(0))
    assert holders() == []
    manager.vacuum(retention=timedelta(0))  # the record is forgotten: nothing left to visit
    assert all(not p.startswith(f"{manager.root}/{scope}/") for p in manager.vacuum(retention=timedelta(0)))


def test_a_store_of_another_format_is_refused_in_one_line_touching_nothing(spark, root, manager, stream2,
                                                                          delta_backend):
    """The store records its format (3: a stream's bookkeeping in shard tables); a library that
    finds another refuses the store before reading or writing anything, in one line: a newer
    format names both, an older one (a format-2 store, or one from before the format was
    recorded) names the command that upgrades it in place."""
    from tests.helpers import table_versions

    scope, stream = stream2
    streams = f"{manager.root}/_pravega/streams"
    assert manager.controller.store.check_format() == 3
    for value, message in (("4", "has format 4, and this pravega_spark reads formats up to 3"),
                           ("2", "has format 2, and this pravega_spark reads format 3: upgrade the store in place "
                                 f"with `pravega-spark --root {manager.root} upgrade-store`")):
        spark.sql(f"ALTER TABLE delta.`{streams}` SET TBLPROPERTIES ('pravega_spark.store.format' = '{value}')")
        before = table_versions(spark, root)
        with pytest.raises(ps.StoreFormatError, match=re.escape(message)) as caught:
            ps.StreamManager(spark, root)
        assert "\n" not in str(caught.value)
        assert table_versions(spark, root) == before
    spark.sql(f"ALTER TABLE delta.`{streams}` UNSET TBLPROPERTIES ('pravega_spark.store.format')")
    with pytest.raises(ps.StoreFormatError, match="has format 1"):
        ps.StreamManager(spark, root)
    spark.sql(f"ALTER TABLE delta.`{streams}` SET TBLPROPERTIES ('pravega_spark.store.format' = '3')")
    assert ps.StreamManager(spark, root).read_events(scope, stream).count() == 0
