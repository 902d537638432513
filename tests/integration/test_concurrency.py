"""Four writer processes append to one 2-segment stream while a fifth scales it."""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

import pravega_spark as ps
from pravega_spark import _delta
from tests.conftest import eventually
from tests.invariants import check_key_order, check_stream_consistent
from tests.processes import spawn, spawn_job
from tests.workers import batch_rows

pytestmark = pytest.mark.process  # every scenario here runs several processes (make soak repeats them)


@pytest.mark.s3
@pytest.mark.slow
def test_concurrent_writers_and_scaler(spark, root, manager, stream2, request):
    """Writer processes while a scaler process splits and merges, then this process auto-scales
    (it splits the segment it measured hot) while they write: every event once, in order per key.

    Every process runs the store's clock 30 minutes ahead (the library's internal seam), so the
    template's segment [0.5, 1), made before, is past the auto-scaler's cooldown."""
    ahead = 1800.0
    previous = _delta.set_clock(lambda: time.time() + ahead)
    request.addfinalizer(lambda: _delta.set_clock(previous))
    manager.update_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.by_event_rate(10, 2, 1)))
    candidates = spark.createDataFrame([(f"hot-{i}",) for i in range(64)], "k string")
    hot = [r.k for r in candidates.where(ps.key_position("k") >= 0.6).limit(4).collect()]
    writers = [f"w{i}" for i in range(2)]
    # the writers go on until the scaler's first scale (epoch 1) and write once more: on the S3
    # tier a cold worker JVM takes much longer to see the first events and scale (its first tail
    # read after them took 12 s there, 2 s after), so a fixed number of batches could end first
    batches, per_batch = 6, 60
    procs = [spawn("append", "--root", root, "--writer", w, "--batches", str(batches), "--per-batch", str(per_batch),
                   "--write-pause", "1", "--until-epoch", "1", "--clock-offset", str(ahead)) for w in writers]
    procs.append(spawn("scale", "--root", root, "--scales", "2", "--after-events", "--pause", "2",
                       "--clock-offset", str(ahead)))
    eventually(lambda: manager.stream_info("iot", "sensors").current_epoch == 2 or procs[-1].poll() is not None,
               timeout=600)
    # this process is the auto-scaler: a burst on [0.6, 1), then one run while the writers go on
    manager.create_event_writer("iot", "sensors", "hot").write_events(spark.createDataFrame(
        [(hot[i % len(hot)], f"hot:0000:{i:06d}") for i in range(2000)], "routing_key string, event string"))
    [outcome] = manager.run_autoscale("iot", "sensors", now=datetime.now(timezone.utc) + timedelta(seconds=ahead))
    outputs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        causes = [line for line in err.splitlines() if re.search(r"(Error|Exception)(:|\s|$)", line)
                  and not line.lstrip().startswith("at ")][:12]
        assert p.returncode == 0, f"worker failed:\n{out}\n" + "\n".join(causes) + f"\n{err[-2000:]}"
    assert outputs[-1][0].count("SCALED") == 2
    [(request, epoch)] = outcome.scaled  # the template's segment [0.5, 1) split in two (the others are new)
    assert request.direction == "up" and epoch == 3 and request.new_ranges == ((0.5, 0.75), (0.75, 1.0))

    events = check_stream_consistent(spark, manager, "iot", "sensors")
    got = Counter(r.event.decode() for r in events)
    written = [line.split()[1:3] for out, _ in outputs[:-1] for line in out.splitlines() if line.startswith("WROTE")]
    expected = Counter(p for w, b in written for _, p in batch_rows(w, int(b), per_batch, 8))
    expected.update(f"hot:0000:{i:06d}" for i in range(2000))
    assert got == expected  # every event exactly once
    check_key_order(events)
    info = manager.stream_info("iot", "sensors")
    assert info.current_epoch == 3
    spans = [{sid >> 32 for sid in {r.segment_id for r in events if r.event.decode().startswith(f"{w}:")}} for w in writers]
    assert any(len(epochs) > 1 for epochs in spans), spans  # a scale landed while a writer was writing
    # the read API agrees with the raw table
    assert manager.read_events("iot", "sensors").count() == sum(expected.values())


@pytest.mark.slow
@pytest.mark.process
def test_a_classic_and_a_sql_writer_append_to_one_stream_while_a_third_process_scales(spark, root, manager, stream2,
                                                                                     monkeypatch):
    """One store, both backends at once (an EMR job and a serverless notebook on one bucket): a
    classic writer process and a public-API (sql) writer process append to
    one stream while a third process splits and merges it. Every event lands once, in order per
    key, and each backend reads what the other wrote."""
    batches, per_batch = 5, 40
    procs = [spawn("append", "--root", root, "--writer", f"w-{kind}", "--backend", kind, "--batches", str(batches),
                   "--per-batch", str(per_batch), "--write-pause", "0.5", "--until-epoch", "1")
             for kind in ("classic", "sql")]
    procs.append(spawn("scale", "--root", root, "--scales", "2", "--after-events", "--pause", "2", "--backend", "classic"))
    outputs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"worker failed:\n{out}\n{err[-3000:]}"
    assert outputs[-1][0].count("SCALED") == 2
    written = [line.split()[1:3] for out, _ in outputs[:-1] for line in out.splitlines() if line.startswith("WROTE")]
    expected = Counter(p for w, b in written for _, p in batch_rows(w, int(b), per_batch, 8))
    assert {w for w, _ in written} == {"w-classic", "w-sql"}
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert Counter(r.event.decode() for r in events) == expected  # every event exactly once
    check_key_order(events)
    spans = [{r.segment_id >> 32 for r in events if r.event.decode().startswith(f"{w}:")} for w in ("w-classic", "w-sql")]
    assert all(len(epochs) > 1 for epochs in spans), spans  # both wrote across a scale
    # each backend reads what the other wrote, the same events at the same offsets
    read = lambda m: sorted((r.segment_id, r.offset, bytes(r.event)) for r in m.read_events("iot", "sensors").collect())  # noqa: E731
    classic = read(manager)
    monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", "sql")
    sql_manager = ps.StreamManager(spark, root)
    assert repr(sql_manager.controller.store.backend) == "SqlBackend()"
    assert read(sql_manager) == classic and len(classic) == sum(expected.values())


@pytest.mark.slow
def test_writers_of_disjoint_segments_commit_without_retries(spark, root, manager, stream2):
    """Two writer processes, each on its own segment of one stream: no conflict, no retry
    (a write fences only the segments it appends to)."""
    candidates = spark.createDataFrame([(f"key-{i}",) for i in range(64)], "k string")
    positions = candidates.select("k", ps.key_position("k").alias("p")).collect()
    halves = [[r.k for r in positions if r.p < 0.5][:6], [r.k for r in positions if r.p >= 0.5][:6]]
    batches, per_batch = 8, 40
    procs = [spawn("append", "--root", root, "--writer", f"w{i}", "--batches", str(batches),
                   "--per-batch", str(per_batch), "--key-list", ",".join(keys)) for i, keys in enumerate(halves)]
    outputs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"worker failed:\n{out}\n{err[-3000:]}"
    wrote = [line.split() for out, _ in outputs for line in out.splitlines() if line.startswith("WROTE")]
    assert len(wrote) == 2 * batches
    assert [int(w[5]) for w in wrote] == [0] * (2 * batches), wrote  # retries per write
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert len(events) == 2 * batches * per_batch
    assert {r.segment_id for r in events if r.event.decode().startswith("w0:")} == {0}
    assert {r.segment_id for r in events if r.event.decode().startswith("w1:")} == {1}
    check_key_order(events)


@pytest.mark.slow
def test_truncation_and_compaction_while_writers_append_and_a_scale_happens(spark, root, manager, stream2):
    """Nothing above the head is lost: the bytes truncated plus the bytes still stored are
    exactly the bytes written, every stored event is a written one, once, in order per key, while
    a compactor keeps rewriting the segments' small files."""
    writers = ["w0", "w1"]
    batches, per_batch = 5, 60
    procs = [spawn("append", "--root", root, "--writer", w, "--batches", str(batches),
                   "--per-batch", str(per_batch)) for w in writers]
    procs.append(spawn("scale", "--root", root, "--scales", "1", "--delay", "20", "--pause", "1"))
    procs.append(spawn("truncate", "--root", root, "--truncations", "2", "--delay", "15", "--pause", "8"))
    procs.append(spawn("compact", "--root", root, "--rounds", "4", "--delay", "12", "--pause", "4"))
    outputs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"worker failed:\n{out}\n{err[-3000:]}"
    assert outputs[-2][0].count("TRUNCATED") == 2
    compacted = [line.split() for line in outputs[-1][0].splitlines() if line.startswith("COMPACTED")]
    assert len(compacted) == 4 and any(int(c[2]) > 0 for c in compacted), outputs[-1][0]

    events = check_stream_consistent(spark, manager, "iot", "sensors")
    written = Counter(p for w in writers for b in range(batches) for _, p in batch_rows(w, b, per_batch, 8))
    stored = Counter(r.event.decode() for r in events)
    assert all(n == 1 for n in stored.values()) and set(stored) <= set(written)
    framed = sum(8 + len(p.encode()) for p in written.elements())
    truncated = manager.truncation_record("iot", "sensors").size_till
    assert truncated > 0
    assert truncated + sum(8 + len(r.event) for r in events) == framed
    check_key_order(events)
    assert manager.read_events("iot", "sensors").count() == len(events)


@pytest.mark.slow
def test_two_retention_jobs_on_the_same_bucket_at_once(spark, root, manager, stream2):
    """Two job processes over the same streams at the same ``now``: one retention record per due
    run, one truncation, consistent tables."""
    retention = ps.RetentionPolicy.by_size_bytes(1)
    manager.update_stream("iot", "sensors", ps.StreamConfiguration(  # the template's copy: cheaper than a new stream
        scaling_policy=ps.ScalingPolicy.fixed(2), retention_policy=retention))
    manager.create_stream("iot", "b", ps.StreamConfiguration(retention_policy=retention))
    for name in ("sensors", "b"):
        w = manager.create_event_writer("iot", name, writer_id="w")
        w.write_events(spark.createDataFrame(batch_rows("w", 0, 30, 4), "routing_key string, event string"))
    manager.run_retention(now=datetime(2026, 1, 1, tzinfo=timezone.utc))  # a first record each
    for name in ("sensors", "b"):
        w = manager.create_event_writer("iot", name, writer_id="w")
        w.write_events(spark.createDataFrame(batch_rows("w", 1, 30, 4), "routing_key string, event string"))
    procs = [spawn_job("retention", "--root", root, "--now", "2026-01-01T01:00:00Z") for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, f"job failed:\n{out}\n{err[-3000:]}"
    for name in ("sensors", "b"):
        records = manager.controller.store.retention_records("iot", name)
        assert len(records) == 1  # the 01:00 record, added once; the 00:00 one dropped by the truncation
        assert records[0].recording_time == datetime(2026, 1, 1, 1, tzinfo=timezone.utc)
        truncation = manager.truncation_record("iot", name)
        assert truncation.size_till == sum(8 + len(p.encode()) for _, p in batch_rows("w", 0, 30, 4))
        events = check_stream_consistent(spark, manager, "iot", name)
        assert sorted(r.event.decode() for r in events) == sorted(p for _, p in batch_rows("w", 1, 30, 4))
