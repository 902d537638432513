"""The transaction timeout service: Pravega's controller ``TimeoutService``.

A transaction whose lease expired (no ``ping`` in time) is aborted by this job
(``StreamManager.abort_timed_out_transactions``, ``jobs/transactions.py``): one commit per stream
records ABORTED for each expired transaction and removes its manifests, then its staged files
are deleted. Manifests a decided transaction left behind (a process stopped between its decision
and its clean-up) go in the same commit. The fence is the transaction's application version: a
concurrent commit or ping of the same transaction fails one of the two.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from .. import _delta
from ..controller.client import Controller
from ..store.schema import EVENTS_PARTITION
from ..writers.transactions import (
    STATE_ABORTED,
    TXN_APP_PREFIX,
    encode_state,
    epoch_ms,
    manifest_removals,
    remove_staged_rows,
    staged_data_paths,
    staging_partition,
    staging_partitions_present,
    transaction_states,
)

log = logging.getLogger("pravega_spark")


def abort_timed_out(events_txn_factory, scope: str, stream: str, now_ms: int, spark=None, events_path=None) -> list[str]:
    """Abort every transaction of one stream whose lease expired by ``now_ms``, removing its
    manifests in the same commit, then delete its staged files; also remove manifests that a
    decided transaction left behind (a process stopped between its commit and its clean-up)."""
    deleted: list[str] = []
    backend = _delta.backend_for(spark) if spark is not None else None
    if backend is not None and not backend.places_files:
        return abort_timed_out_rows(events_txn_factory, backend, scope, stream, now_ms, events_path)

    def attempt() -> list[str]:
        txn = events_txn_factory()
        states = transaction_states(txn, now_ms)
        expired = [s["txn_id"] for s in states if s["timed_out"]]
        decided = {staging_partition(uuid.UUID(s["txn_id"])): s for s in states
                   if s["status"] in ("COMMITTED", "ABORTED") and not s["timed_out"]}
        actions = []
        for txn_id in expired:
            app = TXN_APP_PREFIX + txn_id
            txn.app_version(app)  # the fence: a concurrent commit or ping of it fails one of us
            actions.append(txn.set_app_version(app, encode_state(STATE_ABORTED, now_ms)))
        expired_parts = {staging_partition(uuid.UUID(t)) for t in expired}
        files = [f for f in txn.files_where(f"{EVENTS_PARTITION} < 0")
                 if f.int_partition(EVENTS_PARTITION) in expired_parts | set(decided)]
        if not files and not actions:
            return []
        # the staged files of aborted transactions go; a committed one's are its events now
        doomed = [f for f in files if f.int_partition(EVENTS_PARTITION) in expired_parts
                  or decided.get(f.int_partition(EVENTS_PARTITION), {}).get("status") == "ABORTED"]
        deleted[:] = staged_data_paths(txn, doomed)
        txn.commit(None, (), manifest_removals(files) + actions)
        log.info("aborted %d timed-out transactions of %s/%s (%d manifests removed): %s",
                 len(expired), scope, stream, len(files), expired)
        return expired

    expired = _delta.retrying(attempt, f"abort timed-out transactions of {scope}/{stream}")
    if deleted and spark is not None:
        _delta.backend_for(spark).delete_files(events_path, deleted)
    return expired


def abort_timed_out_rows(events_txn_factory, backend, scope: str, stream: str, now_ms: int,
                         events_path: str) -> list[str]:
    """``abort_timed_out`` on the public-API backend: one guarded append records ABORTED for every expired
    transaction (compare-and-sets of the states read: a concurrent commit or ping fails it and the
    retry reads again), then one DELETE removes the staged rows of every decided transaction."""

    def attempt() -> tuple[list[str], set[int]]:
        txn = events_txn_factory()
        states = transaction_states(txn, now_ms)
        expired = [s["txn_id"] for s in states if s["timed_out"]]
        actions = []
        for txn_id in expired:
            app = TXN_APP_PREFIX + txn_id
            txn.app_version(app)
            actions.append(txn.set_app_version(app, encode_state(STATE_ABORTED, now_ms)))
        if actions:
            txn.commit(None, (), actions)
        decided = {staging_partition(uuid.UUID(s["txn_id"])) for s in states
                   if s["status"] in ("COMMITTED", "ABORTED")}
        return expired, decided

    expired, decided = _delta.retrying(attempt, f"abort timed-out transactions of {scope}/{stream}")
    left = staging_partitions_present(backend, events_path) & decided
    remove_staged_rows(backend, events_path, sorted(left))
    if expired or left:
        log.info("aborted %d timed-out transactions of %s/%s (%d staging partitions removed): %s",
                 len(expired), scope, stream, len(left), expired)
    return expired


def abort_timed_out_transactions(controller: Controller, now: datetime | None, scope: str | None = None,
                                 stream: str | None = None) -> dict[str, list[str]]:
    """``StreamManager.abort_timed_out_transactions``: the timeout job over every stream (all, a
    scope's, or one); a stream deleted meanwhile is skipped."""
    now_ms = epoch_ms(now)
    out = {}
    for s, t in controller.stream_names(scope, stream):
        path = controller.store.events_path(s, t)
        try:
            aborted = abort_timed_out(lambda p=path: controller.store.backend.transaction(p), s, t, now_ms,
                                      controller.spark, path)
        except Exception as exc:  # noqa: BLE001 - a stream deleted meanwhile is skipped
            if controller.store.backend.is_table(path):
                raise
            log.info("transactions of %s/%s: stream gone (%s)", s, t, type(exc).__name__)
            continue
        if aborted:
            out[f"{s}/{t}"] = aborted
    return out
