"""Storage maintenance: VACUUM of a store's stream tables, with the rule that keeps staged data.

Staged data (an open transaction's files, a large event's chunks) is written before any table
references it, so it looks like an orphan to VACUUM. While a stream has any, its events table is
vacuumed with a retention that covers the oldest of it (one hour more), so it is never removed;
it goes with its abort, or with a later VACUUM.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ..controller.client import Controller
from ..store import clock
from ..store.schema import EVENTS_PARTITION, SHARD_KINDS
from ..store.store import CATALOG, stream_key
from ..writers.transactions import MAX_EXECUTION_TIME, transaction_states

log = logging.getLogger("pravega_spark")

# Delta's default ``delta.deletedFileRetentionDuration`` (7 days), what VACUUM keeps by default.
DEFAULT_FILE_RETENTION_HOURS = 168


def vacuum(controller: Controller, scope: str | None = None, stream: str | None = None,
           retention: timedelta | None = None, store_tables: bool = True) -> list[str]:
    """``StreamManager.vacuum``: VACUUM every table of the streams (all, a scope's, or one) that
    exists and, with ``store_tables``, the store's own tables holding their rows (all of them
    when no scope is given); the paths vacuumed."""
    clock.check_duration(retention, "retention")
    store, backend = controller.store, controller.store.backend
    hours = None if retention is None else retention.total_seconds() / 3600
    names = controller.stream_names(scope, stream)
    done = []
    if store_tables:  # only the shard tables holding these streams' rows, when a scope is given
        keys = None if scope is None else {stream_key(s, t) for s, t in names}
        done += vacuum_store_tables(controller, retention, keys)
    for s, t in names:
        events = store.events_path(s, t)
        if not backend.is_table(events):
            continue
        staged = staged_age_hours(controller, s, t)
        if staged is not None and (hours if hours is not None else DEFAULT_FILE_RETENTION_HOURS) < staged + 1:
            log.info("vacuum of %s/%s: retention raised to %.1f h to keep staged data", s, t, staged + 1)
            backend.vacuum(events, staged + 1)
        else:
            backend.vacuum(events, hours)
        done.append(events)
    done += vacuum_removed_tables(controller, scope, stream, hours)
    log.info("vacuum: %d tables", len(done))
    return done


def vacuum_store_tables(controller: Controller, retention: timedelta | None = None,
                        keys: set[str] | None = None) -> list[str]:
    """VACUUM the store's own tables that exist (``Store.own_tables``), each once, or only the
    shard tables holding the rows of these stream keys; the paths vacuumed."""
    clock.check_duration(retention, "retention")
    store = controller.store
    hours = None if retention is None else retention.total_seconds() / 3600
    if keys is None:
        paths = store.own_tables()
    else:  # only the shard tables that could hold these keys are looked up
        held = {store.shard_path(kind, key) for key in keys for kind in (CATALOG, *SHARD_KINDS)}
        paths = sorted(p for p in held if store.shard_exists(p))
    for path in paths:
        store.backend.vacuum(path, hours)
    return paths


def vacuum_removed_tables(controller: Controller, scope: str | None, stream: str | None,
                          hours: float | None) -> list[str]:
    """VACUUM the tables a deletion emptied (on a backend that cannot remove folders) under the
    vacuum's scope, though their stream or key-value table has left the catalogue; forget each
    one once this retention covers its removal (its removed files are then gone). The paths
    vacuumed."""
    store, backend = controller.store, controller.store.backend
    prefix = "/".join(p for p in (store.root, scope, stream) if p) + "/"
    now = clock.utc_now()
    retained = timedelta(hours=DEFAULT_FILE_RETENTION_HOURS if hours is None else hours)
    done, forget = [], []
    for row in store.removed_tables():
        path = row["path"]
        if not (path + "/").startswith(prefix):  # the stream's own table, or one under the scope
            continue
        if backend.is_table(path):
            backend.vacuum(path, hours)
            done.append(path)
        if row["removal_time"] <= now - retained:
            forget.append(path)
    store.forget_removed_tables(forget)
    return done


def staged_age_hours(controller: Controller, scope: str, stream: str) -> float | None:
    """Hours since the oldest staged data of the stream was written, or None.

    Counted: transaction manifests and large-event manifests (each is committed right after its
    data files), and an open transaction's writes that its handle has not flushed yet (no later
    than its begin, at most ``MAX_EXECUTION_TIME`` before its max execution expiry).
    """
    store, backend = controller.store, controller.store.backend
    if not backend.places_files:  # staged rows there are committed rows: VACUUM keeps them
        return None
    events = backend.transaction(store.events_path(scope, stream))
    times = [f.modification_time for f in events.files_where(f"{EVENTS_PARTITION} < 0")]
    now_ms = clock.now_ms()
    times += [int(s["max_execution_expiry"].timestamp() * 1000) - int(MAX_EXECUTION_TIME.total_seconds() * 1000)
              for s in transaction_states(events, now_ms) if s["status"] == "OPEN"]
    transient = store.transient_path(scope, stream)
    if backend.is_table(transient):
        key = stream_key(scope, stream)
        times += [f.modification_time for f in backend.transaction(transient).files_where(f"stream_key = '{key}'")]
    if not times:
        return None
    return max(0.0, (now_ms - min(times)) / 3_600_000)
