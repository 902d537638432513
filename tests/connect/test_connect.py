"""The library on a Spark Connect session (no JVM in this process): what only this tier can show.

The core scenarios of every feature run here too: the tests marked ``connect`` elsewhere (streams,
writers, scaling, cuts, truncation, retention, reader groups, streaming, validation), among them
``tests/integration/test_sql_backend.py``, whose bodies run on both backends in the local suite.
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
                    lambda: writer.stream_event("a")):
        with pytest.raises(ps.UnsupportedOperationError, match="Spark Connect") as caught:
            attempt()
        assert "\n" not in str(caught.value)
    assert table_versions(spark, manager.root) == before


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


def test_a_writer_captured_by_foreach_batch_runs_on_the_server_exactly_once(spark, manager, stream2, tmp_path):
    """The README's stream-to-stream copy over Spark Connect: the ``foreachBatch`` function (and
    the writer it captured) is pickled by root and names, runs on the server, and the micro-batch
    id as write number applies each batch once, also when a batch is replayed."""
    scope, stream = stream2
    manager.create_stream(scope, "copy", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    manager.create_event_writer(scope, stream, "src").write_events(
        events_df(spark, [(f"k{i % 3}", f"f:0000:{i:06d}") for i in range(9)]))
    copier = manager.create_event_writer(scope, "copy", writer_id="copier")

    def copy(df, batch_id):
        copier.write_events(df, write_number=batch_id)
        copier.write_events(df, write_number=batch_id)  # a replay of the batch: skipped

    query = (manager.read_stream(scope, stream).writeStream.foreachBatch(copy)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    copied = sorted(r.event.decode() for r in manager.read_events(scope, "copy").collect())
    assert copied == sorted(f"f:0000:{i:06d}" for i in range(9))
    assert copier.last_write_number() == 0
