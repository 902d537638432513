"""``ClassicBackend``: the seam through the session's JVM (OSS Delta's classes over py4j).

Each method is one operation of ``backend.DeltaBackend``, done the fast way a JVM allows: log
reads without a Spark job (``log``), rows read with pyarrow from the files the log lists
(``storage``), and fences driven as transactions (``transaction.DeltaTransaction``: open, read,
decide in Python, commit the files placed by hand).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from . import (
    jvm,
    log,
    object_store,
    session,
    sql_reads,
    sql_requests,
    sql_tables,
    sql_writes,
    storage,
)
from .files import CommitMetrics, PartitionSummary, TableState
from .retry import RetryPolicy
from .rows import RowsChange, replace_rows
from .transaction import DeltaTransaction, create_table, might_hold
from .transaction_protocol import TableTransaction

# the events table's file placement (its partition columns besides the segment's)
_BASE, _END, _REL = "base_offset", "end_offset", "rel_offset"


class ClassicBackend:
    """``DeltaBackend`` through the session's JVM (classic Spark, and clusters that give Python a
    JVM with OSS Delta's classes)."""

    places_files = True
    reads_log_changes = True
    removes_folders = True
    resolves_at_evaluation = False

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __repr__(self) -> str:
        return f"ClassicBackend({self.spark.sparkContext.master})"

    # ---- capabilities and the session --------------------------------------------------------
    def configure_session(self) -> None:
        session.configure_session(self.spark)

    def writer_session(self, conf: Mapping[str, str]) -> SparkSession:
        """A session of the writer's own, with ``conf`` set (the user's session is not changed)."""
        own = self.spark.newSession()
        for key, value in conf.items():
            own.conf.set(key, value)
        return own

    def check_root(self, root: str) -> None:
        object_store.check_root(self.spark, root)

    def pyarrow_s3_options(self, path: str) -> dict | None:
        return object_store.pyarrow_s3_options(self.spark, path)

    def in_session(self, df: DataFrame) -> DataFrame:
        return session.in_session(df, self.spark)

    def plan_leaves(self, df: DataFrame) -> list[str]:
        return session.plan_leaves(df)

    def estimated_size(self, df: DataFrame) -> int | None:
        return session.estimated_size(df)

    def activate(self) -> None:
        session.activate(self.spark)

    def wait_for_listeners(self, timeout_seconds: float) -> bool:
        return session.wait_for_listeners(self.spark, timeout_seconds)

    def is_stopped(self) -> bool:
        return session.is_stopped(self.spark)

    # ---- tables -----------------------------------------------------------------------------
    def qualify(self, path: str) -> str:
        return session.qualify(self.spark, path)

    def exists(self, path: str) -> bool:
        return log.exists(self.spark, path)

    def is_table(self, path: str) -> bool:
        return storage.is_table(self.spark, path)

    def latest(self, path: str) -> tuple[int, str]:
        return log.latest(self.spark, path)

    def version(self, path: str) -> int:
        return log.version(self.spark, path)

    def table_state(self, path: str, version: int | None = None) -> TableState:
        return log.table_state(self.spark, path, version)

    def create_table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                     properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
        return create_table(self.spark, path, schema, partition_by, properties, rows)

    def table_property(self, path: str, key: str) -> str | None:
        return log.table_property(self.spark, path, key)

    def read(self, path: str, version: int | None = None) -> DataFrame:
        return storage.read(self.spark, path, version)

    def read_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict] | None:
        files = log.listed_files(self.spark, log.snapshot(self.spark, path))
        if files is None:
            return None
        if column is not None:
            files = tuple(f for f in files if f.partition(column) == value)
        return storage.read_rows(self.spark, path, files)

    def read_rows_together(self, reads: Sequence[tuple[str, str | None, str | None]]) -> list[list[dict]] | None:
        """None: each table's rows come from its own log and files (no Spark job), apart."""
        return None

    def summarize(self, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
                  version: int | None = None) -> dict[int, PartitionSummary]:
        return log.summarize_table(self.spark, path, column, values, end_column, stat, version)

    def lookup(self, path: str, column: str, value: int, stat: str, wanted: list[int],
               version: int | None = None) -> tuple[list[dict], int | None]:
        """The files the log lists (the checksum file) whose statistics may hold a wanted value,
        read with pyarrow: no Spark job. A time-travel look-up, or a log without a file list, is
        one query."""
        if version is None:
            state = log.table_state(self.spark, path)
            if state.files is not None:
                files = might_hold([f for f in state.files if f.partition(column) == str(int(value))], stat, wanted)
                return storage.read_rows_where(self.spark, path, files, stat, wanted), len(files)
        return sql_reads.lookup(self.spark, path, column, value, stat, wanted, version), None

    def file_changes(self, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
        return log.file_changes(self.spark, path, start, end)

    def recent_changes(self, path: str, since_ms: int, keep) -> list[tuple[int, list[dict], list[dict]]]:
        return log.recent_changes(self.spark, path, since_ms, keep)

    def added_in(self, path: str) -> DataFrame:
        return sql_tables.added_in(self.spark, path)

    def version_adding(self, path: str, partition: Mapping[str, object]) -> int | None:
        return sql_tables.version_adding(self.spark, path, partition)

    # ---- commits ----------------------------------------------------------------------------
    def transaction(self, path: str) -> TableTransaction:
        return DeltaTransaction(self.spark, path)

    def replace_rows(self, path: str, schema: StructType, change: RowsChange, what: str,
                     partition: Mapping[str, str] | None = None, partition_by: tuple[str, ...] = (),
                     retry: RetryPolicy | None = None) -> bool:
        return replace_rows(lambda: self.transaction(path), schema, change, what, partition, partition_by, retry)

    def rewrite_where(self, path: str, rows: DataFrame, condition: str) -> None:
        """One ``replaceWhere`` overwrite that changes no data (public API: the same as ``sql``'s;
        compaction here places its files instead)."""
        sql_writes.rewrite_where(self.spark, path, self.in_session(rows), condition)

    def marks_in(self, path: str, prefix: str) -> dict[str, int]:
        return sql_writes.marks_in(self.spark, path, prefix)

    def merge_marked(self, path: str, rows: DataFrame | None, marks: Mapping[str, int],
                     expected: Mapping[str, int | None]) -> None:
        sql_writes.merge_marked(self.spark, path, None if rows is None else self.in_session(rows), marks, expected)

    def delete_matching(self, path: str, source: DataFrame, on: list[str]) -> int:
        return sql_writes.delete_matching(self.spark, path, source, on)

    def delete_partitions(self, path: str, column: str, values: Sequence) -> None:
        sql_writes.delete_where(self.spark, path, f"`{column}` IN ({', '.join(sql_requests.literal(v) for v in values)})")

    def truncate(self, path: str, column: str, below: Mapping[int, int | None]) -> CommitMetrics:
        """One DELETE commit on an events table: in each partition of ``below``, the rows with
        ``base_offset + rel_offset`` below its value (None: all of them).

        Files are judged by where the log places them: wholly below -> removed; wholly at or above
        -> kept; straddling -> rewritten without the rows below, in the same commit, each keeping
        its original's time (Delta's streaming source orders a snapshot by it). The files looked
        at are the commit's reads, so a concurrent removal of one of them (another process
        finishing the same truncation) makes it conflict, while appends (always above every
        start) do not."""
        partitions = (column, _BASE, _END)
        txn = self.transaction(path)
        removed, straddling = [], []
        for f in txn.read_files_in(column, sorted(below)):
            start = below[f.int_partition(column)]
            base, end = f.int_partition(_BASE), f.int_partition(_END)
            if start is None or end < start or (end == start and base < start):
                removed.append(f)
            elif base < start:
                straddling.append(f)
        if not removed and not straddling:
            return CommitMetrics(None, {})
        adds, kept = None, []
        if straddling:
            keep = " OR ".join(f"(`{column}` = {s} AND {_BASE} + {_REL} >= {o})"
                               for s, o in sorted(below.items()) if o is not None)
            kept = txn.write(txn.read_files(straddling).where(keep), partitions)
            times = {(f.int_partition(column), f.int_partition(_BASE)): f.modification_time for f in straddling}
            adds = [k.placed(modification_time=times.get((k.int_partition(column), k.int_partition(_BASE))))
                    for k in kept]
        copied = sum(f.num_records for f in kept)
        metrics = {"numRemovedFiles": len(removed) + len(straddling), "numAddedFiles": len(kept),
                   "numCopiedRows": copied,
                   "numDeletedRows": sum(f.num_records for f in removed + straddling) - copied}
        txn.record_metrics(metrics)
        if all(o is None for o in below.values()):
            condition = f"{column} IN ({', '.join(str(int(s)) for s in sorted(below))})"
        else:
            condition = " OR ".join(f"({column} = {int(s)}" + ("" if o is None else f" AND {_BASE} + {_REL} < {int(o)}")
                                    + ")" for s, o in sorted(below.items()))
        version = txn.commit(adds, partitions, extra=txn.removals(removed + straddling), delete_predicate=condition)
        return CommitMetrics(version, metrics)

    # ---- storage ----------------------------------------------------------------------------
    def vacuum(self, path: str, retention_hours: float | None) -> None:
        storage.vacuum(self.spark, path, retention_hours)

    def remove_tables(self, paths: Sequence[str], folder: str | None = None) -> bool:
        """Delete the tables: ``folder`` and everything under it if given, else each path; then
        drop them from Delta's log cache (``jvm.evict_delta_logs``)."""
        try:
            if folder is not None:
                return storage.remove_path(self.spark, folder)
            return any([storage.remove_path(self.spark, p) for p in paths])
        finally:
            jvm.evict_delta_logs(self.spark, paths)

    def delete_files(self, table_path: str, paths: list[str]) -> int:
        return storage.delete_files(self.spark, table_path, paths)
