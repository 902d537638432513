"""A process SIGKILLed between the commits of a scale, a seal or an append; then recovery.

``make test`` kills each operation at one of its points; ``make soak`` at every point (the others
are marked ``soak``)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

import pravega_spark as ps
from pravega_spark.stream.segments import segment_id
from tests.invariants import assert_valid, check_key_order, check_stream_consistent
from tests.processes import soak_only, spawn
from tests.workers import crasher_rows

# the events of the write killed during its job: enough that its tasks are still writing when
# their first file appears, warm JVM or cold
BIG_WRITE = 100_000


def _prepare(manager, spark):
    """Events in the test's 2-segment stream (the test asks for ``stream2``)."""
    w = manager.create_event_writer("iot", "sensors", writer_id="w0")
    w.write_events(spark.createDataFrame([(f"key-{i % 8}", f"w0:0000:{i:06d}") for i in range(40)],
                                         "routing_key string, event string"))
    return w


def _killed(root, failpoint, op, *extra: str):
    proc = spawn("crash", "--root", root, "--failpoint", failpoint, "--op", op, *extra)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"not killed at {failpoint}: {out}\n{err[-2000:]}"


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", [soak_only("scale:after_start"), "scale:after_seal"])
def test_scale_killed_between_commits_is_completed(spark, root, manager, stream2, failpoint):
    _prepare(manager, spark)
    _killed(root, failpoint, "scale")
    assert manager.controller.store.stream_record("iot", "sensors").state == "SCALING"
    # the next operation on the stream (an append) rolls the scale forward, then appends
    w = manager.create_event_writer("iot", "sensors", writer_id="w1")
    result = w.write_events(spark.createDataFrame([(f"key-{i % 8}", f"w1:0000:{i:06d}") for i in range(40)],
                                                  "routing_key string, event string"))
    assert result.event_count == 40
    info = manager.stream_info("iot", "sensors")
    assert info.state == "ACTIVE" and info.current_epoch == 1
    assert set(info.tail_stream_cut.positions) == {1, segment_id(2, 1), segment_id(3, 1)}
    assert manager.successors("iot", "sensors", 0) == {(1 << 32) | 2: [0], (1 << 32) | 3: [0]}
    # the retried scale finds it done
    with pytest.raises(ps.ScalePreconditionError):
        manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert sorted(r.event.decode() for r in events) == sorted(
        [f"w0:0000:{i:06d}" for i in range(40)] + [f"w1:0000:{i:06d}" for i in range(40)])
    check_key_order(events)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", ["update:after_start", soak_only("scale:after_seal")])
def test_update_killed_midway_is_completed(spark, root, manager, stream2, failpoint):
    """An update raising min_num_segments from 2 to 4 (a scale-up inside it) killed after its
    UPDATING commit, or after its seal records: the next append finishes it, then appends."""
    _prepare(manager, spark)
    _killed(root, failpoint, "update")
    assert manager.controller.store.stream_record("iot", "sensors").state == "UPDATING"
    w = manager.create_event_writer("iot", "sensors", writer_id="w1")
    w.write_events(spark.createDataFrame([(f"key-{i % 8}", f"w1:0000:{i:06d}") for i in range(40)],
                                         "routing_key string, event string"))
    info = manager.stream_info("iot", "sensors")
    assert info.state == "ACTIVE" and info.current_epoch == 1
    assert info.configuration.scaling_policy.min_num_segments == 4
    assert len(info.tail_stream_cut.positions) == 4
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert len(events) == 80
    check_key_order(events)


@pytest.mark.process
@pytest.mark.slow
def test_delete_scope_killed_after_its_mark_refuses_new_streams_until_run_again(spark, root, manager):
    """delete_scope killed between its deletion mark and the scope row's removal: the scope is
    still listed but takes no new stream; the next delete_scope finishes; a scope created again
    under the same name is a new one and takes streams."""
    manager.create_scope("gone")
    _killed(root, "delete_scope:after_mark", "delete-scope", "--scope", "gone")
    assert manager.check_scope_exists("gone")
    with pytest.raises(ps.ScopeNotFoundError):
        manager.create_stream("gone", "s")
    assert manager.delete_scope("gone")
    assert not manager.check_scope_exists("gone")
    assert manager.create_scope("gone")
    assert manager.create_stream("gone", "s", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    assert [r.stream for r in manager.list_streams("gone").collect()] == ["s"]


@pytest.mark.process
@pytest.mark.slow
def test_seal_killed_midway_is_completed(spark, root, manager, stream2):
    _prepare(manager, spark)
    _killed(root, "seal:after_start", "seal")
    assert manager.controller.store.stream_record("iot", "sensors").state == "SEALING"
    with pytest.raises(ps.StreamSealedError):
        manager.create_event_writer("iot", "sensors").write_event(b"x", routing_key="k")
    assert manager.stream_info("iot", "sensors").state == "SEALED"
    check_stream_consistent(spark, manager, "iot", "sensors")


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("how", [soak_only("failpoint"), "during_commit"])
def test_append_killed_leaves_all_or_nothing_then_retry(spark, root, manager, stream2, how):
    _prepare(manager, spark)
    if how == "failpoint":
        proc = spawn("crash", "--root", root, "--failpoint", "append:before_commit", "--op", "append",
                     "--per-batch", "40")
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == -signal.SIGKILL, f"not killed: {out}\n{err[-2000:]}"
    else:
        proc = spawn("crash", "--root", root, "--failpoint", "none", "--op", "append", "--per-batch", str(BIG_WRITE))
        events_dir = Path(urlparse(manager.controller.store.events_path("iot", "sensors")).path)
        before = set(events_dir.rglob("*.parquet"))
        line = proc.stdout.readline()
        assert "COMMITTING" in line
        # inside the write's job: a task opens its segment's file as its first rows arrive, and
        # a write this big keeps its tasks busy for a while after that
        deadline = time.monotonic() + 120
        while not set(events_dir.rglob("*.parquet")) - before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    crashed = [r for r in events if r.event.startswith(b"crasher")]
    per_batch = 40 if how == "failpoint" else BIG_WRITE
    assert len(crashed) in (0, per_batch)  # atomic: all of the write or none of it
    if not crashed:  # the retry
        w = manager.create_event_writer("iot", "sensors", writer_id="crasher")
        w.write_events(crasher_rows(spark, per_batch))
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    crashed = sorted(r.event.decode() for r in events if r.event.startswith(b"crasher"))
    assert crashed == [f"crasher:0000:{i:06d}" for i in range(per_batch)]
    check_key_order(events)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", ["create:after_row", soak_only("create:after_events")])
def test_create_killed_after_row_is_finished_by_next_operation(spark, root, manager, failpoint):
    manager.create_scope("iot")
    _killed(root, failpoint, "create")
    assert manager.controller.store.stream_record("iot", "sensors").state == "CREATING"
    info = manager.stream_info("iot", "sensors")  # any operation finishes the creation
    assert info.state == "ACTIVE" and len(info.tail_stream_cut.positions) == 2
    assert manager.create_event_writer("iot", "sensors").write_event(b"x", routing_key="k").event_count == 1
    assert manager.create_stream("iot", "sensors") is False
    assert_valid(manager, "iot", "sensors")


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", ["delete:after_data", soak_only("delete:after_rows")])
def test_delete_killed_after_data_is_finished_by_retry(spark, root, manager, stream2, failpoint):
    _prepare(manager, spark)
    manager.add_subscriber("iot", "sensors", "sub", 1)  # a row in a shard table
    manager.seal_stream("iot", "sensors")
    _killed(root, failpoint, "delete")
    assert not os.path.exists(os.path.join(root, "iot", "sensors"))
    assert manager.check_stream_exists("iot", "sensors")  # row still there, SEALED
    store = manager.controller.store
    assert bool(store.subscriber_rows("iot", "sensors")) == (failpoint == "delete:after_data")
    assert manager.delete_stream("iot", "sensors") is True
    assert not manager.check_stream_exists("iot", "sensors")
    assert store.subscriber_rows("iot", "sensors") == []
    assert manager.delete_scope("iot")


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", [soak_only("truncate:after_start"), soak_only("truncate:after_marks"),
                                       "truncate:after_segments", soak_only("truncate:after_rows")])
def test_truncation_killed_between_commits_is_completed(spark, root, manager, stream2, failpoint):
    w = _prepare(manager, spark)
    cut = w.write_events(spark.createDataFrame([(f"key-{i % 8}", f"w0:0001:{i:06d}") for i in range(40)],
                                               "routing_key string, event string")).tail_stream_cut
    manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    w.write_events(spark.createDataFrame([(f"key-{i % 8}", f"w0:0002:{i:06d}") for i in range(40)],
                                         "routing_key string, event string"))
    head = manager.tail_stream_cut("iot", "sensors")  # epoch 1: segment 0 lies wholly before it
    proc = spawn("crash", "--root", root, "--failpoint", failpoint, "--op", "truncate", "--cut", head.as_text())
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"not killed at {failpoint}: {out}\n{err[-2000:]}"
    assert manager.controller.store.stream_record("iot", "sensors").state == "TRUNCATING"
    # while the truncation is pending: reads start at the new head, below it is refused, appends go on
    assert manager.read_events("iot", "sensors").count() == 0
    with pytest.raises(ps.TruncatedDataError):
        manager.read_events("iot", "sensors", start=cut)
    w.write_events(spark.createDataFrame([(f"key-{i % 8}", f"w0:0003:{i:06d}") for i in range(40)],
                                         "routing_key string, event string"))
    # the next state change (a scale) completes the truncation first
    manager.scale_stream("iot", "sensors", [1], [(0.5, 0.75), (0.75, 1.0)])
    record = manager.truncation_record("iot", "sensors")
    assert not record.updating and record.stream_cut == head and record.deleted_segments == (0,)
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert sorted(r.event.decode() for r in events) == [f"w0:0003:{i:06d}" for i in range(40)]
    check_key_order(events)
