"""The store: where each table lives, and the reads and guarded commits on them.

This is Pravega's controller metadata store, as Delta tables, over the segment store's events
tables (``segment_store``; see docs/ARCHITECTURE.md for the fencing rules). Every method here is one Delta read or one Delta
commit; workflows made of several commits live in ``StreamManager``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .. import _delta
from ..errors import ScopeNotFoundError, StoreFormatError
from ..stream.record import ACTIVE, StreamRecord
from ..stream.segments import SegmentRecord
from .clock import from_spark_time, utc_now
from .read_cache import StreamReadCache
from .schema import (
    DEFAULT_SHARDS,
    EVENTS_PARTITIONS,
    EVENTS_PROPERTIES,
    EVENTS_SCHEMA,
    KVT_PREFIX,
    MEMBER_KEY,
    READER_GROUP_KEY,
    READER_GROUP_MEMBERS_SCHEMA,
    READER_GROUP_MEMBERS_TABLE,
    READER_GROUPS_SCHEMA,
    READER_GROUPS_TABLE,
    REMOVED_TABLES,
    REMOVED_TABLES_SCHEMA,
    SCOPE_DELETED,
    SCOPE_MARK,
    SCOPES_SCHEMA,
    SCOPES_TABLE,
    SHARD_KINDS,
    SHARDS_PROPERTY,
    SMALL_TABLE_PROPERTIES,
    STORE_FORMAT,
    STORE_FORMAT_PROPERTY,
    STREAM_KEY,
    STREAMS_SCHEMA,
    STREAMS_TABLE,
    SYSTEM_DIR,
    TRANSIENT_PARTITIONS,
    TRANSIENT_PROPERTIES,
    TRANSIENT_TABLE,
    TRANSIENT_TABLE_SCHEMA,
    UPGRADE_PROPERTY,
)
from .shard_store import ShardStore, as_aware, stream_key


def group_key(scope: str, group: str) -> str:
    """The reader groups table's partition value of a group (the same hash of its scoped name)."""
    return stream_key(scope, group)


def member_key(scope: str, group: str, reader: str) -> str:
    """The members table's partition value of a group's reader (a hash of the three names)."""
    return stream_key(scope, f"{group}/{reader}")


# the catalogue shards' name: ``root/_pravega/s<k>/streams``
CATALOG = STREAMS_TABLE


class Store(ShardStore):
    """Tables of one store root, read and committed through one SparkSession: the metadata store
    (scopes, streams, key-value tables, reader groups, segments' records), over the shard tables
    (``ShardStore``: retention sets, subscribers, marks) and the events tables (``SegmentStore``)."""

    def __init__(self, spark: SparkSession, root: str, shards: int = DEFAULT_SHARDS) -> None:
        super().__init__(spark, root, shards)
        self.read_cache = StreamReadCache()  # the rows Connect reads start from (``read_cache``)

    # ---- paths -------------------------------------------------------------------------------
    @property
    def scopes_path(self) -> str:
        return f"{self.root}/{SYSTEM_DIR}/{SCOPES_TABLE}"

    def transient_path(self, scope: str, stream: str) -> str:
        """The transient shard table holding the stream's large events being written."""
        return self.shard_path(TRANSIENT_TABLE, stream_key(scope, stream))

    def ensure_transient_table(self, scope: str, stream: str) -> str:
        """The stream's transient shard table, created on first use."""
        path = self.transient_path(scope, stream)
        self.create_shard(path, TRANSIENT_TABLE_SCHEMA, TRANSIENT_PARTITIONS, TRANSIENT_PROPERTIES)
        return path

    def ensure_system_tables(self) -> None:
        """Create the store's fixed tables (streams, scopes, reader groups) unless they exist: each
        a log look when it does. Every manager opening the store calls this, so the other methods
        may take them for granted; per-stream tables are created when their stream is, shard
        tables on their first write (``_table``). Safe to race (``DeltaBackend.create_table``).
        The streams table comes first: a store of another format is refused before anything
        else is written.

        Raises:
            StoreFormatError: the store has another format than this library's (``check_format``).
        """
        formatted = {**SMALL_TABLE_PROPERTIES, STORE_FORMAT_PROPERTY: str(STORE_FORMAT),
                     SHARDS_PROPERTY: str(self._new_shards)}
        if not self.backend.create_table(self.streams_path, STREAMS_SCHEMA, (STREAM_KEY,), formatted):
            self.check_format()
        self.backend.create_table(self.scopes_path, SCOPES_SCHEMA, (), SMALL_TABLE_PROPERTIES)

    def check_format(self) -> int:
        """The store's format (``STORE_FORMAT_PROPERTY`` of its streams table; 1 without one).

        Raises:
            StoreFormatError: another format than this library's: a newer one (upgrade the
                library), or an older one (upgrade the store in place).
        """
        if self.backend.table_property(self.streams_path, UPGRADE_PROPERTY):
            raise StoreFormatError(f"the store at {self.root} is being upgraded to format {STORE_FORMAT}: run "
                                   f"`pravega-spark --root {self.root} upgrade-store` to finish")
        found = self.backend.table_property(self.streams_path, STORE_FORMAT_PROPERTY)
        number = int(found) if found and found.isdigit() else 1
        if number > STORE_FORMAT:
            raise StoreFormatError(f"the store at {self.root} has format {number}, and this pravega_spark reads "
                                   f"formats up to {STORE_FORMAT}: upgrade pravega_spark to use it")
        if number < STORE_FORMAT:
            raise StoreFormatError(f"the store at {self.root} has format {number}, and this pravega_spark reads "
                                   f"format {STORE_FORMAT}: upgrade the store in place with "
                                   f"`pravega-spark --root {self.root} upgrade-store`")
        return number

    # ---- scopes ------------------------------------------------------------------------------
    def scopes(self) -> DataFrame:
        return self.backend.read(self.scopes_path)

    def scope_exists(self, scope: str) -> bool:
        return self.scope_creation_time(scope) is not None

    def scope_creation_time(self, scope: str) -> datetime | None:
        """When the scope was created (its identity: a scope deleted and created again is a new
        one), or None if it does not exist."""
        return next((as_aware(r["creation_time"]) for r in self.table_rows(self.scopes_path) if r["scope"] == scope), None)

    def insert_scope(self, scope: str) -> bool:
        def attempt() -> bool:
            txn = self.backend.transaction(self.scopes_path)
            files = txn.read_whole_table()
            if any(r["scope"] == scope for r in txn.rows(files)):
                return False
            txn.commit(txn.write_rows([(scope, utc_now())], SCOPES_SCHEMA))
            return True

        return _delta.retrying(attempt, f"create scope {scope}")

    def delete_scope_row(self, scope: str) -> None:
        def attempt() -> None:
            txn = self.backend.transaction(self.scopes_path)
            files = txn.read_whole_table()
            rows = txn.rows(files)
            keep = [(r["scope"], r["creation_time"]) for r in rows if r["scope"] != scope]
            if len(keep) == len(rows):
                return
            _delta.replace(txn, files, keep, SCOPES_SCHEMA)

        _delta.retrying(attempt, f"delete scope {scope}")

    # ---- streams: the catalogue, sharded -------------------------------------------------------
    def catalog_path(self, key: str) -> str:
        """The catalogue shard holding the rows of ``key`` (a ``stream_key``)."""
        return self.shard_path(CATALOG, key)

    def _union(self, kind: str, schema: StructType) -> DataFrame:
        """Every row of the shard tables of ``kind`` (all shards), as one DataFrame."""
        frames = [self.backend.read(p) for p in self.existing_shards(kind)]
        if not frames:
            return self.spark.createDataFrame([], schema)
        return functools.reduce(DataFrame.unionByName, frames)

    def _catalog_frame(self) -> DataFrame:
        """Every catalogue row of the store (all shards), as one DataFrame."""
        return self._union(CATALOG, STREAMS_SCHEMA)

    def streams(self) -> DataFrame:
        """The stream rows of every catalogue shard (not the KVTs', nor the scopes' deletion marks)."""
        return (self._catalog_frame()
                .where((F.col("stream") != SCOPE_MARK) & ~F.col("stream").startswith(KVT_PREFIX)))

    def stream_rows(self, scope: str, stream: str) -> DataFrame:
        """The stream's row, as a DataFrame (none once deleted): its partition of its shard."""
        key = stream_key(scope, stream)
        return self.backend.read(self.catalog_path(key)).where(
            (F.col(STREAM_KEY) == key) & (F.col("scope") == scope) & (F.col("stream") == stream))

    def _catalog_rows(self, scope: str, name: str) -> list[dict]:
        """The catalogue rows of ``name`` (a stream, or a KVT's internal name): its partition of
        its shard, read without a Spark job while the shard is small; [] before the shard exists."""
        key = stream_key(scope, name)
        path = self.catalog_path(key)
        if not self.shard_exists(path):
            return []
        return [r for r in self.table_rows(path, STREAM_KEY, key) if r["scope"] == scope and r["stream"] == name]

    def stream_record(self, scope: str, stream: str) -> StreamRecord | None:
        rows = self._catalog_rows(scope, stream)
        return StreamRecord.from_row(rows[0]) if rows else None

    def stream_record_and_segments(self, scope: str, stream: str) -> tuple[StreamRecord | None, list[SegmentRecord]]:
        """The stream's row and its segment records, from one read of the row."""
        rows = self._catalog_rows(scope, stream)
        if not rows:
            return None, []
        return StreamRecord.from_row(rows[0]), segment_records_of(rows[0]["segments"] or [])

    def _stream_row(self, record: StreamRecord, segments: list[dict]) -> tuple:
        return (stream_key(record.scope, record.stream), *record.to_row(), segments)

    def _catalog_partition(self, scope: str, name: str) -> tuple[_delta.TableTransaction, list, list[dict]]:
        """A transaction on the catalogue shard of ``name`` (a stream or a KVT's internal name)
        fenced on its partition, the partition's files and the rows of ``name`` in them."""
        self.read_cache.forget(scope, name)  # this process changes the row: its reads fetch it again
        key = stream_key(scope, name)
        txn = self.backend.transaction(self.catalog_path(key))
        files = txn.read_partition({STREAM_KEY: key})
        return txn, files, [r for r in txn.rows(files) if r["scope"] == scope and r["stream"] == name]

    def insert_stream(self, record: StreamRecord, scope_created: datetime, segments: Sequence[SegmentRecord]) -> bool:
        """Insert the stream row (with its first ``segments``) unless one exists: True if this
        call inserted it.

        One commit fenced on the stream's partition (of two concurrent inserts one conflicts, and
        its retry finds the row) and on its scope's deletion mark in the same shard
        (``mark_scope_deleted``): a concurrent deletion of the scope makes it conflict, and its
        retry finds the mark.

        Raises:
            ScopeNotFoundError: the scope created at ``scope_created`` was deleted.
        """
        row = self._stream_row(record, segment_entries(segments))
        return self._insert_catalog_row(record.scope, record.stream, row, scope_created)

    def _insert_catalog_row(self, scope: str, name: str, row: tuple, scope_created: datetime) -> bool:
        """Insert a row of the scope's catalogue (a stream's, or a key-value table's under its
        internal name) unless its partition holds one: fenced on that partition and on the
        scope's deletion mark in the same shard (see ``insert_stream``)."""
        self.create_shard(self.catalog_path(stream_key(scope, name)), STREAMS_SCHEMA, (STREAM_KEY,))
        txn, files, found = self._catalog_partition(scope, name)
        marks = txn.rows(txn.read_partition({STREAM_KEY: stream_key(scope, SCOPE_MARK)}))
        if any(r["stream"] == SCOPE_MARK and r["scope"] == scope
               and as_aware(r["creation_time"]) == scope_created for r in marks):
            raise ScopeNotFoundError(f"scope {scope} does not exist (deleted)")
        if found:
            return False
        _delta.replace(txn, files, [row], STREAMS_SCHEMA, (STREAM_KEY,))
        return True

    def mark_scope_deleted(self, scope: str, scope_created: datetime) -> bool:
        """Mark in every catalogue shard that the scope created at ``scope_created`` is being
        deleted, unless it has a stream or KVT: True if marked (or already marked).

        Shard by shard, one commit that reads the whole shard, so it conflicts with any
        concurrent insert there (whose retry then sees the mark, see ``insert_stream``); a row
        inserted before it is seen. A shard that holds a row of the scope makes this remove the
        marks placed so far and return False. A shard not created yet is created holding the
        mark. Killed midway, marked shards refuse new rows of the scope; the next call finishes
        (or undoes) the marking. A scope seen to hold a row before any mark is placed is left
        untouched."""
        if any(r["scope"] == scope and r["stream"] != SCOPE_MARK
               for p in self.existing_shards(CATALOG) for r in self.table_rows(p)):
            return False  # seen before anything is written
        marked = []
        for path in self.shard_paths(CATALOG):
            if not _delta.retrying(lambda p=path: self._mark_shard(p, scope, scope_created), f"delete scope {scope}"):
                for done in marked:
                    self._unmark_shard(done, scope, scope_created)
                return False
            marked.append(path)
        return True

    def _mark_shard(self, path: str, scope: str, scope_created: datetime) -> bool:
        key = stream_key(scope, SCOPE_MARK)
        mark = (key, scope, SCOPE_MARK, SCOPE_DELETED, "{}", [], 0, None, None, scope_created, utc_now(), 0, None, [])
        if self.create_shard(path, STREAMS_SCHEMA, (STREAM_KEY,), rows=[mark]):
            return True
        txn = self.backend.transaction(path)
        files = txn.read_whole_table()
        rows = txn.rows(files)
        if any(r["scope"] == scope and r["stream"] != SCOPE_MARK for r in rows):
            return False
        if any(r[STREAM_KEY] == key and as_aware(r["creation_time"]) == scope_created for r in rows):
            return True
        _delta.replace(txn, [f for f in files if f.partition(STREAM_KEY) == key], [mark], STREAMS_SCHEMA,
                       (STREAM_KEY,))
        return True

    def _unmark_shard(self, path: str, scope: str, scope_created: datetime) -> None:
        def change(rows: list[dict]):
            keep = [r for r in rows if as_aware(r["creation_time"]) != scope_created or r["scope"] != scope]
            return None if len(keep) == len(rows) else self.as_tuples(keep, STREAMS_SCHEMA)

        self.backend.replace_rows(path, STREAMS_SCHEMA, change, f"undo the deletion mark of scope {scope}",
                                  {STREAM_KEY: stream_key(scope, SCOPE_MARK)}, (STREAM_KEY,))

    def compare_and_set_stream(self, expected: StreamRecord, new: StreamRecord,
                               segments: Iterable[SegmentRecord] = ()) -> bool:
        """Replace the stream row with ``new`` iff it still has ``expected.row_version``; its
        segments take ``segments`` (new ones are added, known ones take the given sealed epoch
        and size: the same records give the same row).

        One commit that reads the row's partition (so a concurrent change of the row makes it
        fail with a conflict) and replaces its file with one holding ``new``."""
        txn, files, rows = self._catalog_partition(expected.scope, expected.stream)
        if not rows or rows[0]["row_version"] != expected.row_version:
            return False
        merged = merge_segment_entries(rows[0]["segments"] or [], segments)
        _delta.replace(txn, files, [self._stream_row(new, merged)], STREAMS_SCHEMA, (STREAM_KEY,))
        return True

    def delete_stream_row(self, scope: str, stream: str) -> None:
        txn, files, rows = self._catalog_partition(scope, stream)
        if rows:
            _delta.replace(txn, files, [], STREAMS_SCHEMA, (STREAM_KEY,))

    # ---- key-value tables ----------------------------------------------------------------------
    def key_value_table_path(self, scope: str, kvt: str, table_id: str) -> str:
        """Where one incarnation of a KVT keeps its entries (a KVT created again gets a new id)."""
        return f"{self.root}/{scope}/{KVT_PREFIX}{kvt}/{table_id}"

    def key_value_tables(self) -> DataFrame:
        """The catalogue rows of every KVT: ``scope, kvt, configuration, creation_time``."""
        return (self._catalog_frame().where(F.col("stream").startswith(KVT_PREFIX))
                .select("scope", F.expr(f"substring(stream, {len(KVT_PREFIX) + 1})").alias("kvt"),
                        "configuration", "creation_time"))

    def key_value_table_row(self, scope: str, kvt: str) -> dict | None:
        """The KVT's catalogue row (``configuration`` is JSON with its ``table_id``), or None."""
        rows = self._catalog_rows(scope, KVT_PREFIX + kvt)
        return rows[0] if rows else None

    def insert_key_value_table(self, scope: str, kvt: str, configuration: str, scope_created: datetime) -> bool:
        """Register the KVT unless it exists (one commit, fenced as ``insert_stream``'s)."""
        name, now = KVT_PREFIX + kvt, utc_now()
        row = (stream_key(scope, name), scope, name, ACTIVE, configuration, [], 0, None, None, now, now, 0, None, [])
        return _delta.retrying(lambda: self._insert_catalog_row(scope, name, row, scope_created),
                               f"create key-value table {scope}/{kvt}")

    def remove_key_value_table_data(self, scope: str, kvt: str, table_id: str) -> bool:
        """Delete one incarnation's entries table (its folder; over Spark Connect, its rows)."""
        path = self.key_value_table_path(scope, kvt, table_id)
        return self._remove_tables([path])

    def delete_key_value_table_row(self, scope: str, kvt: str) -> dict | None:
        """Remove the KVT's catalogue row (one commit); the row removed, or None if absent."""
        def attempt() -> dict | None:
            if not self._catalog_rows(scope, KVT_PREFIX + kvt):
                return None
            txn, files, rows = self._catalog_partition(scope, KVT_PREFIX + kvt)
            if rows:
                _delta.replace(txn, files, [], STREAMS_SCHEMA, (STREAM_KEY,))
            return rows[0] if rows else None

        return _delta.retrying(attempt, f"delete key-value table {scope}/{kvt}")

    # ---- reader groups: sharded by group key ------------------------------------------------------
    def reader_groups(self) -> DataFrame:
        """Every reader group's row (all shards)."""
        return self._union(READER_GROUPS_TABLE, READER_GROUPS_SCHEMA)

    def _group_rows(self, kind: str, scope: str, group: str) -> list[dict]:
        """The rows of ``kind`` (groups or members) of the group: its partition of its shard (no
        Spark job while the shard is small); [] before the shard exists."""
        key = group_key(scope, group)
        path = self.shard_path(kind, key)
        if not self.shard_exists(path):
            return []
        return [r for r in self.table_rows(path, READER_GROUP_KEY, key)
                if r["scope"] == scope and r["reader_group"] == group]

    def reader_group_row(self, scope: str, group: str) -> dict | None:
        """The group's row (no Spark job while its shard is small), or None."""
        rows = self._group_rows(READER_GROUPS_TABLE, scope, group)
        return rows[0] if rows else None

    def update_reader_group(self, scope: str, group: str, change, what: str) -> bool:
        """One commit replacing the group's row with ``change(row or None)`` (a row dict; None:
        no change; ``{}``: delete the row). The commit reads the group's partition, so a
        concurrent update of the group makes it conflict and run ``change`` again on the new row
        (Pravega's state synchronizer's conditional update). Returns whether it changed."""
        key = group_key(scope, group)

        def change_rows(rows: list[dict]):
            mine = [r for r in rows if r["scope"] == scope and r["reader_group"] == group]
            others = [r for r in rows if r not in mine]
            new = change(mine[0] if mine else None)
            if new is None:
                return None
            kept = [*others, *([{**new, READER_GROUP_KEY: key}] if new else [])]
            return self.as_tuples(kept, READER_GROUPS_SCHEMA)

        return self.rewrite_rows(self.shard_path(READER_GROUPS_TABLE, key), READER_GROUPS_SCHEMA, change_rows, what,
                                 partition={READER_GROUP_KEY: key})

    def member_rows(self, scope: str, group: str) -> list[dict]:
        """The group's member rows (``READER_GROUP_MEMBERS_SCHEMA`` as dicts: its partition of
        its shard, no Spark job while the shard is small); [] before any reader refreshed."""
        return self._group_rows(READER_GROUP_MEMBERS_TABLE, scope, group)

    def update_member(self, scope: str, group: str, reader: str, change, what: str) -> bool:
        """One commit replacing the reader's member row with ``change(row or None)`` (a row dict,
        or None: no change). The commit reads only the reader's own partition, so it never
        conflicts with another reader's refresh or with the group's row."""
        key, mine_key = group_key(scope, group), member_key(scope, group, reader)

        def change_rows(rows: list[dict]):
            mine = [r for r in rows if r["scope"] == scope and r["reader_group"] == group and r["reader"] == reader]
            others = [r for r in rows if r not in mine]
            new = change(mine[0] if mine else None)
            if new is None:
                return None
            return self.as_tuples([*others, {**new, READER_GROUP_KEY: key, MEMBER_KEY: mine_key}],
                                  READER_GROUP_MEMBERS_SCHEMA)

        return self.rewrite_rows(self.shard_path(READER_GROUP_MEMBERS_TABLE, key), READER_GROUP_MEMBERS_SCHEMA,
                                 change_rows, what, partition={READER_GROUP_KEY: key, MEMBER_KEY: mine_key})

    # ---- per-stream tables -------------------------------------------------------------------
    def create_stream_tables(self, scope: str, stream: str) -> None:
        """Create the stream's empty events table (idempotent); its other rows live in the
        shard tables, created on first write (``_table``)."""
        self.backend.create_table(self.events_path(scope, stream), EVENTS_SCHEMA, EVENTS_PARTITIONS, EVENTS_PROPERTIES)

    def remove_stream_tables(self, scope: str, stream: str) -> bool:
        """Delete the stream's table, its folder (over Spark Connect, with no file system, empty
        it instead: VACUUM removes the bytes later, and a stream created again refills it)."""
        folder = self.stream_dir(scope, stream)
        return self._remove_tables([folder], folder=folder)

    def own_tables(self) -> list[str]:
        """The store's own tables that exist: ``_pravega``'s fixed tables and every shard table
        of every kind (the catalogue, the per-stream kinds, reader groups and their members)."""
        fixed = [self.streams_path, self.scopes_path, self.removed_tables_path]
        kinds = (CATALOG, *SHARD_KINDS, READER_GROUPS_TABLE, READER_GROUP_MEMBERS_TABLE)
        return ([p for p in fixed if self.backend.is_table(p)]
                + [p for kind in kinds for p in self.existing_shards(kind)])

    # ---- removed tables ------------------------------------------------------------------------
    @property
    def removed_tables_path(self) -> str:
        return f"{self.root}/{SYSTEM_DIR}/{REMOVED_TABLES}"

    def _remove_tables(self, paths: list[str], folder: str | None = None) -> bool:
        """Remove these tables; where the backend can only empty them, first record them, so the
        next VACUUM reaches their bytes though their stream has left the catalogue (a crash in
        between leaves a record of tables not emptied yet: harmless)."""
        if not self.backend.removes_folders:
            txn = self.backend.transaction(self.removed_tables_path)
            now = utc_now()
            if txn.read_version < 0:
                self.backend.create_table(self.removed_tables_path, REMOVED_TABLES_SCHEMA,
                                          properties=SMALL_TABLE_PROPERTIES)
                txn = self.backend.transaction(self.removed_tables_path)
            txn.commit(txn.write_rows([(p, now) for p in paths], REMOVED_TABLES_SCHEMA))
        return self.backend.remove_tables(paths, folder=folder)

    def removed_tables(self) -> list[dict]:
        """The recorded emptied tables: ``path``, ``removal_time`` (none on a backend that
        removes folders)."""
        if self.backend.removes_folders or not self.backend.is_table(self.removed_tables_path):
            return []
        return self.table_rows(self.removed_tables_path)

    def forget_removed_tables(self, paths: Iterable[str]) -> None:
        """Drop these paths from the record (their bytes have left storage)."""
        gone = set(paths)
        if gone:
            self.backend.replace_rows(self.removed_tables_path, REMOVED_TABLES_SCHEMA,
                                      lambda rows: [tuple(r[c] for c in REMOVED_TABLES_SCHEMA.fieldNames())
                                                    for r in rows if r["path"] not in gone],
                                      "forget removed tables")

    # ---- segments: part of the stream's row ------------------------------------------------------
    def segments(self, scope: str, stream: str) -> DataFrame:
        """The stream's segments (``SEGMENTS_SCHEMA``'s columns), from its row."""
        return (self.stream_rows(scope, stream).select(F.explode("segments").alias("s")).select("s.*")
                .orderBy("segment_id"))

    def segment_records(self, scope: str, stream: str) -> list[SegmentRecord]:
        """The stream's segment records ([] if it does not exist)."""
        return self.stream_record_and_segments(scope, stream)[1]

    def segment_rows(self, scope: str, stream: str) -> list[dict]:
        """The stream's segments as stored (``SEGMENTS_SCHEMA`` dicts by segment id)."""
        rows = self._catalog_rows(scope, stream)
        return [entry_dict(e) for e in rows[0]["segments"] or []] if rows else []


def entry_dict(entry) -> dict:
    """A stored segment (a dict, or a collected Row) as a dict, its time aware UTC."""
    found = dict(entry.asDict() if hasattr(entry, "asDict") else entry)
    return {**found, "creation_time": from_spark_time(found["creation_time"])}


def segment_records_of(entries: Iterable) -> list[SegmentRecord]:
    """A stream row's stored segments as records, by segment id."""
    return sorted((SegmentRecord(e["segment_id"], e["key_start"], e["key_end"], e["creation_time"], e["sealed_epoch"],
                                 e["sealed_size"]) for e in map(entry_dict, entries)), key=lambda r: r.segment_id)


def segment_entries(records: Iterable[SegmentRecord]) -> list[dict]:
    """Segment records as a stream row's stored segments (``SEGMENT_ENTRY`` dicts)."""
    return [{"segment_id": r.segment_id, "segment_number": r.segment_number, "creation_epoch": r.creation_epoch,
             "key_start": float(r.key_start), "key_end": float(r.key_end), "creation_time": r.creation_time or utc_now(),
             "sealed_epoch": r.sealed_epoch, "sealed_size": r.sealed_size} for r in records]


def merge_segment_entries(stored: Iterable, records: Iterable[SegmentRecord]) -> list[dict]:
    """``stored`` segments with ``records`` merged in: a new segment is added, a known one takes
    the record's ``sealed_epoch`` and ``sealed_size`` (the same records give the same list)."""
    merged = {e["segment_id"]: e for e in map(entry_dict, stored)}
    for new in segment_entries(records):
        old = merged.get(new["segment_id"])
        merged[new["segment_id"]] = new if old is None else {**old, "sealed_epoch": new["sealed_epoch"],
                                                             "sealed_size": new["sealed_size"]}
    return [merged[sid] for sid in sorted(merged)]
