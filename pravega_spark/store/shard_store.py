"""Shard tables: the per-stream metadata every stream keeps in store-level tables.

A stream's retention set, subscribers and auto-scaling marks (and its writer marks and watermarks,
``controller.watermarks``) are rows of tables shared by the store's streams, one per kind and
shard: ``root/_pravega/s<k>/<kind>``, partitioned by ``stream_key``, with ``k = shard_of(key)``
(``schema``). Every commit here names the stream's partition literally, so the streams of one
shard never conflict, and streams of different shards never share a log (issue #68). Each method
is one read or one commit; ``store.Store`` builds the catalogue on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..errors import InvalidConfigError, StoreFormatError
from ..stream.retention import RetentionRecord
from ..stream.stream_cut import StreamCut
from .clock import from_spark_time, utc_now
from .schema import (
    AUTOSCALE_SCHEMA,
    AUTOSCALE_TABLE,
    DEFAULT_SHARDS,
    MAX_SHARDS,
    RETENTION_SET_SCHEMA,
    RETENTION_SET_TABLE,
    SHARD_KINDS,
    SHARD_SCHEMAS,
    SHARDS_PROPERTY,
    SMALL_TABLE_PROPERTIES,
    STREAM_KEY,
    STREAMS_TABLE,
    SUBSCRIBERS_SCHEMA,
    SUBSCRIBERS_TABLE,
    SYSTEM_DIR,
    shard_dir,
    shard_of,
    shard_partitions,
    shard_schema,
    valid_shard_count,
)
from .segment_store import SegmentStore


def as_aware(value):
    """A collected row's values with every timestamp aware UTC, as ``_delta.read_rows`` gives
    them (the two ways ``Store.table_rows`` reads a table give the same values)."""
    if isinstance(value, datetime):
        return from_spark_time(value)
    if isinstance(value, dict):
        return {k: as_aware(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_aware(v) for v in value]
    return value


def stream_key(scope: str, stream: str) -> str:
    """The streams table's partition value of a stream: 16 hex digits of SHA-1 of its scoped name."""
    return hashlib.sha1(f"{scope}/{stream}".encode()).hexdigest()[:16]


class ShardStore(SegmentStore):
    """The shard tables of one store root (see the module docstring), over its events tables."""

    def __init__(self, spark: SparkSession, root: str, shards: int = DEFAULT_SHARDS) -> None:
        if not valid_shard_count(shards):
            raise InvalidConfigError(f"shards must be a power of two from 1 to {MAX_SHARDS}, got {shards!r}")
        super().__init__(spark, root)
        self._new_shards = shards  # the shard count of a store this creates
        self._shards: int | None = None  # the store's, once read
        # metadata read from a table, keyed by what was read; valid while the table's (version,
        # id) is unchanged, which costs a look at its log rather than a Spark job to check
        self._cache: dict[tuple, tuple[tuple[int, str], object]] = {}
        self._known_shards: set[str] = set()  # shard tables known to exist

    def _cached(self, path: str, key: tuple, load):
        """``load(version)`` for the table's latest version, reusing the last result if the table
        has not changed since."""
        state = self.backend.latest(path)
        hit = self._cache.get((path, key))
        if hit is not None and hit[0] == state:
            return hit[1]
        value = load(state[0])
        self._cache[(path, key)] = (state, value)
        return value

    def table_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict]:
        """The rows of a small table (or of one of its string partitions) at its latest version:
        from the files its checksum lists, read once per file, else one Spark query per version."""
        rows = self.backend.read_rows(path, column, value)
        if rows is not None:
            return rows

        def load(version: int) -> tuple:
            df = self.backend.read(path, version)
            if column is not None:
                df = df.where(F.col(column) == value)
            return tuple(as_aware(r.asDict(recursive=True)) for r in df.collect())

        return list(self._cached(path, ("rows", column, value), load))

    @property
    def streams_path(self) -> str:
        """The store table: the stream catalogue, and the store's format and shard count."""
        return f"{self.root}/{SYSTEM_DIR}/{STREAMS_TABLE}"

    @property
    def shards(self) -> int:
        """The store's shard count (``SHARDS_PROPERTY``), read once."""
        if self._shards is None:
            found = self.backend.table_property(self.streams_path, SHARDS_PROPERTY)
            if found is None or not found.isdigit() or not valid_shard_count(int(found)):
                raise StoreFormatError(f"the store at {self.root} has no valid {SHARDS_PROPERTY} ({found!r})")
            self._shards = int(found)
        return self._shards

    # ---- shard tables: per-stream rows of every stream, by kind ---------------------------------
    def shard_exists(self, path: str) -> bool:
        """Whether a shard table exists (one seen once always does: it is not looked up again)."""
        if path not in self._known_shards and self.backend.exists(path):
            self._known_shards.add(path)
        return path in self._known_shards

    def create_shard(self, path: str, schema: StructType, partition_by: tuple[str, ...],
                     properties: Mapping[str, str] = SMALL_TABLE_PROPERTIES, rows: list[tuple] | None = None) -> bool:
        """Create a shard table (holding ``rows``) unless it exists, safe to race: True if this
        call created it."""
        if self.shard_exists(path):
            return False
        created = self.backend.create_table(path, schema, partition_by, dict(properties), rows=rows)
        self._known_shards.add(path)
        return created

    def existing_shards(self, kind: str) -> list[str]:
        """The shard tables of ``kind`` that exist."""
        return [p for p in self.shard_paths(kind) if self.shard_exists(p)]

    def shard_path(self, kind: str, key: str) -> str:
        """The table of ``kind`` (one of ``SHARD_KINDS``, or the catalogue's ``streams``) holding
        the rows of ``key`` (a ``stream_key``)."""
        return f"{self.root}/{SYSTEM_DIR}/{shard_dir(shard_of(key, self.shards))}/{kind}"

    def shard_paths(self, kind: str) -> list[str]:
        """Every shard table of ``kind`` (created or not)."""
        return [f"{self.root}/{SYSTEM_DIR}/{shard_dir(k)}/{kind}" for k in range(self.shards)]

    def shard_rows(self, kind: str, scope: str, stream: str) -> list[dict]:
        """The stream's rows of ``kind`` (the kind's columns, without ``stream_key``; no Spark
        job while the shard table is small); [] before the first."""
        key = stream_key(scope, stream)
        path = self.shard_path(kind, key)
        if not self.shard_exists(path):
            return []
        return [{c: v for c, v in r.items() if c != STREAM_KEY} for r in self.table_rows(path, STREAM_KEY, key)]

    def shard_frame(self, kind: str, scope: str, stream: str) -> DataFrame:
        """The stream's rows of ``kind`` as a DataFrame (the kind's columns)."""
        key = stream_key(scope, stream)
        path = self.shard_path(kind, key)
        if not self.shard_exists(path):
            return self.spark.createDataFrame([], SHARD_SCHEMAS[kind])
        return self.backend.read(path).where(F.col(STREAM_KEY) == key).drop(STREAM_KEY)

    def rewrite_shard_rows(self, kind: str, scope: str, stream: str, change, what: str,
                           partition: Mapping[str, str] | None = None) -> bool:
        """One commit replacing the stream's rows of ``kind`` (or of one of its partitions, e.g. a
        writer's: ``partition``) with ``change(rows)`` (dicts of the kind's columns in, tuples in
        the kind's schema order out; None: no change). Fenced on the stream's partition only, so
        the other streams of the shard never conflict with it. Returns whether it changed."""
        key = stream_key(scope, stream)

        def keyed(rows: list[dict]):
            new = change([{c: v for c, v in r.items() if c != STREAM_KEY} for r in rows])
            return None if new is None else [(key, *row) for row in new]

        path = self.shard_path(kind, key)
        self.create_shard(path, shard_schema(kind), shard_partitions(kind))
        return self.backend.replace_rows(path, shard_schema(kind), keyed, what, {STREAM_KEY: key, **(partition or {})},
                                         shard_partitions(kind))

    def delete_shard_rows(self, scope: str, stream: str) -> None:
        """Delete the stream's rows of every kind: one commit per shard table that holds some."""
        key = stream_key(scope, stream)
        for kind in SHARD_KINDS:
            path = self.shard_path(kind, key)
            if self.shard_exists(path) and self.backend.read_rows(path, STREAM_KEY, key) != []:
                self.backend.delete_partitions(path, STREAM_KEY, [key])

    # ---- tables created on first write -------------------------------------------------------
    def _table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = ()) -> str:
        """``path``, after creating its (empty) table if it does not exist yet (safe to race)."""
        self.backend.create_table(path, schema, partition_by, SMALL_TABLE_PROPERTIES)
        return path

    # ---- small tables rewritten whole --------------------------------------------------------
    def rewrite_rows(self, path: str, schema: StructType, change, what: str,
                     partition: Mapping[str, str] | None = None, partition_by: tuple[str, ...] = ()) -> bool:
        """One commit replacing a small table's rows (or one partition's: its columns' string
        values) with ``change(rows)`` (dicts in, tuples in ``schema``'s order out; None: leave
        them as they are). The commit reads what it replaces, so a concurrent change there makes
        the attempt conflict and run again. ``partition_by`` names a partitioned table's
        partition columns (``partition``'s by default). Returns whether anything changed."""
        partition_by = partition_by or tuple(partition or ())
        self._table(path, schema, partition_by)
        return self.backend.replace_rows(path, schema, change, what, partition, partition_by)

    @staticmethod
    def as_tuples(rows: Iterable[Mapping], schema: StructType) -> list[tuple]:
        """Row dicts as tuples in ``schema``'s column order."""
        return [tuple(r[c] for c in schema.fieldNames()) for r in rows]

    # ---- auto-scaling marks -------------------------------------------------------------------
    def autoscale_marks(self, scope: str, stream: str) -> list[dict]:
        """The auto-scaler's rows for the stream (``AUTOSCALE_SCHEMA`` as dicts); none yet: []."""
        return self.shard_rows(AUTOSCALE_TABLE, scope, stream)

    def merge_autoscale_marks(self, scope: str, stream: str, rows: list[dict], keep: set[int]) -> None:
        """One commit: the rows of ``keep``'s segments, each field the later of the stored one and
        ``rows``' (two runs at once both keep their requests' mutes and marks)."""
        def change(stored: list[dict]):
            merged = {int(r["segment_id"]): dict(r) for r in stored if int(r["segment_id"]) in keep}
            for r in rows:
                old = merged.setdefault(int(r["segment_id"]), {"segment_id": int(r["segment_id"]), "last_up": None,
                                                               "last_down": None, "cold_until": None})
                for f in ("last_up", "last_down", "cold_until"):
                    if r[f] is not None and (old[f] is None or r[f] > old[f]):
                        old[f] = r[f]
            new = sorted(merged.values(), key=lambda r: r["segment_id"])
            if new == sorted(stored, key=lambda r: r["segment_id"]):
                return None
            return self.as_tuples(new, AUTOSCALE_SCHEMA)

        self.rewrite_shard_rows(AUTOSCALE_TABLE, scope, stream, change, f"auto-scaling marks of {scope}/{stream}")

    # ---- retention set -----------------------------------------------------------------------
    def retention_set(self, scope: str, stream: str) -> DataFrame:
        return self.shard_frame(RETENTION_SET_TABLE, scope, stream)

    def retention_records(self, scope: str, stream: str) -> list[RetentionRecord]:
        """The stream's retention set, oldest first."""
        rows = sorted(self.shard_rows(RETENTION_SET_TABLE, scope, stream), key=lambda r: r["recording_time"])
        return [RetentionRecord(from_spark_time(r["recording_time"]), int(r["recording_size"]),
                                StreamCut.from_text(r["stream_cut"])) for r in rows]

    def add_retention_record(self, scope: str, stream: str, record: RetentionRecord) -> bool:
        """Append ``record`` unless the set already has one at least as new (Pravega's
        ``addReferenceToStreamCutIfLatest``); True if this call added it."""
        new = {"recording_time": record.recording_time, "recording_size": int(record.recording_size),
               "stream_cut": record.stream_cut.as_text()}

        def change(rows: list[dict]):
            if any(r["recording_time"] >= record.recording_time for r in rows):
                return None
            return self.as_tuples(sorted([*rows, new], key=lambda r: r["recording_time"]), RETENTION_SET_SCHEMA)

        return self.rewrite_shard_rows(RETENTION_SET_TABLE, scope, stream, change,
                                       f"add retention record of {scope}/{stream}")

    def drop_retention_records(self, scope: str, stream: str, up_to: datetime) -> None:
        """Drop every record recorded at or before ``up_to``."""
        def change(rows: list[dict]):
            keep = [r for r in rows if r["recording_time"] > up_to]
            return None if len(keep) == len(rows) else self.as_tuples(keep, RETENTION_SET_SCHEMA)

        if self.shard_rows(RETENTION_SET_TABLE, scope, stream):
            self.rewrite_shard_rows(RETENTION_SET_TABLE, scope, stream, change,
                                    f"drop retention records of {scope}/{stream}")

    # ---- subscribers -------------------------------------------------------------------------
    def subscribers(self, scope: str, stream: str) -> DataFrame:
        return self.shard_frame(SUBSCRIBERS_TABLE, scope, stream)

    def subscriber_rows(self, scope: str, stream: str) -> list[dict]:
        return self.shard_rows(SUBSCRIBERS_TABLE, scope, stream)

    def subscriber(self, scope: str, stream: str, subscriber: str) -> tuple[int, dict[int, int]] | None:
        """``(generation, cut positions)`` of one subscriber, or None if it is not subscribed."""
        rows = [r for r in self.subscriber_rows(scope, stream) if r["subscriber"] == subscriber]
        if not rows:
            return None
        return int(rows[0]["generation"]), {int(e["segment_id"]): int(e["offset"]) for e in rows[0]["stream_cut"]}

    def has_subscriber_cuts(self, scope: str, stream: str) -> bool:
        """Whether any subscriber has published a cut."""
        return any(r["stream_cut"] for r in self.subscriber_rows(scope, stream))

    def subscriber_cuts(self, scope: str, stream: str) -> DataFrame:
        """One row per entry of each subscriber's cut: ``subscriber, segment_id, offset``."""
        return (self.subscribers(scope, stream)
                .select("subscriber", F.explode("stream_cut").alias("e"))
                .select("subscriber", F.col("e.segment_id").alias("segment_id"), F.col("e.offset").alias("offset")))

    def upsert_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Add the subscriber with an empty cut, or raise its generation keeping its cut (Pravega's
        ``addSubscriber``); an older or equal generation changes nothing. True if changed."""
        def change(rows: list[dict]):
            found = [r for r in rows if r["subscriber"] == subscriber]
            if found and found[0]["generation"] >= generation:
                return None
            cut = found[0]["stream_cut"] if found else []
            others = [r for r in rows if r["subscriber"] != subscriber]
            new = {"subscriber": subscriber, "generation": int(generation), "stream_cut": cut, "update_time": utc_now()}
            return self.as_tuples([*others, new], SUBSCRIBERS_SCHEMA)

        return self.rewrite_shard_rows(SUBSCRIBERS_TABLE, scope, stream, change,
                                       f"add subscriber {subscriber} to {scope}/{stream}")

    def delete_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> None:
        """Remove the subscriber unless it has a newer generation than ``generation``."""
        def change(rows: list[dict]):
            keep = [r for r in rows if not (r["subscriber"] == subscriber and r["generation"] <= generation)]
            return None if len(keep) == len(rows) else self.as_tuples(keep, SUBSCRIBERS_SCHEMA)

        if self.subscriber_rows(scope, stream):
            self.rewrite_shard_rows(SUBSCRIBERS_TABLE, scope, stream, change,
                                    f"remove subscriber {subscriber} from {scope}/{stream}")

    def compare_and_set_subscriber_cut(self, scope: str, stream: str, subscriber: str, generation: int,
                                       expected: Mapping[int, int], cut: Mapping[int, int]) -> bool:
        """Replace the subscriber's cut iff it still has ``generation`` and the ``expected`` cut
        (one commit; a concurrent change of the subscribers table makes it run again)."""
        def entries(positions: Mapping[int, int]) -> list[dict]:
            return [{"segment_id": int(s), "offset": int(o)} for s, o in sorted(positions.items())]

        def change(rows: list[dict]):
            found = [r for r in rows if r["subscriber"] == subscriber]
            if (not found or found[0]["generation"] != generation
                    or sorted((e["segment_id"], e["offset"]) for e in found[0]["stream_cut"]) != sorted(expected.items())):
                return None
            new = {**found[0], "stream_cut": entries(cut), "update_time": utc_now()}
            return self.as_tuples([r for r in rows if r["subscriber"] != subscriber] + [new], SUBSCRIBERS_SCHEMA)

        return self.rewrite_shard_rows(SUBSCRIBERS_TABLE, scope, stream, change,
                                       f"update cut of {subscriber} on {scope}/{stream}")
