"""The library on a Spark Connect session (no JVM in this process): what only this tier can show.

The core scenarios of every feature run here too: the tests marked ``connect`` elsewhere (streams,
writers, scaling, cuts, truncation, retention, reader groups, streaming, validation).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

import pravega_spark as ps
from pravega_spark import _delta
from tests.connect.conftest import assert_no_jvm
from tests.helpers import table_versions
from tests.invariants import check_key_order, check_stream_consistent
from tests.processes import spawn
from tests.workers import batch_rows

pytestmark = pytest.mark.connect


def events_df(spark, rows):
    return spark.createDataFrame(rows, "routing_key string, event string")


def test_the_session_is_remote_and_the_backend_is_sql(spark, manager):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(spark, ConnectSession)
    assert _delta.backend_kind(spark) == ("sql", "the session is a Spark Connect session (no JVM handle)")
    assert repr(manager._store.backend) == "SqlBackend()"
    assert_no_jvm()


def test_a_relative_root_is_refused_before_any_io(spark, tmp_path):
    before = set(os.listdir(tmp_path))
    with pytest.raises(ps.InvalidConfigError, match="relative") as caught:
        ps.StreamManager(spark, "relative/store")
    assert "\n" not in str(caught.value)
    assert set(os.listdir(tmp_path)) == before


def test_what_connect_cannot_do_is_one_clear_error_and_changes_nothing(spark, manager, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "w")
    writer.write_events(events_df(spark, [("a", "1")]))
    before = table_versions(spark, manager.root)
    for attempt in (lambda: manager.create_transactional_writer(scope, stream),
                    lambda: writer.stream_event("a"),
                    lambda: manager.compact(scope, stream)):
        with pytest.raises(ps.UnsupportedOperationError, match="Spark Connect") as caught:
            attempt()
        assert "\n" not in str(caught.value)
    assert table_versions(spark, manager.root) == before


def test_write_numbers_are_applied_once(spark, manager, stream2):
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
    assert stale.event_count == 5 and stale.retries >= 1
    assert writer.write_events(events_df(spark, rows[:5]), write_number=3).event_count == 0
    assert manager.read_events(scope, stream).count() == 24


def test_fenced_append_refuses_stale_tails_and_sealed_segments(spark, manager, stream2):
    """Two writers whose known tails go stale: each retries from fresh tails (no overlap), and
    after a seal no write lands."""
    scope, stream = stream2
    a = manager.create_event_writer(scope, stream, "a")
    b = manager.create_event_writer(scope, stream, "b")
    rows = lambda w, n: [(f"k{i % 4}", f"{w}:{n:04d}:{i:06d}") for i in range(20)]  # noqa: E731
    a.write_events(events_df(spark, rows("a", 0)))
    b.write_events(events_df(spark, rows("b", 0)))  # a's tails are now stale
    result = a.write_events(events_df(spark, rows("a", 1)))
    assert result.retries >= 1
    event_rows = check_stream_consistent(spark, manager, scope, stream)
    assert len(event_rows) == 60
    check_key_order(event_rows)
    manager.seal_stream(scope, stream)
    with pytest.raises(ps.StreamSealedError):
        b.write_events(events_df(spark, rows("b", 1)))
    assert len(check_stream_consistent(spark, manager, scope, stream)) == 60


@pytest.mark.process
@pytest.mark.slow
def test_two_client_processes_and_a_killed_writer(spark, root, manager, stream2):
    """Two writer processes append concurrently while a third is killed in the middle of its
    commit (the server runs the MERGE it sent, or not at all): every event of the survivors
    once, in order per key; the killed write all there or not at all; the stream consistent."""
    scope, stream = stream2
    writers = ["w0", "w1"]
    batches, per_batch = 4, 40
    procs = [spawn("append", "--root", root, "--writer", w, "--batches", str(batches), "--per-batch", str(per_batch))
             for w in writers]
    # no failpoint: the test kills it itself, while its write (tails query, MERGE) is under way
    victim = spawn("crash", "--root", root, "--op", "append", "--per-batch", "50", "--failpoint", "none")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # wait until the victim is in its commit, then kill it
        if victim.poll() is not None:
            break
        line = victim.stdout.readline()
        if line.startswith("COMMITTING"):
            time.sleep(1.5)
            victim.send_signal(signal.SIGKILL)
            break
    victim.wait(timeout=60)
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    event_rows = check_stream_consistent(spark, manager, scope, stream)
    counts = Counter(r.event.decode() for r in event_rows)
    assert all(c == 1 for c in counts.values()), [e for e, c in counts.items() if c > 1][:5]
    for w in writers:
        for b in range(batches):
            for _, payload in batch_rows(w, b, per_batch, 8):
                assert counts[payload] == 1, payload
    crashed = [e for e in counts if e.startswith("crasher:")]
    assert len(crashed) in (0, 50), len(crashed)
    check_key_order(event_rows)


def test_truncation_deletes_below_the_cut_and_appends_go_on(spark, manager, stream2):
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
    stored = spark.read.format("delta").load(f"{manager.root}/{scope}/{stream}/events").where("record_type = 0")
    assert stored.count() == 20  # the truncated events are gone from the table, not just hidden
    writer.write_events(events_df(spark, [("k0", "t:0002:000000")]))
    assert len(check_stream_consistent(spark, manager, scope, stream)) == 21


def test_read_stream_with_available_now_delivers_each_event_once(spark, manager, stream2, tmp_path):
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
