"""Idempotent writes: (writer id, write number) is applied once, also across processes."""

from __future__ import annotations

import signal

import pytest

import pravega_spark as ps
from tests.helpers import table_versions
from tests.invariants import check_key_order, check_stream_consistent
from tests.processes import spawn


def _rows(spark, tag: str, n: int = 20):
    return spark.createDataFrame([(f"key-{i % 4}", f"{tag}:{i:04d}") for i in range(n)], "routing_key string, event string")


def _payloads(manager):
    return sorted(r.event.decode() for r in manager.read_events("iot", "sensors").select("event").collect())


@pytest.mark.connect
@pytest.mark.both_backends(slow=("sql",))
def test_retry_with_same_number_is_skipped_and_stale_numbers_are_no_ops(spark, manager, stream2, delta_backend):
    w = manager.create_event_writer("iot", "sensors", writer_id="ingest-1")
    first = w.write_events(_rows(spark, "a"), write_number=0)
    assert first.event_count == 20 and isinstance(first.version, int)  # over Connect: found when asked
    again = w.write_events(_rows(spark, "a"), write_number=0)  # a retry after a lost response
    assert (again.event_count, again.byte_count, again.version) == (0, 0, None)
    assert again.tail_stream_cut == first.tail_stream_cut
    second = w.write_events(_rows(spark, "b"), write_number=5)  # gaps are allowed
    assert second.event_count == 20
    assert w.write_events(_rows(spark, "c"), write_number=3).event_count == 0  # stale: documented no-op
    assert w.write_event(b"single", routing_key="key-0", write_number=5).event_count == 0
    assert w.write_event(b"single", routing_key="key-0", write_number=6).event_count == 1
    assert w.last_write_number() == 6
    # a new writer object with the same id (a restarted process) resumes after the last number
    restarted = manager.create_event_writer("iot", "sensors", writer_id="ingest-1")
    assert restarted.last_write_number() == 6
    assert restarted.write_events(_rows(spark, "b"), write_number=5).event_count == 0
    # numbers are per writer id
    other = manager.create_event_writer("iot", "sensors", writer_id="ingest-2")
    assert other.write_events(_rows(spark, "d"), write_number=0).event_count == 20
    payloads = _payloads(manager)
    assert len(payloads) == 61 and len(set(payloads)) == 61
    assert sum(p.startswith("c:") for p in payloads) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_write_numbers_are_refused_and_change_nothing(spark, root, manager, stream2, bad):
    w = manager.create_event_writer("iot", "sensors", writer_id="w")
    before = table_versions(spark, root)
    with pytest.raises(ps.InvalidConfigError):
        w.write_events(_rows(spark, "x"), write_number=bad)
    assert table_versions(spark, root) == before


def test_foreach_batch_replay_of_a_batch_is_applied_once(spark, manager, stream2, tmp_path):
    """Structured Streaming: the batch id is the write number, so a batch replayed after a
    failure (same id, same rows) is not duplicated."""
    source = tmp_path / "incoming"
    source.mkdir()
    for i in range(2):
        (source / f"part-{i}.json").write_text(
            "\n".join(f'{{"device": "dev-{j % 3}", "reading": "r{i}-{j}"}}' for j in range(10)) + "\n")
    writer = manager.create_event_writer("iot", "sensors", writer_id="stream-job")
    seen = []

    def sink(batch_df, batch_id):
        result = writer.write_events(batch_df, routing_key="device", event="reading", write_number=batch_id)
        seen.append((batch_id, result.event_count))
        # the same micro-batch once more, as Spark does when it restarts before committing it
        replay = writer.write_events(batch_df, routing_key="device", event="reading", write_number=batch_id)
        seen.append((batch_id, replay.event_count))

    query = (spark.readStream.schema("device string, reading string").option("maxFilesPerTrigger", 1)
             .json(str(source)).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert seen == [(0, 10), (0, 0), (1, 10), (1, 0)]
    payloads = _payloads(manager)
    assert payloads == sorted(f"r{i}-{j}" for i in range(2) for j in range(10))


@pytest.mark.process
@pytest.mark.slow
def test_writer_killed_after_commit_then_restarted_with_same_id_writes_once(spark, root, manager, stream2):
    """The process dies after Delta committed its write but before it learned the result; the
    restarted writer retries the same (writer id, write number): no duplicate."""
    proc = spawn("crash", "--root", root, "--failpoint", "append:after_commit", "--op", "idempotent-append",
                 "--writer", "crasher", "--number", "7", "--per-batch", "30")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"not killed: {out}\n{err[-2000:]}"
    assert "WROTE" not in out  # it never learned the outcome
    proc = spawn("idempotent-append", "--root", root, "--writer", "crasher", "--number", "7", "--per-batch", "30")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert "WROTE crasher 7 0 None" in out  # the retry was skipped
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert sorted(r.event.decode() for r in events) == sorted(f"crasher:0007:{i:06d}" for i in range(30))
    check_key_order(events)


@pytest.mark.process
@pytest.mark.slow
def test_two_processes_retrying_the_same_write_apply_it_once(spark, root, manager, stream2):
    procs = [spawn("idempotent-append", "--root", root, "--writer", "dup", "--number", "3", "--per-batch", "40")
             for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        outs.append(out)
    counts = sorted(int(line.split()[3]) for out in outs for line in out.splitlines() if line.startswith("WROTE"))
    assert counts == [0, 40]
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert len(events) == 40 and len({r.event for r in events}) == 40
