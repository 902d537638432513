"""Retention runs end to end: retention set, time/size policies over scales, subscribers and
consumption-based retention, the retention job with an advancing ``now`` and buckets."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import pravega_spark as ps
from jobs import retention as retention_job
from pravega_spark.services.retention_service import stream_bucket
from pravega_spark.stream.segments import segment_id
from tests.invariants import check_key_order, check_stream_consistent

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
EVENT = 8 + len("w:0000:000000")  # framed bytes of one test event
BATCH = 20 * EVENT
S10, S11 = segment_id(2, 1), segment_id(3, 1)


def _stream(manager, name, policy, scope="iot"):
    manager.create_scope(scope)
    manager.create_stream(scope, name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2),
                                                              retention_policy=policy))
    return manager.create_event_writer(scope, name, writer_id="w")


def _write(spark, writer, batch: int, n: int = 20):
    rows = [(f"key-{i % 4}", f"w:{batch:04d}:{i:06d}") for i in range(n)]
    return writer.write_events(spark.createDataFrame(rows, "routing_key string, event string"))


def _batches(manager, name, scope="iot"):
    return sorted({r.event.decode()[:6] for r in manager.read_events(scope, name).select("event").collect()})


@pytest.mark.slow
def test_time_retention_over_scales(spark, manager):
    w = _stream(manager, "t", ps.RetentionPolicy.by_time(timedelta(minutes=60)))
    tails = [_write(spark, w, 0).tail_stream_cut]
    (first,) = manager.run_retention(now=T0)
    assert first.recorded is not None and first.recorded.stream_cut == tails[0] and first.truncated_at is None
    assert first.recorded.recording_size == sum(tails[0].positions.values())
    # not due again within the frequency (30 minutes, strictly greater)
    assert manager.run_retention(now=T0 + timedelta(minutes=30))[0].recorded is None
    manager.scale_stream("iot", "t", [0], [(0.0, 0.25), (0.25, 0.5)])
    tails.append(_write(spark, w, 1).tail_stream_cut)
    second = manager.run_retention(now=T0 + timedelta(minutes=31))[0]
    assert second.recorded.stream_cut == tails[1] and second.truncated_at is None  # nothing 60 min old yet
    tails.append(_write(spark, w, 2).tail_stream_cut)
    third = manager.run_retention(now=T0 + timedelta(minutes=62))[0]
    # the most recent record at least 60 minutes old is the first one
    assert third.truncated_at == tails[0] and third.records_dropped == 1
    assert manager.head_stream_cut("iot", "t") == tails[0]
    assert _batches(manager, "t") == ["w:0001", "w:0002"]
    _write(spark, w, 3)
    fourth = manager.run_retention(now=T0 + timedelta(minutes=93))[0]
    assert fourth.truncated_at == tails[1] and fourth.segments_deleted == (0,)
    assert _batches(manager, "t") == ["w:0002", "w:0003"]
    assert [r.stream_cut for r in manager.controller.store.retention_records("iot", "t")] == [tails[2], fourth.recorded.stream_cut]
    # records keep the size from the stream's start, truncated bytes included
    assert fourth.recorded.recording_size == 4 * BATCH
    check_key_order(check_stream_consistent(spark, manager, "iot", "t"))


@pytest.mark.slow
def test_size_retention_over_scales(spark, manager):
    w = _stream(manager, "s", ps.RetentionPolicy.by_size_bytes(2 * BATCH))
    _write(spark, w, 0)
    assert manager.run_retention(now=T0)[0].truncated_at is None
    manager.scale_stream("iot", "s", [1], [(0.5, 0.75), (0.75, 1.0)])
    _write(spark, w, 1)
    assert manager.run_retention(now=T0 + timedelta(minutes=31))[0].truncated_at is None
    _write(spark, w, 2)
    run = manager.run_retention(now=T0 + timedelta(minutes=62))[0]
    # keeping >= 2 batches: truncate at the record after batch 0
    assert run.bytes_truncated == BATCH and run.truncated_at is not None
    assert _batches(manager, "s") == ["w:0001", "w:0002"]
    _write(spark, w, 3)
    run = manager.run_retention(now=T0 + timedelta(minutes=93))[0]
    assert run.bytes_truncated == BATCH and 1 in run.segments_deleted
    assert _batches(manager, "s") == ["w:0002", "w:0003"]
    assert manager.truncation_record("iot", "s").size_till == 2 * BATCH
    check_stream_consistent(spark, manager, "iot", "s")


@pytest.mark.connect
def test_subscriber_api_errors_and_generations(spark, root, manager):
    w = _stream(manager, "c", ps.RetentionPolicy.by_size_bytes(0))
    cut = _write(spark, w, 0).tail_stream_cut
    head = manager.head_stream_cut("iot", "c")
    with pytest.raises(ps.ReaderGroupNotFoundError):  # a scoped name is a reader group's: it must exist
        manager.add_subscriber("iot", "c", "iot/no-such-group", 1)
    assert manager.add_subscriber("iot", "c", "rg1", 1) is True  # any other name: an external subscriber
    assert manager.add_subscriber("iot", "c", "rg1", 1) is False  # same generation: no-op
    with pytest.raises(ps.StreamNotFoundError):
        manager.update_subscriber_stream_cut("iot", "nope", "rg1", 1, cut)
    with pytest.raises(ps.SubscriberNotFoundError):
        manager.update_subscriber_stream_cut("iot", "c", "rg2", 1, cut)
    with pytest.raises(ps.GenerationMismatchError):
        manager.update_subscriber_stream_cut("iot", "c", "rg1", 2, cut)
    with pytest.raises(ps.InvalidStreamCutError):
        manager.update_subscriber_stream_cut("iot", "c", "rg1", 1, ps.StreamCut("iot/c", {0: 1}))
    assert manager.update_subscriber_stream_cut("iot", "c", "rg1", 1, cut)
    with pytest.raises(ps.StreamCutBehindError):
        manager.update_subscriber_stream_cut("iot", "c", "rg1", 1, head)
    assert issubclass(ps.StreamCutBehindError, ps.InvalidStreamCutError)
    # a newer generation keeps the cut; a stale removal is a no-op, a current one removes it
    assert manager.add_subscriber("iot", "c", "rg1", 3) is True
    row = manager.subscribers("iot", "c").collect()[0]
    assert row.generation == 3 and {e.segment_id: e.offset for e in row.stream_cut} == dict(cut.positions)
    assert manager.remove_subscriber("iot", "c", "rg1", 2) is False
    assert manager.remove_subscriber("iot", "c", "rg1", 3) is True
    assert manager.subscribers("iot", "c").count() == 0


@pytest.mark.slow
def test_consumption_based_retention_mixes_epochs(spark, manager):
    """Two subscribers in different epochs plus one that never published: the head moves to
    their lineage-aware lower bound (max unbounded, min 0 keeps nothing back)."""
    w = _stream(manager, "c", ps.RetentionPolicy.by_size_bytes(0))
    a_cut = _write(spark, w, 0).tail_stream_cut                      # epoch 0
    manager.scale_stream("iot", "c", [0], [(0.0, 0.25), (0.25, 0.5)])
    b_cut = _write(spark, w, 1).tail_stream_cut                      # epoch 1
    _write(spark, w, 2)
    for name in ("a", "b", "silent"):
        manager.add_subscriber("iot", "c", name, 0)
    manager.update_subscriber_stream_cut("iot", "c", "a", 0, a_cut)
    manager.update_subscriber_stream_cut("iot", "c", "b", 0, b_cut)
    run = manager.run_retention(now=T0)[0]
    # a is behind b everywhere: the lower bound is a's cut (the silent subscriber holds nothing back)
    assert run.lower_bound == a_cut and run.truncated_at == a_cut
    assert _batches(manager, "c") == ["w:0001", "w:0002"]
    # a catches up with b on segment 1 only: the bound mixes epochs (1 from epoch 0, S10/S11 from b)
    a2 = ps.StreamCut("iot/c", {1: b_cut.positions[1], S10: 0, S11: 0})
    manager.update_subscriber_stream_cut("iot", "c", "a", 0, a2)
    run = manager.run_retention(now=T0 + timedelta(minutes=31))[0]
    assert run.lower_bound == a2 and run.truncated_at == a2 and run.segments_deleted == (0,)
    assert manager.head_stream_cut("iot", "c") == a2
    check_stream_consistent(spark, manager, "iot", "c")


@pytest.mark.slow
def test_consumption_based_retention_max_limit(spark, manager):
    """A subscriber that stops consuming holds data back only up to the policy's max."""
    w = _stream(manager, "m", ps.RetentionPolicy.by_size_bytes(0, 2 * BATCH))
    manager.add_subscriber("iot", "m", "slow", 0)
    manager.update_subscriber_stream_cut("iot", "m", "slow", 0, manager.head_stream_cut("iot", "m"))
    for b in range(4):
        _write(spark, w, b)
        manager.run_retention(now=T0 + timedelta(minutes=31 * b))
    # the lower bound is the stream's start, but the store keeps at most 2 batches beyond it
    assert manager.stream_info("iot", "m").size_bytes <= 3 * BATCH
    assert manager.truncation_record("iot", "m").size_till >= BATCH


@pytest.mark.slow
def test_consumption_based_retention_under_a_time_limit(spark, manager):
    """Time policy with subscribers: the lower bound while it is within the max age; a subscriber
    stuck at the start is overruled once data is older than the max (Pravega's maxBound rule)."""
    w = _stream(manager, "tc", ps.RetentionPolicy.by_time(timedelta(0), timedelta(minutes=60)))
    head = manager.head_stream_cut("iot", "tc")
    for name in ("stuck", "fast"):
        manager.add_subscriber("iot", "tc", name, 0)
    manager.update_subscriber_stream_cut("iot", "tc", "stuck", 0, head)
    tails = []
    for b in range(3):
        tails.append(_write(spark, w, b).tail_stream_cut)
        manager.update_subscriber_stream_cut("iot", "tc", "fast", 0, tails[-1])
        run = manager.run_retention(now=T0 + timedelta(minutes=31 * b))[0]
        if b < 2:  # nothing is 60 minutes old: the stuck subscriber's bound (the head) holds
            assert run.lower_bound == head and manager.truncation_record("iot", "tc").size_till == 0
    # at 62 minutes the first record is past the max: truncate at the oldest record within it
    assert run.truncated_at == tails[1] and _batches(manager, "tc") == ["w:0002"]
    # the stuck subscriber catching up to the tail lets retention truncate at it
    manager.update_subscriber_stream_cut("iot", "tc", "stuck", 0, tails[2])
    run = manager.run_retention(now=T0 + timedelta(minutes=93))[0]
    assert run.lower_bound == tails[2] and run.truncated_at == tails[2]
    assert manager.read_events("iot", "tc").count() == 0
    check_stream_consistent(spark, manager, "iot", "tc")


@pytest.mark.slow  # a whole job/README walk-through: in `make test`, not the inner loop
def test_retention_job_buckets_and_advancing_now(spark, root, manager, capsys):
    names = [f"s{i}" for i in range(3)]  # both buckets (s0 and s2 in 0, s1 in 1)
    manager.create_scope("iot")
    for name in names:
        manager.create_stream("iot", name, ps.StreamConfiguration(
            retention_policy=ps.RetentionPolicy.by_time(timedelta(minutes=45))))
        _write(spark, manager.create_event_writer("iot", name, writer_id="w"), 0)
    manager.create_stream("iot", "no-policy")
    buckets = {n: stream_bucket(f"iot/{n}", 2) for n in names}
    assert set(buckets.values()) == {0, 1}  # both buckets have work
    assert stream_bucket("iot/s0", 2) == stream_bucket("iot/s0", 2)  # stable
    for bucket in (0, 1):
        assert retention_job.main(["--root", root, "--bucket", str(bucket), "--buckets", "2",
                                   "--now", "2026-01-01T00:00:00Z"]) == 0
    assert "retention:" in capsys.readouterr().out
    for n in names:
        assert len(manager.controller.store.retention_records("iot", n)) == 1  # each stream visited exactly once
    for n in names:
        _write(spark, manager.create_event_writer("iot", n, writer_id="w"), 1)
    for minutes in (31, 62):
        now = (T0 + timedelta(minutes=minutes)).isoformat()
        assert retention_job.main(["--root", root, "--now", now]) == 0
    for n in names:
        assert _batches(manager, n) == ["w:0001"]  # the 62-minute-old record was 45+ min old
        assert manager.truncation_record("iot", n).size_till == BATCH
    capsys.readouterr()
    assert retention_job.main(["--root", root, "--now", (T0 + timedelta(minutes=63)).isoformat(), "--vacuum"]) == 0
    out = capsys.readouterr().out  # each stream's table, then the store's own tables once
    assert out.count("store tables: VACUUMED") == 1 and "4 of 4 streams done, 0 failures" in out, out
