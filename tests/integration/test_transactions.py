"""Transactions: staged events invisible, atomic contiguous commit (also after a scale), abort,
lease timeout, the timeout job racing commits, and a commit killed midway."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import pravega_spark as ps
from pravega_spark.store.schema import RECORD_STAGED
from pravega_spark.writers.transactions import (
    begin_version,
    decode_state,
    encode_state,
    max_execution_expiry_ms,
    new_txn_id,
    ping_expiry,
    staging_partition,
)
from tests.conftest import local_copy_path
from tests.helpers import events_rows
from tests.invariants import check_key_order, check_stream_consistent
from tests.processes import spawn

LEASE = timedelta(seconds=60)


def _rows(spark, writer: str, batch: int, n: int, keys: int = 4):
    return spark.createDataFrame([(f"key-{i % keys}", f"{writer}:{batch:04d}:{i:06d}") for i in range(n)],
                                 "routing_key string, event string")


def _staged_rows(spark, root):
    """The manifest rows of open transactions: one per staged data file."""
    return [r for r in events_rows(spark, root, "iot", "sensors") if r.record_type == RECORD_STAGED]


def _staged_files(spark, root) -> dict[str, int]:
    """Staged data file path -> its events, from the manifests."""
    return {json.loads(r.event)["path"]: json.loads(json.loads(r.event)["stats"])["numRecords"]
            for r in _staged_rows(spark, root)}


def _commit_actions(root, version: int) -> list[dict]:
    with open(local_copy_path(f"{root}/iot/sensors/_delta_log/{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _visible(manager):
    return sorted(r.event.decode() for r in manager.read_events("iot", "sensors").select("event").collect())


# ---- pure rules ----------------------------------------------------------------------------------
def test_txn_ids_carry_their_max_execution_time_begin_version_and_a_staging_partition():
    txn_id = uuid.UUID(new_txn_id(1_800_000_000_123, begin_version=41))
    assert max_execution_expiry_ms(txn_id) == 1_800_000_000_123
    assert begin_version(txn_id) == 41
    assert begin_version(uuid.UUID(new_txn_id(1_800_000_000_123))) is None
    assert staging_partition(txn_id) < 0
    assert staging_partition(txn_id) != staging_partition(uuid.UUID(new_txn_id(1_800_000_000_123)))


def test_state_encoding_and_expiry():
    assert decode_state(-1, 0)[0] is ps.TxnStatus.UNKNOWN
    assert decode_state(encode_state(0, 2_000), 1_999) == (ps.TxnStatus.OPEN, 2_000)
    assert decode_state(encode_state(0, 2_000), 2_000)[0] is ps.TxnStatus.ABORTED  # the lease expired
    assert decode_state(encode_state(1, 2_000), 9_999)[0] is ps.TxnStatus.COMMITTED
    assert decode_state(encode_state(2, 2_000), 0)[0] is ps.TxnStatus.ABORTED


def test_ping_rule_is_pravegas():
    assert ping_expiry(1_000, 10_000, 11_000) == 11_000
    with pytest.raises(ps.PingFailedError):
        ping_expiry(1_001, 10_000, 11_000)  # MAX_EXECUTION_TIME_EXCEEDED


# ---- against a real store ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.s3
@pytest.mark.both_backends
def test_commit_is_atomic_contiguous_and_ordered_like_pravega(spark, root, manager, stream2, delta_backend):
    classic = delta_backend == "classic"
    plain = manager.create_event_writer("iot", "sensors", writer_id="plain")
    plain.write_events(_rows(spark, "plain", 0, 8))
    txn = manager.create_transactional_writer("iot", "sensors", writer_id="tx").begin_txn(LEASE)
    assert txn.check_status() is ps.TxnStatus.OPEN
    assert txn.write_events(_rows(spark, "tx", 0, 30)) == 30
    if classic:
        assert _staged_files(spark, root) == {}  # buffered by the handle, as in Pravega
    else:  # the public-API backend stages rows at once (no file can be written uncommitted there)
        assert len(_staged_rows(spark, root)) == 30
    txn.flush()  # recorded: a commit through any handle includes them
    staged = _staged_files(spark, root) if classic else {}
    assert sum(staged.values()) == (30 if classic else 0)
    txn.write_event("tx:0001:000000", routing_key="key-1")  # a second write (buffered) comes after the first
    events_dir = Path(local_copy_path(f"{root}/iot/sensors"))
    written = {str(p.relative_to(events_dir)) for p in events_dir.rglob("*.parquet")}
    plain.write_events(_rows(spark, "plain", 1, 8))  # before the commit: before the txn's events
    assert not any(p.startswith("tx:") for p in _visible(manager))  # staged events are invisible
    # another process's handle sees the transaction (the public-API backend: all its writes)
    assert manager.create_transactional_writer("iot", "sensors", "other").get_txn(txn.txn_id).check_status() \
        is ps.TxnStatus.OPEN
    result = txn.commit()
    assert result.event_count == 31 and isinstance(result.version, int)  # over Connect: found when asked
    def events_at(version):
        return (spark.read.format("delta").option("versionAsOf", version).load(f"{root}/iot/sensors")
                .where("record_type = 0 AND segment_id >= 0").count())

    assert events_at(result.version) == events_at(result.version - 1) + 31  # the version of the commit
    if classic:
        # metadata-only: the commit adds the files flushed before and the one buffered file, all
        # written before it (no file written: each is named again under the directory of its
        # place, a hard link), removes nothing, and records the decision; the manifests go in a
        # commit of their own
        actions = _commit_actions(root, result.version)
        added = {a["add"]["path"] for a in actions if "add" in a}

        def names(paths):
            return {p.rsplit("/", 1)[-1] for p in paths}

        assert names(staged) < names(added) <= names(written) and len(added) == len(staged) + 1
        assert all(a["add"]["path"].startswith("segment_id={segment_id}/base_offset={base_offset}/end_offset="
                                               "{end_offset}/".format(**a["add"]["partitionValues"]))
                   for a in actions if "add" in a)
        assert not any("remove" in a for a in actions) and any("txn" in a for a in actions)
        cleanup = _commit_actions(root, result.version + 1)
        assert [a["remove"]["dataChange"] for a in cleanup if "remove" in a] == [False]  # the one flush's manifest
        assert not any("add" in a for a in cleanup)
    plain.write_events(_rows(spark, "plain", 2, 8))  # after the commit

    assert _staged_rows(spark, root) == []
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert sorted(r.event.decode() for r in events if r.writer_id == "tx") == sorted(
        [f"tx:0000:{i:06d}" for i in range(30)] + ["tx:0001:000000"])
    # per key: plain batch 0, plain batch 1, the transaction's events in write order, plain batch 2
    by_key = defaultdict(list)
    for r in sorted(events, key=lambda r: (r.segment_id, r.offset)):
        by_key[r.routing_key].append(r.event.decode())
    for key, seq in by_key.items():
        batches = [(p.split(":")[0], p.split(":")[1]) for p in seq]
        assert batches == sorted(batches, key=lambda b: {("plain", "0000"): 0, ("plain", "0001"): 1,
                                                         ("tx", "0000"): 2, ("tx", "0001"): 3,
                                                         ("plain", "0002"): 4}[b]), key
    check_key_order([r for r in events if r.writer_id == "tx"])
    # contiguous: in each segment, no other event lies between the transaction's events
    for sid in {r.segment_id for r in events}:
        seg = sorted((r for r in events if r.segment_id == sid), key=lambda r: r.offset)
        marks = [r.writer_id == "tx" for r in seg]
        first, last = marks.index(True), len(marks) - 1 - marks[::-1].index(True)
        assert all(marks[first:last + 1]), sid

    assert txn.commit().event_count == 0  # a second commit is a no-op
    assert txn.check_status() is ps.TxnStatus.COMMITTED
    with pytest.raises(ps.TxnFailedError):
        txn.write_event(b"late", routing_key="key-0")
    with pytest.raises(ps.TxnFailedError):
        txn.abort()
    listed = {r.txn_id: r.status for r in manager.transactions("iot", "sensors").collect()}
    assert listed == {txn.txn_id: "COMMITTED"}


@pytest.mark.slow
@pytest.mark.both_backends
def test_abort_timeout_job_and_errors_leave_nothing_visible(spark, root, manager, stream2, capsys, delta_backend):
    writer = manager.create_transactional_writer("iot", "sensors", writer_id="tx")
    txns = []
    for i, lease in enumerate((LEASE, timedelta(seconds=600), timedelta(seconds=10))):  # the 10 s lease last
        txns.append(writer.begin_txn(lease))
        txns[-1].write_events(_rows(spark, f"t{i}", 0, 12))
        txns[-1].flush()  # manifests that the abort and the timeout job must remove
    aborted, open_, expiring = txns
    aborted.abort()
    assert aborted.check_status() is ps.TxnStatus.ABORTED
    aborted.abort()  # again: a no-op
    with pytest.raises(ps.TxnFailedError):
        aborted.commit()
    with pytest.raises(ps.TxnFailedError):
        writer.get_txn(aborted.txn_id).write_event(b"x", routing_key="key-0")

    # the job (jobs/transactions.py), with a clock past the 10 s lease but not the 600 s one
    from jobs import transactions as job

    assert job.main(["--root", root, "--now", (datetime.now(timezone.utc) + timedelta(seconds=30)).isoformat()]) == 0
    assert "1 timed-out transactions aborted in 1 streams" in capsys.readouterr().out
    assert manager.abort_timed_out_transactions(now=datetime.now(timezone.utc) + timedelta(seconds=30)) == {}
    assert expiring.check_status() is ps.TxnStatus.ABORTED
    with pytest.raises(ps.TxnFailedError):
        expiring.commit()
    assert open_.check_status() is ps.TxnStatus.OPEN
    assert open_.ping(timedelta(seconds=20)) is ps.TxnStatus.OPEN
    expiry = {r.txn_id: r.lease_expiry for r in manager.transactions("iot", "sensors").collect()}[open_.txn_id]
    assert expiry.replace(tzinfo=timezone.utc) < datetime.now(timezone.utc) + timedelta(seconds=25)
    open_.abort()

    assert _visible(manager) == []
    assert _staged_rows(spark, root) == []
    check_stream_consistent(spark, manager, "iot", "sensors")
    with pytest.raises(ps.TxnNotFoundError):
        writer.get_txn(new_txn_id(int(time.time() * 1000)))
    with pytest.raises(ps.TxnNotFoundError):
        writer.get_txn("not-a-uuid")
    for lease in (timedelta(seconds=9), timedelta(seconds=601)):
        with pytest.raises(ps.InvalidConfigError):
            writer.begin_txn(lease)


@pytest.mark.slow
@pytest.mark.both_backends
def test_expired_lease_reports_aborted_before_the_timeout_job_runs(spark, root, manager, stream2, delta_backend):
    txn = manager.create_transactional_writer("iot", "sensors", writer_id="tx").begin_txn(timedelta(seconds=10))
    txn.write_events(_rows(spark, "tx", 0, 5))
    txn.flush()
    time.sleep(max(0.0, 10.5 - (time.time() - txn_begin_time(manager, txn))))
    assert txn.check_status() is ps.TxnStatus.ABORTED
    with pytest.raises(ps.TxnFailedError):
        txn.write_event(b"late", routing_key="key-0")
    with pytest.raises(ps.TxnFailedError):
        txn.commit()  # ... which also carries out the abort
    row = {r.txn_id: r for r in manager.transactions("iot", "sensors").collect()}[txn.txn_id]
    assert (row.status, row.timed_out) == ("ABORTED", False)
    assert _staged_rows(spark, root) == [] and _visible(manager) == []


def txn_begin_time(manager, txn) -> float:
    row = {r.txn_id: r for r in manager.transactions("iot", "sensors").collect()}[txn.txn_id]
    return row.lease_expiry.replace(tzinfo=timezone.utc).timestamp() - 10


@pytest.mark.both_backends(slow=("sql",))
def test_commit_after_a_scale_routes_to_the_current_segments(spark, manager, stream2, delta_backend):
    plain = manager.create_event_writer("iot", "sensors", writer_id="plain")
    plain.write_events(_rows(spark, "plain", 0, 16, keys=8))
    txn = manager.create_transactional_writer("iot", "sensors", writer_id="tx").begin_txn(LEASE)
    txn.write_events(_rows(spark, "tx", 0, 40, keys=8))
    manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    plain.write_events(_rows(spark, "plain", 1, 16, keys=8))
    assert txn.commit().event_count == 40
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    current = {r.segment_id for r in manager.segments("iot", "sensors", epoch=1).collect()}
    assert {r.segment_id for r in events if r.writer_id == "tx"} <= current
    assert len([r for r in events if r.writer_id == "tx"]) == 40
    # per key: the transaction's events after every plain event written before its commit
    by_key = defaultdict(list)
    for r in sorted(events, key=lambda r: (r.segment_id, r.offset)):
        by_key[r.routing_key].append(r.writer_id)
    for key, writers in by_key.items():
        assert writers == sorted(writers, key=lambda w: w == "tx"), key
    check_key_order(events)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.both_backends
def test_concurrent_commits_and_timeout_job_decide_each_txn_once(spark, root, manager, stream2, delta_backend):
    """One process commits transactions (fetched by id) while another runs the timeout job with
    a clock past every lease: each transaction ends committed with all its events, or aborted
    with none, never both."""
    writer = manager.create_transactional_writer("iot", "sensors", writer_id="tx")
    txns = []
    for i in range(4):
        txn = writer.begin_txn(timedelta(seconds=600))
        txn.write_events(_rows(spark, f"t{i}", 0, 25))
        txn.flush()  # committed by another process: it sees flushed writes only
        txns.append(txn)
    committer = spawn("txn-commit", "--root", root, "--txns", ",".join(t.txn_id for t in txns))
    timeout_job = spawn("txn-timeout", "--root", root, "--rounds", "4")
    outs = {}
    for name, p in (("commit", committer), ("timeout", timeout_job)):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        outs[name] = out
    committed = {line.split()[1] for line in outs["commit"].splitlines() if line.startswith("COMMITTED")}
    aborted = {line.split()[1] for line in outs["timeout"].splitlines() if line.startswith("ABORTED")}
    assert committed | aborted == {t.txn_id for t in txns}
    assert not committed & aborted
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    visible = defaultdict(int)
    for r in events:
        visible[r.event.decode().split(":")[0]] += 1
    for i, txn in enumerate(txns):
        expected = 25 if txn.txn_id in committed else 0
        assert visible.get(f"t{i}", 0) == expected, (txn.txn_id, visible)
        assert txn.check_status() is (ps.TxnStatus.COMMITTED if expected else ps.TxnStatus.ABORTED)
    check_key_order(events)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", ["append:before_commit", "append:after_commit"])
@pytest.mark.both_backends
def test_commit_killed_midway_is_completed_by_the_next_attempt(spark, root, manager, stream2, failpoint, delta_backend):
    writer = manager.create_transactional_writer("iot", "sensors", writer_id="tx")
    txn = writer.begin_txn(timedelta(seconds=600))
    txn.write_events(_rows(spark, "tx", 0, 30))
    txn.flush()  # committed by another process
    proc = spawn("crash", "--root", root, "--failpoint", failpoint, "--op", "txn-commit", "--txns", txn.txn_id)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"not killed: {out}\n{err[-2000:]}"
    expected = ps.TxnStatus.OPEN if failpoint == "append:before_commit" else ps.TxnStatus.COMMITTED
    assert txn.check_status() is expected  # nothing half-applied: before or after the one commit
    again = writer.get_txn(txn.txn_id).commit()
    assert again.event_count == (30 if expected is ps.TxnStatus.OPEN else 0)
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert sorted(r.event.decode() for r in events) == [f"tx:0000:{i:06d}" for i in range(30)]
    check_key_order(events)


@pytest.mark.slow
def test_vacuum_keeps_an_open_transactions_staged_files(spark, root, manager, stream2):
    """Staged files are referenced by no table until the commit: VACUUM must still keep them,
    flushed (listed by a manifest) or still buffered by the handle."""
    txn = manager.create_transactional_writer("iot", "sensors", writer_id="tx").begin_txn(LEASE)
    txn.write_events(_rows(spark, "tx", 0, 10))
    txn.flush()
    staged = _staged_files(spark, root)
    txn.write_events(_rows(spark, "tx", 1, 5))  # buffered: no manifest lists it
    events_dir = Path(f"{root}/iot/sensors")
    written = {p for p in events_dir.rglob("*.parquet") if "segment_id=-" not in str(p)}
    manager.vacuum("iot", "sensors", retention=timedelta(0))
    assert all(os.path.exists(f"{root}/iot/sensors/{p}") for p in staged)
    assert all(p.exists() for p in written)
    assert txn.commit().event_count == 15
    assert sorted(_visible(manager)) == sorted([f"tx:0000:{i:06d}" for i in range(10)]
                                               + [f"tx:0001:{i:06d}" for i in range(5)])
