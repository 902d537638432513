"""Large events: staging, atomic commit, assembly, bounded-memory reads, abort and clean-up."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from datetime import datetime, timedelta, timezone

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

import pravega_spark as ps
from pravega_spark.readers.large_event_reader import assemble_large_events
from pravega_spark.store.schema import RECORD_CHUNK, RECORD_CHUNK_END, RECORD_EVENT, RECORD_TRUNCATE
from pravega_spark.store.store import Store
from pravega_spark.writers.large_events import chunk_framing, transient_partition
from tests.helpers import events_rows
from tests.invariants import check_stream_consistent
from tests.processes import spawn
from tests.workers import large_payload

MIB = 1 << 20
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _write_large(writer, payload: bytes, key: str = "key-0", chunk_size: int = MIB, piece: int = 300_000):
    """Write ``payload`` as one large event in uneven pieces; returns the commit's result."""
    with writer.stream_event(routing_key=key, chunk_size=chunk_size) as event:
        for i in range(0, len(payload), piece):
            event.write(payload[i:i + piece])
        return event.commit()


def _transient_rows(spark, root):
    """The stream's manifests in its transient shard table."""
    store = Store(spark, root)
    path = store.transient_path("iot", "sensors")
    return len(store.shard_rows("transient", "iot", "sensors")) if store.backend.exists(path) else 0


# ---- pure ---------------------------------------------------------------------------------------
def test_chunk_framing_puts_one_header_before_the_first_chunk():
    assert chunk_framing(100, 0, 10) == (100, 118)  # header + 10 bytes
    assert chunk_framing(100, 10, 5) == (118, 123)  # contiguous with the first chunk
    assert chunk_framing(100, 15, 0) == (123, 123)


# the events with absolute offsets (``Store.events``, without the file bounds)
VIEW_DDL = ("segment_id long, offset long, next_offset long, record_type int, routing_key string, "
            "event binary, writer_id string, write_time timestamp, event_offset long")


def _rows(spark, rows):
    full = [(sid, off, nxt, rt, "k", ev, "w", T0, eo) for sid, off, nxt, rt, ev, eo in rows]
    return spark.createDataFrame(full, VIEW_DDL)


def test_assembly_joins_complete_events_and_drops_partial_ones(spark):
    events = _rows(spark, [
        (0, 0, 10, RECORD_EVENT, b"ab", None),               # a regular event
        (0, 10, 21, RECORD_CHUNK, b"xyz", 10),               # large event at 10: 3 chunks, shuffled
        (0, 24, 26, RECORD_CHUNK_END, b"!!", 10),
        (0, 21, 24, RECORD_CHUNK, b"uvw", 10),
        (0, 26, 34, RECORD_EVENT, b"", None),
        (1, 50, 61, RECORD_CHUNK, b"abc", 40),                # its first chunk is not there
        (1, 61, 63, RECORD_CHUNK_END, b"de", 40),
        (1, 70, 81, RECORD_CHUNK, b"abc", 70),                # no last chunk (read range ends inside)
        (2, 0, 11, RECORD_CHUNK, b"abc", 0),                  # a gap between its chunks
        (2, 12, 14, RECORD_CHUNK_END, b"de", 0),
    ])
    out = events.transform(assemble_large_events).orderBy("segment_id", "offset")
    expected = _rows(spark, [
        (0, 0, 10, RECORD_EVENT, b"ab", None),
        (0, 10, 26, RECORD_EVENT, b"xyzuvw!!", 10),
        (0, 26, 34, RECORD_EVENT, b"", None),
    ])
    assert_df_equality(out, expected, ignore_nullable=True)


# ---- writes and reads -------------------------------------------------------------------------------
# the sizes on each side of the regular limit run in the cluster and S3 tiers too (executors in
# their own JVMs write and assemble them; chunks on an object store); 0 and 1 in the local suite
ON_EVERY_TIER = (pytest.mark.cluster, pytest.mark.s3)


@pytest.mark.slow
@pytest.mark.parametrize("size", [0, 1, pytest.param(ps.MAX_EVENT_SIZE - 1, marks=ON_EVERY_TIER),
                                  pytest.param(ps.MAX_EVENT_SIZE + 1, marks=ON_EVERY_TIER)])
def test_round_trip_around_the_regular_limit(spark, root, manager, stream2, size):
    writer = manager.create_event_writer("iot", "sensors", writer_id="big")
    payload = large_payload(size, seed=size)
    result = _write_large(writer, payload, chunk_size=ps.MAX_EVENT_SIZE, piece=3 * MIB)
    assert (result.event_count, result.byte_count) == (1, 8 + size)
    # chunk assembly (a window over chunks and a second scan) only where chunks may be
    chunked = size > ps.MAX_EVENT_SIZE
    assert manager.controller.store.may_hold_chunks("iot", "sensors", [0, 1]) is chunked
    plan = manager.read_events("iot", "sensors")._jdf.queryExecution().optimizedPlan().toString()
    assert ("Window" in plan) is chunked
    rows = manager.read_events("iot", "sensors").collect()
    assert len(rows) == 1 and bytes(rows[0].event) == payload
    raw = [r for r in events_rows(spark, root, "iot", "sensors") if r.record_type != RECORD_TRUNCATE]
    if size <= ps.MAX_EVENT_SIZE:  # written as a regular event
        assert [r.record_type for r in raw] == [RECORD_EVENT]
    else:
        assert sorted(r.record_type for r in raw) == [RECORD_CHUNK_END, RECORD_CHUNK]
    # one header: the segment grew by 8 + size
    assert sum(result.tail_stream_cut.positions.values()) == 8 + size
    with manager.open_event(rows[0]) as event:
        assert event.size == size and event.read() == payload
    with manager.open_event(rows[0], window_chunks=1) as event:  # the pre-Arrow path, one chunk per job
        chunks = [start for start, _ in event._chunks]
        assert b"".join(p for _, p in event._fetch_rows(chunks)) == payload
    check_stream_consistent(spark, manager, "iot", "sensors")
    assert _transient_rows(spark, root) == 0


@pytest.mark.slow
def test_round_trip_of_100_mib_with_checksums(spark, root, manager, stream2):
    writer = manager.create_event_writer("iot", "sensors", writer_id="big")
    payload = large_payload(100 * MIB)
    digest = hashlib.sha256(payload).hexdigest()
    result = _write_large(writer, payload, chunk_size=ps.MAX_EVENT_SIZE, piece=5 * MIB)
    assert result.byte_count == 8 + 100 * MIB
    del payload
    # assembled by read_events (checksum computed in Spark), and streamed chunk by chunk
    row = (manager.read_events("iot", "sensors")
           .select("scope", "stream", "segment_id", "offset", F.length("event").alias("n"),
                   F.sha2("event", 256).alias("sha")).collect())
    assert [(r.n, r.sha) for r in row] == [(100 * MIB, digest)]
    streamed = hashlib.sha256()
    with manager.open_event(row[0], window_chunks=4) as event:
        chunks = 0
        for chunk in event.iter_chunks():
            streamed.update(chunk)
            chunks += 1
    assert streamed.hexdigest() == digest and chunks == 13  # 12 x 8 MiB + 4 MiB
    check_stream_consistent(spark, manager, "iot", "sensors")


@pytest.mark.both_backends(slow=("sql",))
def test_chunks_are_written_once_and_committed_as_one_event(spark, root, manager, stream2, delta_backend):
    writer = manager.create_event_writer("iot", "sensors", writer_id="big")
    payload = large_payload(int(2.5 * MIB))
    event = writer.stream_event("key-0", chunk_size=MIB)
    event.write(payload)
    assert event.staged_chunks == 2  # staged as they filled; the last half chunk is buffered
    result = event.commit()
    raw = sorted((r for r in events_rows(spark, root, "iot", "sensors") if r.segment_id >= 0), key=lambda r: r.offset)
    assert [r.record_type for r in raw] == [RECORD_CHUNK, RECORD_CHUNK, RECORD_CHUNK_END]
    assert b"".join(bytes(r.event) for r in raw) == payload
    assert [bytes(r.event) for r in manager.read_events("iot", "sensors").collect()] == [payload]
    assert _transient_rows(spark, root) == 0
    chunks_at = (spark.read.format("delta").option("versionAsOf", result.version)
                 .load(f"{root}/iot/sensors").where("segment_id >= 0").count())
    assert chunks_at == 3  # the commit's version (over Connect: found when asked)
    if delta_backend == "sql":  # the staged rows were copied by the commit, then deleted
        assert not [r for r in events_rows(spark, root, "iot", "sensors") if r.record_type in (RECORD_CHUNK, RECORD_CHUNK_END)
                    and r.segment_id < 0]
        return
    # written once: the commit adds the staged chunk files themselves, named under the directories
    # of their places (a hard link; the staged names are gone), and the bytes on storage under the
    # events table are about the payload's size (not twice it)
    with open(f"{root}/iot/sensors/_delta_log/{result.version:020d}.json") as f:
        adds = [json.loads(line)["add"] for line in f if '"add"' in line]
    assert len(adds) == 3 and all(a["path"].startswith("segment_id={segment_id}/base_offset={base_offset}/end_offset="
                                                       "{end_offset}/".format(**a["partitionValues"])) for a in adds)
    assert not os.listdir(f"{root}/iot/sensors/transient={event.transient_id}")
    on_disk = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(f"{root}/iot/sensors")
                  for n in names if n.endswith(".parquet"))
    assert len(payload) <= on_disk < 1.05 * len(payload)
    assert _transient_rows(spark, root) == 0


@pytest.mark.slow
@pytest.mark.both_backends
def test_order_with_regular_events_on_the_same_key_and_cuts_never_split_it(spark, root, manager, stream2, delta_backend):
    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    big = large_payload(3 * MIB + 5)
    writer.write_event(b"before", routing_key="key-0")
    event = writer.stream_event("key-0", chunk_size=MIB)
    event.write(big)
    writer.write_event(b"during", routing_key="key-0")  # appended before the large event commits
    during = manager.tail_stream_cut("iot", "sensors")  # a cut taken while the large event is staged
    event.commit()
    writer.write_event(b"after", routing_key="key-0")
    rows = manager.read_events("iot", "sensors").orderBy("segment_id", "offset").collect()
    assert [bytes(r.event) for r in rows] == [b"before", b"during", big, b"after"]
    assert len({r.segment_id for r in rows}) == 1
    # the cut taken during the write holds none of it, the rest holds all of it
    assert [bytes(r.event) for r in manager.read_events("iot", "sensors", end=during).orderBy("offset").collect()] == [b"before", b"during"]
    later = manager.read_events("iot", "sensors", start=during).orderBy("offset").collect()
    assert [bytes(r.event) for r in later] == [big, b"after"]
    # offsets inside the large event are not event boundaries
    sid, large_at = rows[2].segment_id, rows[2].offset
    inside = {**manager.tail_stream_cut("iot", "sensors").positions, sid: large_at + 8 + MIB}
    with pytest.raises(ps.InvalidStreamCutError):
        manager.validate_stream_cut("iot", "sensors", ps.StreamCut("iot/sensors", inside))
    with pytest.raises(ps.NoSuchEventError):
        manager.open_event(ps.EventPointer("iot/sensors", sid, large_at + 8 + MIB))
    # stream_cut_at: the large event's chunks share one commit time: never split
    at = manager.stream_cut_at("iot", "sensors", rows[2].write_time.replace(tzinfo=timezone.utc))
    assert at.positions[sid] == rows[3].offset
    check_stream_consistent(spark, manager, "iot", "sensors")

    # truncation at a cut after the large event removes every chunk of it
    manager.truncate_stream("iot", "sensors", ps.StreamCut("iot/sensors", dict(at.positions)))
    assert not [r for r in events_rows(spark, root, "iot", "sensors") if r.record_type in (RECORD_CHUNK, RECORD_CHUNK_END)]
    assert [bytes(r.event) for r in manager.read_events("iot", "sensors").collect()] == [b"after"]
    with pytest.raises(ps.TruncatedDataError):
        manager.open_event(ps.EventPointer("iot/sensors", sid, large_at))


@pytest.mark.both_backends(slow=("sql",))
def test_abort_close_and_oversize_leave_nothing_and_remove_staged_data(spark, root, manager, stream2, delta_backend):
    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    before = manager.tail_stream_cut("iot", "sensors")
    aborted = writer.stream_event("key-0", chunk_size=MIB)
    aborted.write(large_payload(2 * MIB + 1))
    assert aborted.staged_chunks == 2 and _transient_rows(spark, root) == 2
    aborted.abort()
    assert _transient_rows(spark, root) == 0
    with pytest.raises(ValueError):
        aborted.write(b"more")  # closed, like any file
    with pytest.raises(RuntimeError):  # leaving the block by an exception aborts
        with writer.stream_event("key-1", chunk_size=MIB) as event:
            event.write(large_payload(MIB + 1))
            raise RuntimeError("producer failed")
    with writer.stream_event("key-2", chunk_size=MIB) as event:  # no commit(): closed = aborted
        event.write(large_payload(MIB + 1))
    oversized = writer.stream_event("key-3", chunk_size=MIB)
    oversized.write(large_payload(MIB + 1))
    with pytest.raises(ps.EventTooLargeError):
        oversized.write(bytes(ps.MAX_LARGE_EVENT_SIZE))  # refused before a byte is copied
    assert oversized.closed and _transient_rows(spark, root) == 0
    with pytest.raises(ps.InvalidConfigError):
        writer.stream_event("key-4", chunk_size=100)
    assert manager.tail_stream_cut("iot", "sensors") == before
    assert manager.read_events("iot", "sensors").count() == 0


@pytest.mark.slow
@pytest.mark.both_backends
def test_commit_after_a_scale_goes_to_the_successor(spark, root, manager, stream2, delta_backend):
    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    event = writer.stream_event("key-0", chunk_size=MIB)
    event.write(large_payload(2 * MIB + 3))
    segments = manager.segments("iot", "sensors", epoch=0).orderBy("key_start").collect()
    manager.scale_stream("iot", "sensors", [s.segment_id for s in segments], [(0.0, 0.5), (0.5, 1.0)])
    event.commit()
    row = manager.read_events("iot", "sensors").collect()[0]
    assert row.segment_id >> 32 == 1  # a segment of the new epoch
    check_stream_consistent(spark, manager, "iot", "sensors")


@pytest.mark.both_backends(slow=("sql",))
def test_clean_up_aborts_idle_events_and_a_late_commit_fails(spark, root, manager, stream2, capsys, delta_backend):
    from jobs import large_events as job

    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    idle = writer.stream_event("key-0", chunk_size=MIB)
    idle.write(large_payload(2 * MIB + 1))
    listed = manager.transient_data("iot", "sensors").collect()
    assert [(r.transient_id, r.chunks, r.bytes) for r in listed] == [(idle.transient_id, 2, 2 * MIB)]
    assert manager.clean_transient_data(now=datetime.now(timezone.utc)) == {}  # not idle yet
    later = (datetime.now(timezone.utc) + timedelta(minutes=11)).isoformat()
    assert job.main(["--root", root, "--now", later]) == 0
    assert "1 large events removed (1 aborted)" in capsys.readouterr().out
    assert _transient_rows(spark, root) == 0
    with pytest.raises(ps.LargeEventFailedError):
        idle.commit()
    assert manager.read_events("iot", "sensors").count() == 0


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.both_backends
def test_killed_writer_leaves_nothing_visible_and_clean_up_removes_its_bytes(spark, root, manager, stream2, delta_backend):
    proc = spawn("large-stage", "--root", root, "--size", str(3 * MIB + 100))
    line = proc.stdout.readline()
    assert line.startswith("STAGED"), line + proc.stderr.read()[-3000:]
    transient_id = line.split()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert manager.read_events("iot", "sensors").count() == 0
    assert [r.transient_id for r in manager.transient_data("iot", "sensors").collect()] == [transient_id]
    done = manager.clean_transient_data(now=datetime.now(timezone.utc) + timedelta(hours=1))
    cleanup = done["iot/sensors"]
    assert cleanup.aborted == (transient_id,) and cleanup.files == 3 and cleanup.bytes >= 3 * MIB
    manager.vacuum("iot", "sensors", retention=timedelta(0))
    staged_dir = (f"{root}/iot/sensors/transient={transient_id}" if delta_backend == "classic"  # its chunks
                  else f"{root}/iot/sensors/segment_id={transient_partition(transient_id)}")
    assert not os.path.isdir(staged_dir) or not [f for f in os.listdir(staged_dir) if f.endswith(".parquet")]
    check_stream_consistent(spark, manager, "iot", "sensors")


def _commit_killed_at(root: str, failpoint: str) -> str:
    """A process stages a large event of 2 MiB + 7 bytes and is killed at ``failpoint`` of its
    commit; the event's transient id."""
    proc = spawn("crash", "--root", root, "--op", "large-commit", "--failpoint", failpoint, "--size", str(2 * MIB + 7))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL and "COMMITTED" not in out, out + err[-3000:]
    return next(line.split()[1] for line in out.splitlines() if line.startswith("STAGED"))


@pytest.mark.slow
@pytest.mark.process  # a crash scenario: a committer process killed at a failpoint
@pytest.mark.both_backends
def test_killed_just_before_commit_nothing_is_visible_and_clean_up_aborts_it(spark, root, manager, stream2, delta_backend):
    transient_id = _commit_killed_at(root, "large:before_commit")
    assert manager.read_events("iot", "sensors").count() == 0
    assert [r.transient_id for r in manager.transient_data("iot", "sensors").collect()] == [transient_id]
    done = manager.clean_transient_data(now=datetime.now(timezone.utc) + timedelta(hours=1))
    assert done["iot/sensors"].aborted == (transient_id,)
    assert _transient_rows(spark, root) == 0
    assert manager.read_events("iot", "sensors").count() == 0
    check_stream_consistent(spark, manager, "iot", "sensors")


@pytest.mark.slow
@pytest.mark.process  # a crash scenario: a committer process killed at a failpoint
@pytest.mark.both_backends
def test_killed_after_commit_the_event_is_whole_and_clean_up_keeps_it(spark, root, manager, stream2, delta_backend):
    _commit_killed_at(root, "large:after_commit")
    rows = manager.read_events("iot", "sensors").collect()
    assert [bytes(r.event) for r in rows] == [large_payload(2 * MIB + 7)]
    assert _transient_rows(spark, root) == 3  # its removal was cut off ...
    done = manager.clean_transient_data(now=datetime.now(timezone.utc) + timedelta(hours=1))
    assert done["iot/sensors"].aborted == ()  # ... and is finished, without aborting it
    assert _transient_rows(spark, root) == 0
    assert manager.read_events("iot", "sensors").count() == 1
    check_stream_consistent(spark, manager, "iot", "sensors")
