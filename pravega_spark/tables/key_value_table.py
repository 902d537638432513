"""``KeyValueTable``: Pravega's key-value tables on Delta (PRAVEGA_SEMANTICS section 12).

A KVT is registered in its scope's catalogue (the streams table, under ``KVT_PREFIX + name``: a
scope holding one cannot be deleted) and keeps its entries in one Delta table partitioned by
table segment (``schema.KVT_SCHEMA``). The entries table is an append-only log, as Pravega's table
segments are: a put adds an entry, a removal a tombstone; a key's live entry is its newest one.

Every update is **one commit fenced on its key's partition**:

- classic: a ``DeltaTransaction`` that declares the partition read (a concurrent add there makes
  the commit fail, and it is retried from a fresh snapshot), reads the partition's largest
  version from file statistics and the keys' entries from the few files whose ``key_hash``
  statistics may hold them (pyarrow, no Spark job), then adds one small file;
- Spark Connect: the same reads as queries, and a MERGE that inserts the new entries unless an
  entry newer than the largest version read has appeared in the partition (then nothing is
  written, and it is retried).

A new entry's version is its partition's largest version plus one, so versions increase per key
(through removals and inserts again) and the condition "no newer entry" is the whole fence. Two
updates on different partitions never conflict. ``update_all`` decides many keys with one join
against the live entries, and appends the applied ones in one commit fenced on the partitions it
touches.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import _delta
from ..errors import (
    InvalidConfigError,
    InvalidKeyError,
    KeyValueTableNotFoundError,
    ScopeNotFoundError,
)
from ..store.schema import KVT_PARTITION, KVT_PROPERTIES, KVT_SCHEMA, KVT_STATS_COLUMNS
from ..store.store import Store
from ..stream.names import validate_key_value_table_name, validate_scope_name
from .kv_router import key_hash, partition_of
from .table_entries import (
    Insert,
    KeyValueTableConfiguration,
    Modification,
    Put,
    Remove,
    TableEntry,
    Version,
    check_batch,
    check_conditions,
    check_key,
    filter_key_range,
    filter_live,
    with_decisions,
)

__all__ = [
    "Insert", "KeyValueTable", "KeyValueTableConfiguration", "Put", "Remove", "TableEntry", "Version",
    "create_key_value_table", "delete_key_value_table", "list_key_value_tables", "open_key_value_table",
]

log = logging.getLogger("pravega_spark")

ROWS_PER_FILE = 25_000
"""Entries per data file written by ``update_all``: files of contiguous ``key_hash`` ranges, so a
lookup reads one of them."""


# ---- lifecycle (the controller's KVT calls) ----------------------------------------------------
def create_key_value_table(store: Store, scope: str, kvt: str, config: KeyValueTableConfiguration) -> bool:
    """Create the KVT: its catalogue row (one commit, fenced against ``delete_scope``), then its
    entries table. A crash in between leaves a registered KVT whose table its first use creates.

    Returns:
        False if a KVT of that name exists (nothing changes).

    Raises:
        InvalidNameError, InvalidConfigError: bad input (nothing written).
        ScopeNotFoundError: no such scope (or it was deleted meanwhile).
    """
    validate_scope_name(scope)
    validate_key_value_table_name(kvt)
    if not isinstance(config, KeyValueTableConfiguration):
        raise InvalidConfigError(f"config must be a KeyValueTableConfiguration, got {type(config).__name__}")
    created = store.scope_creation_time(scope)
    if created is None:
        raise ScopeNotFoundError(f"scope {scope} does not exist")
    table_id = uuid.uuid4().hex[:16]
    configuration = config.to_json()[:-1] + f', "table_id": "{table_id}"}}'
    inserted = store.insert_key_value_table(scope, kvt, configuration, created)
    if inserted:
        store.backend.create_table(store.key_value_table_path(scope, kvt, table_id), KVT_SCHEMA,
                            (KVT_PARTITION,), KVT_PROPERTIES)
    log.info("create_key_value_table %s/%s: %s", scope, kvt, "created" if inserted else "exists")
    return inserted


def open_key_value_table(store: Store, scope: str, kvt: str) -> KeyValueTable:
    """A handle on the KVT.

    Raises:
        KeyValueTableNotFoundError: no such KVT.
    """
    validate_scope_name(scope)
    validate_key_value_table_name(kvt)
    row = store.key_value_table_row(scope, kvt)
    if row is None:
        raise KeyValueTableNotFoundError(f"key-value table {scope}/{kvt} does not exist")
    config, table_id = _parse(row["configuration"])
    return KeyValueTable(store, scope, kvt, config, table_id)


def delete_key_value_table(store: Store, scope: str, kvt: str) -> bool:
    """Delete the KVT: its catalogue row (one commit: from then on it does not exist, and handles
    on it raise ``KeyValueTableNotFoundError``), then its entries table. A crash in between
    leaves an unreferenced folder (a KVT created again gets a new one). False if it did not exist."""
    validate_scope_name(scope)
    validate_key_value_table_name(kvt)
    row = store.delete_key_value_table_row(scope, kvt)
    if row is None:
        return False
    store.remove_key_value_table_data(scope, kvt, _parse(row["configuration"])[1])
    log.info("delete_key_value_table %s/%s", scope, kvt)
    return True


def list_key_value_tables(store: Store, scope: str) -> DataFrame:
    """The scope's KVTs: ``scope, key_value_table, partition_count, primary_key_length,
    secondary_key_length, creation_time``."""
    validate_scope_name(scope)
    conf = F.col("configuration")
    return (store.key_value_tables().where(F.col("scope") == scope)
            .select("scope", F.col("kvt").alias("key_value_table"),
                    F.get_json_object(conf, "$.partition_count").cast("int").alias("partition_count"),
                    F.get_json_object(conf, "$.primary_key_length").cast("int").alias("primary_key_length"),
                    F.get_json_object(conf, "$.secondary_key_length").cast("int").alias("secondary_key_length"),
                    "creation_time")
            .orderBy("key_value_table"))


def _parse(configuration: str) -> tuple[KeyValueTableConfiguration, str]:
    import json

    return KeyValueTableConfiguration.from_json(configuration), str(json.loads(configuration)["table_id"])


def _newest(rows: Iterable[dict], segment: int) -> dict[bytes, tuple[Version, bytes | None]]:
    """Each key's newest entry among ``rows``: its version and value (None: a tombstone)."""
    newest: dict[bytes, dict] = {}
    for r in rows:
        key = bytes(r["key"])
        if key not in newest or int(r["version"]) > int(newest[key]["version"]):
            newest[key] = r
    return {k: (Version(segment, int(r["version"])), None if r["removed"] else bytes(r["value"]))
            for k, r in newest.items()}


class KeyValueTable:
    """One key-value table (Pravega's ``KeyValueTable``): conditional single-key and batch
    updates, lookups, and reads as DataFrames. Get one from ``StreamManager.key_value_table``.

    Keys are ``bytes`` of exactly ``primary_key_length + secondary_key_length``; values ``bytes``
    of at most 1,040,384.

    Attributes:
        scope, name: the KVT's scope and name.
        config: its ``KeyValueTableConfiguration``.
        path: its entries table.
        files_read: data files the last ``get``/``get_all``/``exists`` read (None: a query).

    Example:
        >>> kvt = manager.key_value_table("iot", "devices")  # doctest: +SKIP
        >>> v1 = kvt.put(b"dev-0001", b"on")  # doctest: +SKIP
        >>> kvt.put(b"dev-0001", b"off", version=v1)  # doctest: +SKIP
        Version(segment=2, number=7)
    """

    def __init__(self, store: Store, scope: str, name: str, config: KeyValueTableConfiguration, table_id: str) -> None:
        self._store = store
        self.spark = store.spark
        self.backend = store.backend
        self.scope = scope
        self.name = name
        self.config = config
        self.table_id = table_id
        self.path = store.key_value_table_path(scope, name, table_id)
        self.files_read: int | None = None
        self._created = False

    def __repr__(self) -> str:
        c = self.config
        return (f"KeyValueTable({self.scope}/{self.name}, partitions={c.partition_count}, "
                f"key={c.primary_key_length}+{c.secondary_key_length} bytes)")

    # ---- checks ------------------------------------------------------------------------------
    def _check_exists(self) -> None:
        """Refuse a handle on a deleted KVT (or on an older incarnation of its name)."""
        row = self._store.key_value_table_row(self.scope, self.name)
        if row is None or _parse(row["configuration"])[1] != self.table_id:
            raise KeyValueTableNotFoundError(f"key-value table {self.scope}/{self.name} does not exist (deleted)")
        if not self._created:  # a crash between registration and creation left no table yet
            self.backend.create_table(self.path, KVT_SCHEMA, (KVT_PARTITION,), KVT_PROPERTIES)
            self._created = True

    def _partition(self, primary_key: bytes) -> int:
        return partition_of(primary_key, self.config.partition_count)

    # ---- updates -----------------------------------------------------------------------------
    def update(self, modifications: Sequence[Modification]) -> list[Version | None]:
        """Apply a batch of ``Insert``/``Put``/``Remove`` for one primary key, all or nothing (one
        commit); returns each modification's new version (None for a removal).

        Raises:
            InvalidKeyError, TableEntryTooLargeError, InvalidBatchError: the batch breaks
                Pravega's rules (nothing written).
            BadKeyVersionError, NoSuchKeyError: a condition does not hold (nothing written).
            KeyValueTableNotFoundError: the KVT was deleted.
        """
        mods = list(modifications)
        primary = check_batch(mods, self.config)
        segment = self._partition(primary)
        keys = [bytes(m.key) for m in mods]
        wanted = set(keys)
        hashes = sorted({key_hash(k) for k in wanted})
        self._check_exists()
        needs_current = any(not (isinstance(m, Put) and m.version is None) for m in mods)

        def attempt() -> list[Version | None]:
            txn = self.backend.transaction(self.path)
            txn.fence_partitions(KVT_PARTITION, [segment])
            top = txn.expect_max(KVT_PARTITION, [segment], "version")[segment]
            current: dict[bytes, Version] = {}
            if needs_current:
                found = _newest((r for r in txn.lookup(KVT_PARTITION, segment, "key_hash", hashes)
                                 if bytes(r["key"]) in wanted), segment)
                current = {k: v for k, (v, value) in found.items() if value is not None}
            check_conditions(mods, current)
            stamp = top + 1
            rows = [(segment, key_hash(k), k, None if isinstance(m, Remove) else bytes(m.value), stamp,
                     isinstance(m, Remove))
                    for k, m in zip(keys, mods, strict=True) if not (isinstance(m, Remove) and k not in current)]
            if rows:
                txn.commit(txn.write_rows(rows, KVT_SCHEMA, (KVT_PARTITION,), KVT_STATS_COLUMNS), (KVT_PARTITION,))
            return [None if isinstance(m, Remove) else Version(segment, stamp) for m in mods]

        versions = _delta.retrying(attempt, f"update {self.scope}/{self.name}")
        log.debug("update %s/%s: %d keys of segment %d", self.scope, self.name, len(mods), segment)
        return versions

    def put(self, key: bytes, value: bytes, version: Version | None = None) -> Version:
        """Set ``key`` to ``value``: unconditionally (``version`` None), or only if its current
        version is ``version`` (``Version.NOT_EXISTS``: only if absent). Returns the new version.

        Raises:
            BadKeyVersionError / NoSuchKeyError: the condition does not hold (nothing written).
            InvalidKeyError / TableEntryTooLargeError: bad key or value.
        """
        return self.update([Put(key, value, version)])[0]

    def insert(self, key: bytes, value: bytes) -> Version:
        """Add ``key`` if absent; returns its version.

        Raises:
            BadKeyVersionError: the key exists.
        """
        return self.update([Insert(key, value)])[0]

    def remove(self, key: bytes, version: Version | None = None) -> None:
        """Remove ``key``: unconditionally (absent is fine), or only at ``version``.

        Raises:
            BadKeyVersionError / NoSuchKeyError: the condition does not hold.
        """
        self.update([Remove(key, version)])

    # ---- lookups -----------------------------------------------------------------------------
    def get_all(self, keys: Sequence[bytes]) -> list[TableEntry | None]:
        """Each key's live entry (None if absent), in the keys' order. On a classic session this
        reads the few data files whose statistics may hold the keys, with pyarrow: no Spark job."""
        checked = [check_key(k, self.config) for k in keys]
        self._check_exists()
        by_segment: dict[int, list[bytes]] = {}
        for k in checked:
            by_segment.setdefault(self._partition(k[:self.config.primary_key_length]), []).append(k)
        found: dict[bytes, TableEntry] = {}
        read = 0
        for segment, in_segment in by_segment.items():
            wanted = set(in_segment)
            rows, files = self.backend.lookup(self.path, KVT_PARTITION, segment, "key_hash",
                                        sorted({key_hash(k) for k in wanted}))
            read = None if files is None or read is None else read + files
            for k, (version, value) in _newest((r for r in rows if bytes(r["key"]) in wanted), segment).items():
                if value is not None:
                    found[k] = TableEntry(k, value, version)
        self.files_read = read
        return [found.get(k) for k in checked]

    def get(self, key: bytes) -> TableEntry | None:
        """The key's live entry, or None."""
        return self.get_all([key])[0]

    def exists(self, key: bytes) -> bool:
        return self.get(key) is not None

    # ---- reads as DataFrames -------------------------------------------------------------------
    def _entries(self, version: int | None = None) -> DataFrame:
        self._check_exists()
        return self.backend.read(self.path, version)

    def entries_log(self, version: int | None = None) -> DataFrame:
        """The entries table itself (every entry and tombstone not yet compacted):
        ``partition, key_hash, key, value, version, removed``."""
        return self._entries(version)

    def entries(self, version: int | None = None) -> DataFrame:
        """Every live entry: ``key, value, version`` (version: the segment version), at the
        entries table's latest version or at Delta version ``version`` (time travel)."""
        return self._entries(version).transform(filter_live).select("key", "value", "version")

    def for_primary_key(self, primary_key: bytes, from_sk: bytes | None = None, to_sk: bytes | None = None,
                        *, prefix: bytes | None = None, version: int | None = None) -> DataFrame:
        """The live entries of one primary key (one partition is read), with secondary keys in
        ``[from_sk, to_sk]`` (both inclusive, each optional) and starting with ``prefix``."""
        c = self.config
        if not isinstance(primary_key, (bytes, bytearray)) or len(primary_key) != c.primary_key_length:
            raise InvalidKeyError(f"a primary key must be {c.primary_key_length} bytes, got {primary_key!r:.60}")
        segment = self._partition(bytes(primary_key))
        entries = (self._entries(version).where(F.col(KVT_PARTITION) == segment)
                   .where(F.substring("key", 1, c.primary_key_length) == F.lit(bytearray(primary_key))))
        entries = filter_key_range(entries, low=from_sk, high=to_sk, prefix=prefix, offset=c.primary_key_length,
                                   length=c.secondary_key_length)
        return entries.transform(filter_live).select("key", "value", "version").orderBy("key")

    def for_prefix(self, primary_prefix: bytes, version: int | None = None) -> DataFrame:
        """The live entries whose primary key starts with ``primary_prefix`` (every partition)."""
        entries = filter_key_range(self._entries(version), low=None, high=None, prefix=bytes(primary_prefix),
                                   length=self.config.primary_key_length)
        return entries.transform(filter_live).select("key", "value", "version").orderBy("key")

    def for_range(self, from_pk: bytes | None, to_pk: bytes | None, version: int | None = None) -> DataFrame:
        """The live entries whose primary key is in ``[from_pk, to_pk]`` (inclusive; None: open)."""
        entries = filter_key_range(self._entries(version), low=from_pk, high=to_pk,
                                   length=self.config.primary_key_length)
        return entries.transform(filter_live).select("key", "value", "version").orderBy("key")

    # ---- bulk updates ------------------------------------------------------------------------
    def update_all(self, df: DataFrame, key: str = "key", value: str = "value", version: str | None = None) -> DataFrame:
        """Put many keys at once: each row of ``df`` is a put of ``key`` to ``value``,
        unconditional when ``version`` is None or the row's version is null, an insert when it is
        -1 (``NOT_EXISTS``), else conditional on that segment version (``entries()``'s ``version``).

        All keys of one primary key apply together or not at all; everything applied is one
        commit, fenced on the partitions it touches.

        Returns:
            A DataFrame ``key, version, error``: the new version (null if not applied) and the
            error kind (null, or ``BadKeyVersion``, ``NoSuchKey``, ``InvalidKey``,
            ``ValueTooLarge``, ``DuplicateKey``, ``BatchFailed``), materialized (reading it again
            gives the same rows).

        Raises:
            InvalidConfigError: a named column is missing, or ``key``/``value`` are not binary.
        """
        missing = [c for c in (key, value, version) if c is not None and c not in df.columns]
        if missing:
            raise InvalidConfigError(f"update_all: column(s) {missing} not in the DataFrame's {df.columns}")
        types = dict(df.dtypes)
        if types[key] != "binary" or types[value] != "binary":
            raise InvalidConfigError(f"update_all: {key!r} and {value!r} must be binary columns, got "
                                     f"{types[key]} and {types[value]}")
        self._check_exists()
        expected = F.col(version).cast("long") if version is not None else F.lit(None).cast("long")
        source = df.select(F.col(key).alias("key"), F.col(value).alias("value"), expected.alias("expected"))
        source = source.localCheckpoint()  # read the input once: every attempt decides the same rows
        count = self.config.partition_count

        def attempt() -> DataFrame:
            txn = self.backend.transaction(self.path)
            segments = list(range(count))
            stamps = {p: top + 1 for p, top in txn.expect_max(KVT_PARTITION, segments, "version").items()}
            live = txn.frame().transform(filter_live)
            decided = with_decisions(source, live, config=self.config, stamps=stamps).localCheckpoint()
            applied = decided.where(F.col("error").isNull())
            # one job over the decisions: rows per partition and outcome (what to fence, and the log)
            counts = decided.groupBy(KVT_PARTITION, "error").count().collect()
            touched = sorted({int(r[KVT_PARTITION]) for r in counts if r["error"] is None})
            if touched:
                txn.fence_partitions(KVT_PARTITION, touched)
                txn.expect_tails(KVT_PARTITION, {p: stamps[p] - 1 for p in touched})
                rows = sum(int(r["count"]) for r in counts if r["error"] is None)
                files = max(len(touched), -(-rows // ROWS_PER_FILE))
                out = (applied.select(KVT_PARTITION, "key_hash", "key", "value", "version",
                                      F.lit(False).alias("removed"))
                       .repartitionByRange(files, KVT_PARTITION, "key_hash")
                       .sortWithinPartitions(KVT_PARTITION, "key_hash"))
                txn.append_frame(out, (KVT_PARTITION,))
            return decided, counts

        decided, counts = _delta.retrying(attempt, f"update_all {self.scope}/{self.name}")
        outcome: dict[str | None, int] = {}
        for r in counts:
            outcome[r["error"]] = outcome.get(r["error"], 0) + int(r["count"])
        log.info("update_all %s/%s: %d applied, %s", self.scope, self.name, outcome.pop(None, 0),
                 ", ".join(f"{n} {k}" for k, n in sorted(outcome.items())) or "no failures")
        return decided.select("key", "version", "error")

    # ---- maintenance -------------------------------------------------------------------------
    def compact(self) -> int:
        """Delete the entries no read needs: every key's older entries, and tombstones (except
        each partition's newest entry, which carries its largest version). One MERGE; the live
        entries and their versions are unchanged. Returns the entries deleted."""
        self._check_exists()
        entries = self.backend.read(self.path)
        columns = [KVT_PARTITION, "key_hash", "key", "version"]
        newest = entries.groupBy(KVT_PARTITION, "key_hash", "key").agg(F.max("version").alias("version"))
        top = entries.groupBy(KVT_PARTITION).agg(F.max("version").alias("top"))
        keep = (entries.join(newest, columns, "left_semi").join(top, KVT_PARTITION)
                .where(~F.col("removed") | (F.col("version") == F.col("top"))).select(*columns))
        dropped = entries.select(*columns).join(keep, columns, "left_anti")
        deleted = _delta.retrying(lambda: self.backend.delete_matching(self.path, dropped, columns),
                                  f"compact {self.scope}/{self.name}")
        log.info("compact %s/%s: %d entries deleted", self.scope, self.name, deleted)
        return deleted

