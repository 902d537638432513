"""Structured Streaming (``read_stream``) on a real store: real streaming queries with checkpoints
under tmp_path, Delta sinks, scaling and truncation while queries run."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections import defaultdict
from datetime import timedelta

import pytest

import pravega_spark as ps
from pravega_spark.readers import streaming
from pravega_spark.store import events_log
from tests.conftest import eventually
from tests.processes import spawn

SCOPE, STREAM = "iot", "sensors"


class Batches:
    """A ``foreachBatch`` function collecting each micro-batch's rows (test-sized data)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []  # (batch_id, routing_key, event, segment_id, offset)
        self.sizes: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = [(batch_id, r.routing_key, bytes(r.event), r.segment_id, r.offset)
                for r in df.select("routing_key", "event", "segment_id", "offset").collect()]
        with self.lock:
            self.rows += rows
            self.sizes.append(len(rows))

    def events(self) -> list[bytes]:
        return [r[2] for r in self.rows]

    def check_key_order(self) -> None:
        """Per key, ordering by (batch, segment, offset) gives the writers' sequence numbers in order."""
        by_key = defaultdict(list)
        for _, key, event, _, _ in sorted(self.rows, key=lambda r: (r[0], r[3], r[4])):
            if key is not None and event[:1] != b"L":
                by_key[key].append(int(event.split(b":")[1]))
        for key, seqs in by_key.items():
            assert seqs == sorted(seqs), f"key {key} out of order: {seqs}"


def _write(manager, start: int, n: int, keys: int = 8, writer: str = "w") -> list[bytes]:
    """Events ``k<i % keys>:<i>`` for i in [start, start+n): the number is the key's append order."""
    rows = [(f"k{i % keys}", f"k{i % keys}:{i:06d}") for i in range(start, start + n)]
    manager.create_event_writer(SCOPE, STREAM, writer).write_events(
        manager.spark.createDataFrame(rows, "routing_key string, event string"))
    return [e.encode() for _, e in rows]


def _run(manager, sink, checkpoint: str, **options):
    """One availableNow run of a read_stream query into ``sink``."""
    query = (manager.read_stream(SCOPE, STREAM, **options).writeStream.foreachBatch(sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    return query


@pytest.mark.cluster
@pytest.mark.s3
@pytest.mark.slow
def test_a_running_query_across_split_merge_transactions_and_large_events(manager, stream2, tmp_path):
    """Exactly once and per-key order while a split and a merge happen under a running query;
    staged transaction data never shows, then appears after commit; a large event arrives whole."""
    sink = Batches()
    expected = _write(manager, 0, 80)
    txn_writer = manager.create_transactional_writer(SCOPE, STREAM, "tw")
    txn = txn_writer.begin_txn()
    txn.write_events(manager.spark.createDataFrame([("tx", "tx:1"), ("tx", "tx:2")], "routing_key string, event string"))
    txn.flush()
    query = (manager.read_stream(SCOPE, STREAM).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="300 milliseconds").start())
    try:
        query.processAllAvailable()
        assert sorted(sink.events()) == sorted(expected)  # nothing staged is visible
        manager.scale_stream(SCOPE, STREAM, [0], [(0.0, 0.25), (0.25, 0.5)])
        expected += _write(manager, 80, 80)
        query.processAllAvailable()
        big = b"L" + os.urandom(3000)
        with manager.create_event_writer(SCOPE, STREAM, "lw").stream_event("k3", chunk_size=1024) as large:
            large.write(big)
            large.commit()
        txn.commit()
        segments = manager.segments(SCOPE, STREAM, epoch=1).orderBy("key_start").collect()
        manager.scale_stream(SCOPE, STREAM, [segments[0].segment_id, segments[1].segment_id], [(0.0, 0.5)])
        expected += _write(manager, 160, 80)
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(sink.events()) == sorted(expected + [b"tx:1", b"tx:2", big])  # exactly once, the event whole
    assert len(sink.sizes) >= 3
    sink.check_key_order()
    progress = manager.stream_progress(query)
    assert progress.unread_bytes == 0 and progress.stream_cut == manager.tail_stream_cut(SCOPE, STREAM)


def check_commit_rules(events_path: str) -> None:
    """Delta's source needs these of every events-table commit: one that adds events (data files
    of real segments, ``dataChange=true``) removes nothing with ``dataChange=true``, except a
    truncation's DELETE (skipped by ``skipChangeCommits``: its adds are rows already delivered)."""
    log_dir = os.path.join(events_path.replace("file:", ""), "_delta_log")
    for name in sorted(n for n in os.listdir(log_dir) if n.endswith(".json")):
        actions = [json.loads(line) for line in open(os.path.join(log_dir, name))]
        adds = [a["add"] for a in actions if "add" in a and a["add"]["dataChange"]
                and int(a["add"]["partitionValues"]["segment_id"]) >= 0]
        removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
        operation = next(a["commitInfo"]["operation"] for a in actions if "commitInfo" in a)
        assert not (adds and removes) or operation == "DELETE", f"commit {name} ({operation}) mixes adds and removes"


@pytest.mark.slow
def test_rate_limited_runs_keep_key_order_from_a_start_cut_and_from_latest(manager, stream2, tmp_path):
    """A rate limit splits the snapshot (including a transaction whose files were written before
    the appends committed ahead of it, and a large event) into several batches in append order."""
    txn = manager.create_transactional_writer(SCOPE, STREAM, "tw").begin_txn()
    txn.write_events(manager.spark.createDataFrame([("k1", "k1:900000"), ("k2", "k2:900001")],
                                                   "routing_key string, event string"))
    expected = _write(manager, 0, 40)
    cut = manager.tail_stream_cut(SCOPE, STREAM)
    after_cut = _write(manager, 40, 40)
    txn.commit()
    after_cut += [b"k1:900000", b"k2:900001"] + _write(manager, 1000000, 16)
    big = b"L" + os.urandom(2500)
    with manager.create_event_writer(SCOPE, STREAM, "lw").stream_event("k3", chunk_size=1024) as large:
        large.write(big)
        large.commit()  # three chunk files: a two-file limit splits them
    after_cut += [big] + _write(manager, 2000000, 16)
    limited = Batches()
    _run(manager, limited, str(tmp_path / "ck1"), max_files_per_trigger=2)
    assert sorted(limited.events()) == sorted(expected + after_cut) and len(limited.sizes) >= 6
    limited.check_key_order()
    from_cut = Batches()
    _run(manager, from_cut, str(tmp_path / "ck2"), start=cut, max_bytes_per_trigger=2048)
    assert sorted(from_cut.events()) == sorted(after_cut) and len(from_cut.sizes) >= 3
    from_cut.check_key_order()
    latest = Batches()
    _run(manager, latest, str(tmp_path / "ck3"), start="latest")
    assert latest.events() == []
    new = _write(manager, 3000000, 8)
    _run(manager, latest, str(tmp_path / "ck3"), start="latest")
    assert sorted(latest.events()) == sorted(new)
    check_commit_rules(manager.controller.store.events_path(SCOPE, STREAM))


@pytest.mark.slow
def test_group_cut_follows_the_query_and_drives_retention_truncation_and_vacuum(manager, stream2, tmp_path, caplog):
    manager.update_stream(SCOPE, STREAM, ps.StreamConfiguration(
        scaling_policy=ps.ScalingPolicy.fixed(2), retention_policy=ps.RetentionPolicy.by_size_bytes(0)))
    manager.create_reader_group(SCOPE, "g", ps.ReaderGroupConfig(
        {f"{SCOPE}/{STREAM}": "earliest"}, retention_type=ps.StreamDataRetention.MANUAL_RELEASE_AT_USER_STREAMCUT))
    a = _write(manager, 0, 40)
    reached = manager.tail_stream_cut(SCOPE, STREAM)
    group_sink, behind_sink = Batches(), Batches()
    first = _run(manager, group_sink, str(tmp_path / "ck"), reader_group="g")
    progress = manager.stream_progress(first)  # returns once the listener published the last batch

    def published():
        rows = manager.subscribers(SCOPE, STREAM).collect()
        return {e.segment_id: e.offset for e in rows[0].stream_cut} if rows else {}

    assert published() == dict(reached.positions) == dict(progress.stream_cut.positions)
    _run(manager, behind_sink, str(tmp_path / "ck-behind"))  # a second query, without a group
    assert sorted(group_sink.events()) == sorted(a) == sorted(behind_sink.events())
    b = _write(manager, 40, 40)  # beyond the group's cut: retention must keep it
    run = [o for o in manager.run_retention(scope=SCOPE, stream=STREAM)][0]
    assert run.truncated_at == reached and manager.head_stream_cut(SCOPE, STREAM) == reached
    c1 = _write(manager, 80, 40)
    head = manager.tail_stream_cut(SCOPE, STREAM)
    c2 = _write(manager, 120, 40)
    manager.truncate_stream(SCOPE, STREAM, head)  # b and c1 go before the group's query reads them
    query = _run(manager, group_sink, str(tmp_path / "ck"), reader_group="g")  # resumes at the head
    assert sorted(group_sink.events()) == sorted(a + c2)
    [metrics] = [m for n, m in query.lastProgress.observedMetrics.items() if n.startswith(streaming.OBSERVED)]
    assert metrics["truncated_rows"] == 80
    eventually(lambda: "80 events of iot/sensors were truncated before it read them" in caplog.text, timeout=30)
    eventually(lambda: published() == dict(manager.tail_stream_cut(SCOPE, STREAM).positions), timeout=30)
    assert not set(b + c1) & set(manager.read_events(SCOPE, STREAM).toPandas()["event"].map(bytes))
    manager.vacuum(SCOPE, STREAM, retention=timedelta(0))  # b's and c1's files are gone
    query = (manager.read_stream(SCOPE, STREAM).writeStream
             .foreachBatch(ps.idempotent_delta_sink(str(tmp_path / "behind"), "behind"))
             .option("checkpointLocation", str(tmp_path / "ck-behind")).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="TruncatedDataError") as failed:
        query.awaitTermination()
    assert "restart the query with a new checkpoint location" in str(failed.value)
    eventually(lambda: "TruncatedDataError: streaming query" in caplog.text
               and "restart it with a new checkpoint location" in caplog.text, timeout=30)
    check_commit_rules(manager.controller.store.events_path(SCOPE, STREAM))


@pytest.mark.slow
def _held_first_batch():
    """A ``Batches`` sink whose function holds batch 0 until ``release`` is set (``first``: it is
    held): the sink, the function, and the two events."""
    first, release = threading.Event(), threading.Event()
    sink = Batches()

    def held(df, batch_id):
        sink(df, batch_id)
        if batch_id == 0:
            first.set()
            assert release.wait(120)

    return sink, held, first, release


def _four_commits(manager) -> list[bytes]:
    """Four commits of two files each (a limit of two files makes batch 0 the first commit)."""
    a = []
    for i in range(4):
        a += _write(manager, 20 * i, 20)
    return a


def _overtake(manager, sink, first, release, a: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """With batch 0 held, truncate the stream at its tail (above the query) and write 20 more
    events; release batch 0 and wait until they arrive: (the events batch 0 delivered, the new)."""
    assert first.wait(120)
    delivered = sink.events()
    assert delivered and set(delivered) < set(a)
    manager.truncate_stream(SCOPE, STREAM, manager.tail_stream_cut(SCOPE, STREAM))  # above the query
    c = _write(manager, 80, 20)
    release.set()
    eventually(lambda: sorted(sink.events()) == sorted(delivered + c), timeout=120)
    return delivered, c


@pytest.mark.slow
def test_truncations_under_a_running_query_above_and_below_its_position(manager, stream2, tmp_path, caplog):
    """A running query, held inside its first batch, is overtaken by a truncation: its later
    batches skip what was truncated (counted, warned) and go on from the head. A truncation
    below its position later changes nothing for it."""
    sink, held, first, release = _held_first_batch()
    a = _four_commits(manager)
    query = (manager.read_stream(SCOPE, STREAM, max_files_per_trigger=2).writeStream.foreachBatch(held)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())
    try:
        delivered, c = _overtake(manager, sink, first, release, a)
        eventually(lambda: sum(m["truncated_rows"] or 0 for p in query.recentProgress for n, m in
                               p.observedMetrics.items() if n.startswith(streaming.OBSERVED)) == len(a) - len(delivered),
                   timeout=30)
        eventually(lambda: "events of iot/sensors were truncated before it read them" in caplog.text, timeout=30)
        manager.truncate_stream(SCOPE, STREAM, manager.tail_stream_cut(SCOPE, STREAM))  # below it now
        d = _write(manager, 100, 20)
        eventually(lambda: sorted(sink.events()) == sorted(delivered + c + d), timeout=120)
        assert query.isActive and query.exception() is None
    finally:
        release.set()
        query.stop()
    sink.check_key_order()


@pytest.mark.slow
def test_a_head_sink_query_overtaken_by_a_truncation_drops_exactly_the_truncated_events(manager, stream2, tmp_path,
                                                                                       caplog):
    """``read_stream(head="sink")`` under ``ps.foreach_batch``: no head lookup in the plan; the
    wrapper reads the head on the driver at each batch and drops exactly the events a truncation
    removed after the query planned them (counted and warned), then goes on from the head."""
    sink, held, first, release = _held_first_batch()
    a = _four_commits(manager)
    events = manager.read_stream(SCOPE, STREAM, max_files_per_trigger=2, head="sink")
    assert "Subquery" not in events._jdf.queryExecution().analyzed().toString()  # no head in the plan
    query = (events.writeStream.foreachBatch(ps.foreach_batch(held)).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        delivered, c = _overtake(manager, sink, first, release, a)
        dropped = [int(m.group(1)) for m in re.finditer(r"(\d+) events were truncated before the query", caplog.text)]
        assert sum(dropped) == len(a) - len(delivered)
        assert query.isActive and query.exception() is None
        progress = manager.stream_progress(query)
        assert progress is not None and progress.stream == f"{SCOPE}/{STREAM}"
    finally:
        release.set()
        query.stop()
    sink.check_key_order()


def test_a_head_sink_dataframe_under_another_sink_stops_with_a_clear_error(manager, stream2, tmp_path, caplog):
    """A ``head="sink"`` DataFrame written by a memory or console sink stops before its first
    batch (no row delivered); under a foreachBatch function that is not the library's, after the
    first batch. Each says why in one line, and ``stream_progress`` raises it."""
    _write(manager, 0, 20)
    for kind in ("memory", "console"):
        writer = manager.read_stream(SCOPE, STREAM, head="sink").writeStream.format(kind)
        query = (writer.queryName("copy") if kind == "memory" else writer).start()
        eventually(lambda q=query: not q.isActive, timeout=60)
        assert query.lastProgress is None  # no micro-batch ran
        assert f"is written by {'MemorySink' if kind == 'memory' else 'ConsoleTable'}" in caplog.text or \
            "does not apply the stream's head; the query was stopped before its first micro-batch" in caplog.text
        with pytest.raises(ps.InvalidConfigError, match="head='sink'"):
            manager.stream_progress(query)
    assert manager.spark.sql("select count(*) from copy").first()[0] == 0
    seen = Batches()
    query = (manager.read_stream(SCOPE, STREAM, head="sink").writeStream.foreachBatch(seen)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())
    eventually(lambda: not query.isActive, timeout=60)
    assert "reached a foreachBatch function that does not apply the stream's head" in caplog.text
    with pytest.raises(ps.InvalidConfigError, match="ps.foreach_batch"):
        manager.stream_progress(query)
    with pytest.raises(ps.InvalidConfigError, match="head must be one of"):
        manager.read_stream(SCOPE, STREAM, head="somewhere")


def _file(segment: int, base: int, end: int, data_change: bool = True) -> dict:
    return {"partitionValues": {"segment_id": str(segment), "base_offset": str(base), "end_offset": str(end)},
            "dataChange": data_change}


@pytest.mark.both_backends
@pytest.mark.connect
def test_every_commit_that_adds_events_reaches_a_running_query(manager, stream2, tmp_path, delta_backend):
    """A transaction's commit, a large event's commit and numbered writes (twice the same number:
    the second is skipped) all reach a query run again from its checkpoint into a plain Delta
    sink: none of those commits removes a file (Delta's source, with ``skipChangeCommits``, skips
    every add of a commit that does; the transaction's commit once updated its state's mark row
    in place on the public-API backend). The log's commits show it, on both backends."""
    spark = manager.spark
    writer = manager.create_event_writer(SCOPE, STREAM, "w")
    writer.write_event("first", "k1")
    txn = manager.create_transactional_writer(SCOPE, STREAM, "t").begin_txn()
    txn.write_event("in-txn", "k2")
    large = writer.stream_event("k3", chunk_size=1024)
    large.write(b"L" * 3000)
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "cp")

    def run() -> list[bytes]:
        query = (manager.read_stream(SCOPE, STREAM).select("event").writeStream.format("delta")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(sink))
        query.awaitTermination()
        assert manager.stream_progress(query) is not None  # raises SkippedEventsError on a gap
        return sorted(bytes(r.event) for r in spark.read.format("delta").load(sink).collect())

    assert run() == [b"first"]
    before = manager._store.events_version(SCOPE, STREAM)
    large.commit()
    txn.commit()
    writer.write_event("numbered", "k4", write_number=7)
    writer.write_event("numbered again", "k4", write_number=7)
    assert run() == sorted([b"first", b"in-txn", b"L" * 3000, b"numbered"])
    backend = manager._store.backend
    changes = backend.file_changes(manager._store.events_path(SCOPE, STREAM), before + 1,
                                   manager._store.events_version(SCOPE, STREAM))
    assert events_log.skipped_events(changes) == []
    adding = [(v, removes) for v, adds, removes in changes if events_log.emitted_adds(adds, removes)]
    assert len(adding) >= 3 and all(not removes for _, removes in adding)


def test_skipped_events_finds_new_events_only_in_commits_the_source_skips():
    appended = (1, [_file(0, 0, 100), _file(1, 0, 50)], [])
    compacted = (2, [_file(0, 0, 100, False)], [_file(0, 0, 60, False), _file(0, 60, 100, False)])
    straddle = (3, [_file(0, 60, 100)], [_file(0, 60, 100), _file(0, 0, 60)])  # truncation at 80
    staged = (4, [_file(-7, 0, 10)], [_file(-7, 0, 10)])  # a transaction's manifest rows
    assert events_log.skipped_events([appended, compacted, straddle, staged]) == []
    rewritten_and_new = (5, [_file(0, 100, 150), _file(0, 150, 160)], [_file(0, 100, 150)])
    beyond = (6, [_file(1, 0, 80, False)], [_file(1, 0, 50, False)])  # compaction claiming more
    other_segment = (7, [_file(2, 0, 10)], [_file(1, 0, 50)])
    assert events_log.skipped_events([rewritten_and_new, beyond, other_segment]) == [
        (5, 0, 150, 160), (6, 1, 0, 80), (7, 2, 0, 10)]
    offset = streaming.DeltaOffset
    assert streaming.consumed_versions(None, offset(9, -1, True), 5) == (1, 0)  # inside the snapshot
    assert streaming.consumed_versions(None, offset(9, -1, False), 5) == (5, 8)
    assert streaming.consumed_versions(offset(4, 2, True), offset(9, 3, False), 0) == (5, 9)
    assert streaming.consumed_versions(offset(6, 1, False), offset(9, -1, False), 0) == (6, 8)


@pytest.mark.slow
def test_a_batch_that_would_skip_events_stops_the_query_loudly(manager, stream2, tmp_path, caplog):
    """A commit written outside the library (a replaceWhere overwrite: removes and adds in one
    commit) adds events that Delta's source skips: the query stops, says so, and the group's cut
    does not move past them."""
    manager.create_reader_group(SCOPE, "g", ps.ReaderGroupConfig(
        {f"{SCOPE}/{STREAM}": "earliest"}, retention_type=ps.StreamDataRetention.MANUAL_RELEASE_AT_USER_STREAMCUT))
    sink = Batches()
    _write(manager, 0, 40)
    manager.stream_progress(_run(manager, sink, str(tmp_path / "ck"), reader_group="g"))
    before = manager.subscribers(SCOPE, STREAM).collect()[0].stream_cut
    path = manager.controller.store.events_path(SCOPE, STREAM)
    events = manager.spark.read.format("delta").load(path)
    segment, tail = events.where("segment_id >= 0").groupBy("segment_id").agg({"end_offset": "max"}).orderBy(
        "segment_id").first()
    old = events.where(f"segment_id = {segment}")
    new = old.where("record_type = 0").limit(1).selectExpr(
        "segment_id", f"{tail}L AS base_offset", f"{tail}L + rel_next_offset - rel_offset AS end_offset", "0L AS rel_offset",
        "rel_next_offset - rel_offset AS rel_next_offset", "record_type", "routing_key", "CAST('rogue' AS BINARY) AS event",
        "writer_id", "write_time", "rel_event_offset")
    old.unionByName(new).write.format("delta").mode("overwrite").option("replaceWhere", f"segment_id = {segment}").save(path)
    _write(manager, 40, 16)
    query = _run(manager, sink, str(tmp_path / "ck"), reader_group="g")
    with pytest.raises(ps.SkippedEventsError, match=f"segment {segment} offsets {tail}-"):
        manager.stream_progress(query)
    assert "added events that Delta's streaming source skips" in caplog.text
    assert b"rogue" not in sink.events()
    assert manager.subscribers(SCOPE, STREAM).collect()[0].stream_cut == before  # not published past the gap


def test_bad_read_stream_arguments_are_refused(manager, stream2):
    _write(manager, 0, 8)
    head = manager.head_stream_cut(SCOPE, STREAM)
    with pytest.raises(ps.InvalidStreamCutError):
        manager.read_stream(SCOPE, STREAM, start=ps.StreamCut("iot/other", dict(head.positions)))
    with pytest.raises(ps.InvalidStreamCutError):
        manager.read_stream(SCOPE, STREAM, start="newest")
    with pytest.raises(ps.InvalidConfigError):
        manager.read_stream(SCOPE, STREAM, max_bytes_per_trigger=0)
    with pytest.raises(ps.InvalidConfigError):
        manager.read_stream(SCOPE, STREAM, max_files_per_trigger=-1)
    manager.create_reader_group(SCOPE, "none", ps.ReaderGroupConfig({f"{SCOPE}/{STREAM}": "earliest"}))
    with pytest.raises(ps.InvalidConfigError, match="NONE"):
        manager.read_stream(SCOPE, STREAM, reader_group="none")
    with pytest.raises(ps.ReaderGroupNotFoundError):
        manager.read_stream(SCOPE, STREAM, reader_group="missing")
    with pytest.raises(ps.StreamNotFoundError):
        manager.read_stream(SCOPE, "missing")
    tail = manager.tail_stream_cut(SCOPE, STREAM)
    manager.truncate_stream(SCOPE, STREAM, tail)
    with pytest.raises(ps.TruncatedDataError):
        manager.read_stream(SCOPE, STREAM, start=head)


@pytest.mark.process
@pytest.mark.slow
def test_a_query_process_killed_mid_batch_then_restarted_delivers_each_event_once(manager, stream2, tmp_path):
    """The worker's query writes a batch to the sink, then is SIGKILLed before Spark commits it:
    the restarted query replays that batch (the sink skips it) and goes on, exactly once."""
    expected = []
    for i in range(4):
        expected += _write(manager, 40 * i, 40)
    stall, sink, checkpoint = tmp_path / "stall", str(tmp_path / "sink"), str(tmp_path / "ck")
    proc = spawn("read-stream", "--root", manager.root, "--sink", sink, "--checkpoint", checkpoint,
                 "--stall-file", str(stall))
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("WROTE 1"):
                stall.touch()  # the next batch stalls after its write
            if line.startswith("STALLED"):
                break
        assert lines and lines[-1].startswith("STALLED"), "".join(lines) + proc.stderr.read()[-3000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    written = manager.spark.read.format("delta").load(sink).count()
    assert 0 < written < len(expected)  # killed part-way
    expected += _write(manager, 1000, 40)
    query = (manager.read_stream(SCOPE, STREAM).writeStream.foreachBatch(ps.idempotent_delta_sink(sink, "copy"))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    got = [bytes(r.event) for r in manager.spark.read.format("delta").load(sink).select("event").collect()]
    assert sorted(got) == sorted(expected)  # each event exactly once
