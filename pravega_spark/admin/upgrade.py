"""``upgrade-store``: a format-2 store made format 3 in place (issue #68).

Format 2 kept each stream as sibling tables (``<stream>/events``, ``segments``, ``retention_set``,
...); format 3 makes the stream one table at ``<stream>`` and keeps the rest as rows of shard
tables (``store.schema``). No event's bytes move: each events table's log is written again one
folder up, ``events/`` before every data path (``_delta.relocate_log``), so its versions, table id,
application versions (write numbers, transaction and large-event decisions) and checksums stay.

Steps, each safe to repeat, so an upgrade killed anywhere is finished by running it again:

1. **Mark** the store table: format 3, the shard count and ``upgrade=from-2`` (one metadata
   commit). From here both libraries refuse the store; only the upgrade goes on, with that count.
2. **Per stream**, from the old catalogue (kept until step 4): (a) its row, with the segments of its
   segments table, and its rows of every kind, each written as a replacement of the stream's
   partition in its shard (repeating it changes nothing); (b) its log written at ``<stream>`` and
   checked against the old one (same version, same table id); (c) the old log removed, then the
   sibling tables. Once the old log is gone, (a) and (b) are done: a resume only finishes (c).
3. **Store-level rows**: key-value tables' rows and scope deletion marks into the catalogue
   shards, reader groups and members into theirs; then the old reader-group tables removed.
4. **The store table emptied** (its rows are in the shards).
5. **Unmarked**: the upgrade property removed; the store is format 3.

Before step 1 (the store still format 2): no transaction may be open and no large event
undecided, and no process may use the store (not fenced: step 2b compares the old log's version
before and after). The upgrade needs file access to the root: a classic session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from .. import _delta
from .._failpoints import failpoint
from ..errors import InvalidConfigError, StoreFormatError
from ..store.clock import now_ms
from ..store.schema import (
    AUTOSCALE_TABLE,
    DEFAULT_SHARDS,
    KVT_PREFIX,
    READER_GROUP_KEY,
    READER_GROUP_MEMBERS_SCHEMA,
    READER_GROUP_MEMBERS_TABLE,
    READER_GROUPS_SCHEMA,
    READER_GROUPS_TABLE,
    RETENTION_SET_TABLE,
    SCOPE_MARK,
    SHARD_SCHEMAS,
    SHARDS_PROPERTY,
    STORE_FORMAT,
    STORE_FORMAT_PROPERTY,
    STREAM_KEY,
    STREAMS_SCHEMA,
    SUBSCRIBERS_TABLE,
    SYSTEM_DIR,
    TRANSIENT_TABLE,
    UPGRADE_PROPERTY,
    WATERMARKS_TABLE,
    WRITER_MARKS_TABLE,
    valid_shard_count,
)
from ..store.store import CATALOG, Store, group_key, segment_entries, segment_records_of, stream_key
from ..stream.config import StreamConfiguration
from ..stream.segments import initial_segments
from ..writers.large_events import transient_app_id
from ..writers.transaction_state import transaction_states

log = logging.getLogger("pravega_spark")

OLD_EVENTS = "events"
# the sibling tables of a format-2 stream, removed once its rows are in the shards
OLD_SIBLINGS = ("segments", RETENTION_SET_TABLE, SUBSCRIBERS_TABLE, WRITER_MARKS_TABLE, WATERMARKS_TABLE,
                AUTOSCALE_TABLE, TRANSIENT_TABLE)
# the kinds whose format-2 table the upgrade copies (manifests of decided large events are not
# copied: their chunks are the events' now, and an undecided one is refused before the upgrade)
COPIED_KINDS = (RETENTION_SET_TABLE, SUBSCRIBERS_TABLE, WRITER_MARKS_TABLE, WATERMARKS_TABLE, AUTOSCALE_TABLE)


@dataclass
class UpgradeReport:
    """What ``upgrade_store`` did: the streams moved (``scope/stream``), the store-level rows
    copied, and whether the store was format 3 already."""

    root: str
    streams: list[str] = field(default_factory=list)
    reader_groups: int = 0
    key_value_tables: int = 0
    already: bool = False

    def __repr__(self) -> str:
        if self.already:
            return f"UpgradeReport({self.root}: format {STORE_FORMAT} already)"
        return (f"UpgradeReport({self.root}: {len(self.streams)} streams, {self.reader_groups} reader groups, "
                f"{self.key_value_tables} key-value tables moved to format {STORE_FORMAT})")


def upgrade_store(spark: SparkSession, root: str, shards: int = DEFAULT_SHARDS,
                  progress: Callable[[str], None] = log.info) -> UpgradeReport:
    """``StreamManager.upgrade_store``: see the module docstring.

    Raises:
        InvalidConfigError: a bad shard count, a count other than an interrupted upgrade's, or a
            session without file access to the root (the public-API backend).
        StoreFormatError: a store newer than this library, or one with pending work (an open
            transaction, an undecided large event: each named).
    """
    if not valid_shard_count(shards):
        raise InvalidConfigError(f"shards must be a power of two from 1 to 256, got {shards!r}")
    backend = _delta.backend_for(spark)
    if not backend.places_files:
        raise InvalidConfigError("upgrade-store rewrites Delta logs and needs file access to the store's root: "
                                 "run it on a classic session (spark-submit, a notebook with a JVM), not over "
                                 "Spark Connect")
    root = backend.qualify(str(root))
    streams_path = f"{root}/{SYSTEM_DIR}/streams"
    report = UpgradeReport(root)
    found = backend.table_property(streams_path, STORE_FORMAT_PROPERTY)
    number = int(found) if found and found.isdigit() else 1
    upgrading = backend.table_property(streams_path, UPGRADE_PROPERTY)
    if number > STORE_FORMAT:
        raise StoreFormatError(f"the store at {root} has format {number}; this pravega_spark writes format "
                               f"{STORE_FORMAT}: upgrade pravega_spark instead")
    if number == STORE_FORMAT and not upgrading:
        report.already = True
        return report
    if upgrading:  # resumed: the count is the interrupted upgrade's
        marked = int(backend.table_property(streams_path, SHARDS_PROPERTY) or 0)
        if shards not in (DEFAULT_SHARDS, marked):
            raise InvalidConfigError(f"the upgrade of {root} started with {marked} shards; resume it with that count")
        shards = marked
    old = Store(spark, root, shards)  # reads the old tables by path; its shard count is set below
    old_rows = [r for r in old.table_rows(streams_path)]
    names = sorted((r["scope"], r["stream"]) for r in old_rows
                   if r["stream"] != SCOPE_MARK and not r["stream"].startswith(KVT_PREFIX))
    if not upgrading:
        _check_nothing_pending(old, names)
        _delta.set_properties(spark, streams_path, {STORE_FORMAT_PROPERTY: str(STORE_FORMAT),
                                                    SHARDS_PROPERTY: str(shards), UPGRADE_PROPERTY: "from-2"})
        progress(f"upgrade {root}: marked (format {STORE_FORMAT}, {shards} shards)")
    failpoint("upgrade:after_marker")
    store = Store(spark, root)
    by_name = {(r["scope"], r["stream"]): r for r in old_rows}
    for i, (scope, stream) in enumerate(names, 1):
        _move_stream(store, by_name[(scope, stream)])
        report.streams.append(f"{scope}/{stream}")
        progress(f"upgrade {root}: [{i}/{len(names)}] {scope}/{stream} moved")
    report.reader_groups, report.key_value_tables = _move_store_rows(store, old_rows)
    failpoint("upgrade:after_store_rows")
    keys = sorted({r[STREAM_KEY] for r in old_rows})
    if keys:
        backend.delete_partitions(streams_path, STREAM_KEY, keys)
    failpoint("upgrade:after_catalog")
    _delta.set_properties(spark, streams_path, {}, unset=(UPGRADE_PROPERTY,))
    progress(f"upgrade {root}: done: {report!r}")
    return report


def _check_nothing_pending(store: Store, names: list[tuple[str, str]]) -> None:
    """Refuse (``StoreFormatError``) a store with an open transaction or an undecided large event."""
    pending = []
    for scope, stream in names:
        events = f"{store.stream_dir(scope, stream)}/{OLD_EVENTS}"
        if not store.backend.exists(events):
            continue
        txn = store.backend.transaction(events)
        pending += [f"{scope}/{stream}: open transaction {t['txn_id']}"
                    for t in transaction_states(txn, now_ms()) if t["status"] == "OPEN"]
        transient = f"{store.stream_dir(scope, stream)}/{TRANSIENT_TABLE}"
        if store.backend.exists(transient):
            ids = sorted({r["transient_id"] for r in store.table_rows(transient)})
            pending += [f"{scope}/{stream}: undecided large event {t}" for t in ids
                        if txn.app_version(transient_app_id(t)) < 0]
    if pending:
        raise StoreFormatError(f"cannot upgrade the store at {store.root} while work is pending ({'; '.join(pending)}): "
                               "commit or abort it with the format-2 library (or let its timeout and clean-up "
                               "jobs abort it), then run upgrade-store again")


def _move_stream(store: Store, row: dict) -> None:
    """Step 2 for one stream (see the module docstring)."""
    scope, stream = row["scope"], row["stream"]
    folder = store.stream_dir(scope, stream)
    old_events = f"{folder}/{OLD_EVENTS}"
    backend, spark = store.backend, store.spark
    if backend.exists(old_events) or _state(backend, folder) is None:  # (a): the old tables are still there
        _copy_rows(store, row)
        failpoint("upgrade:after_rows")
    if backend.exists(old_events):  # (b), then (c) starts with the old log
        before = backend.latest(old_events)
        if _state(backend, folder) != before:
            _delta.relocate_log(spark, folder, OLD_EVENTS)
        failpoint("upgrade:mid_log")
        if _state(backend, folder) != before or backend.latest(old_events) != before:
            raise StoreFormatError(f"upgrade of {scope}/{stream}: its log changed while it was moved (version "
                                   f"{before[0]} -> {backend.latest(old_events)[0]}): a process is using the store; "
                                   "stop it and run upgrade-store again")
        failpoint("upgrade:after_log")
        backend.remove_tables([old_events], folder=f"{old_events}/_delta_log")  # the table, not its data
    failpoint("upgrade:mid_clean")
    backend.remove_tables([f"{folder}/{name}" for name in OLD_SIBLINGS])


def _state(backend, path: str) -> tuple[int, str] | None:
    """The table's (version, id), or None where there is no readable log: none yet, or one a
    killed attempt left half-written (``relocate_log`` replaces it whole)."""
    try:
        return backend.latest(path) if backend.exists(path) else None
    except Exception:  # noqa: BLE001 - any unreadable log is rewritten, never used
        log.info("upgrade: the log at %s is not readable; it is written again", path)
        return None


def _copy_rows(store: Store, row: dict) -> None:
    """Step 2a: the stream's row with its segments, and its rows of every kind, into the shards."""
    scope, stream = row["scope"], row["stream"]
    folder = store.stream_dir(scope, stream)
    segments_path = f"{folder}/segments"
    if store.backend.exists(segments_path):
        records = segment_records_of(store.table_rows(segments_path))
    else:  # a stream killed while CREATING: its first segments follow from its row
        config = StreamConfiguration.from_json(row["configuration"])
        records = initial_segments(config.scaling_policy.min_num_segments, row["creation_time"])
    key = stream_key(scope, stream)
    new = tuple(row.get(c) for c in STREAMS_SCHEMA.fieldNames()[:-1]) + (segment_entries(records),)
    store.create_shard(store.catalog_path(key), STREAMS_SCHEMA, (STREAM_KEY,))
    store.backend.replace_rows(store.catalog_path(key), STREAMS_SCHEMA, lambda rows: [new],
                               f"upgrade {scope}/{stream}", {STREAM_KEY: key}, (STREAM_KEY,))
    for kind in COPIED_KINDS:
        path = f"{folder}/{kind}"
        if not store.backend.exists(path):
            continue
        rows = [tuple(r.get(c) for c in SHARD_SCHEMAS[kind].fieldNames()) for r in store.table_rows(path)]
        store.rewrite_shard_rows(kind, scope, stream, lambda stored, rows=rows: rows if rows else None,
                                 f"upgrade {kind} of {scope}/{stream}")


def _move_store_rows(store: Store, old_rows: list[dict]) -> tuple[int, int]:
    """Step 3: KVT rows and scope marks into the catalogue shards, reader groups and members
    into theirs, then the old reader-group tables removed. Returns (groups, KVTs)."""
    kvts = [r for r in old_rows if r["stream"].startswith(KVT_PREFIX)]
    for r in kvts:
        key = r[STREAM_KEY]
        new = tuple(r.get(c) for c in STREAMS_SCHEMA.fieldNames()[:-1]) + ([],)
        store.create_shard(store.catalog_path(key), STREAMS_SCHEMA, (STREAM_KEY,))
        store.backend.replace_rows(store.catalog_path(key), STREAMS_SCHEMA, lambda rows, new=new: [new],
                                   f"upgrade {r['scope']}/{r['stream']}", {STREAM_KEY: key}, (STREAM_KEY,))
    for mark in (r for r in old_rows if r["stream"] == SCOPE_MARK):
        new = tuple(mark.get(c) for c in STREAMS_SCHEMA.fieldNames()[:-1]) + ([],)
        for path in store.shard_paths(CATALOG):
            store.create_shard(path, STREAMS_SCHEMA, (STREAM_KEY,))
            store.backend.replace_rows(path, STREAMS_SCHEMA, lambda rows, new=new: [new],
                                       f"upgrade the deletion mark of {mark['scope']}",
                                       {STREAM_KEY: mark[STREAM_KEY]}, (STREAM_KEY,))
    old_groups = f"{store.root}/{SYSTEM_DIR}/{READER_GROUPS_TABLE}"
    old_members = f"{store.root}/{SYSTEM_DIR}/{READER_GROUP_MEMBERS_TABLE}"
    groups = store.table_rows(old_groups) if store.backend.exists(old_groups) else []
    for g in groups:
        new = tuple(g.get(c) for c in READER_GROUPS_SCHEMA.fieldNames())
        store.rewrite_rows(store.shard_path(READER_GROUPS_TABLE, g[READER_GROUP_KEY]), READER_GROUPS_SCHEMA,
                           lambda rows, new=new: [new], f"upgrade reader group {g['scope']}/{g['reader_group']}",
                           partition={READER_GROUP_KEY: g[READER_GROUP_KEY]})
    members = store.table_rows(old_members) if store.backend.exists(old_members) else []
    for m in members:
        gkey = group_key(m["scope"], m["reader_group"])
        new = tuple({**m, READER_GROUP_KEY: gkey}.get(c) for c in READER_GROUP_MEMBERS_SCHEMA.fieldNames())
        store.rewrite_rows(store.shard_path(READER_GROUP_MEMBERS_TABLE, gkey), READER_GROUP_MEMBERS_SCHEMA,
                           lambda rows, new=new: [new], f"upgrade member {m['reader']} of {m['reader_group']}",
                           partition={READER_GROUP_KEY: gkey, "member_key": m["member_key"]})
    store.backend.remove_tables([old_groups, old_members])
    return len(groups), len(kvts)
