"""The interface the library uses to reach Delta, and its classic (py4j) implementation.

``DeltaBackend`` is operation-level: each method is one thing the store does to a table (qualify a
path, read its rows or a summary of its partitions, compare-and-set a partition's rows, commit a
fenced append, seal, mark and delete for truncation, read the log's changes, VACUUM, read the
application versions). It says what must hold, not how: the classic backend fences a commit by
driving a transaction directly (open, read, decide in Python, commit: ``DeltaTransaction``); a
Spark Connect backend, which has no JVM handle, expresses the same fence as one MERGE whose ON
clause names the partitions literally and whose condition carries the decision (a stale tail or a
seal inserts nothing). Both take and hand out the plain values of ``files.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from . import connect, dispatch, log, session, storage
from .files import PartitionSummary, TableState
from .retry import RetryPolicy, retrying
from .transaction import DeltaTransaction, create_table

RowsChange = Callable[[list[dict]], "list[tuple] | None"]


class DeltaBackend(Protocol):
    """What the library needs from Delta, one method per operation (see the module docstring)."""

    spark: SparkSession

    def qualify(self, path: str) -> str:
        """``path`` absolute and qualified by its file system."""

    def table_state(self, path: str, version: int | None = None) -> TableState:
        """A version of the table: number, id, and its files when listed without a job."""

    def create_table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                     properties: dict[str, str] | None = None) -> bool:
        """Create the table unless it exists (safe to race); True if this call created it."""

    def read(self, path: str, version: int | None = None) -> DataFrame:
        """The table (at ``version``) as a DataFrame."""

    def read_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict] | None:
        """A small table's rows (or one string partition's) without a Spark job; None when the
        backend cannot read them so (the caller then queries ``read``)."""

    def summarize(self, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
                  version: int | None = None) -> dict[int, PartitionSummary]:
        """Per partition: the largest ``end_column`` and the extrema of ``stat`` (no data read)."""

    def replace_rows(self, path: str, schema: StructType, change: RowsChange, what: str,
                     partition: tuple[str, str] | None = None, partition_by: tuple[str, ...] = (),
                     retry: RetryPolicy | None = None) -> bool:
        """Compare-and-set of a partition (or a small table): one commit replacing its rows with
        ``change(rows)`` (None: no change), failing and retried on any concurrent change there."""

    def transaction(self, path: str) -> DeltaTransaction:
        """A transaction driven directly: fenced appends, seals, truncation marks and deletes,
        application versions (classic backend only; Connect expresses each as a MERGE)."""

    def file_changes(self, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
        """The adds and removes of commits ``start..end``, from the log."""

    def vacuum(self, path: str, retention_hours: float | None) -> None:
        """VACUUM the table."""

    def remove_path(self, path: str) -> bool:
        """Delete ``path`` and everything under it from storage."""


def backend_for(spark: SparkSession) -> ClassicBackend | ConnectBackend:
    """The backend serving ``spark``: Connect for a Spark Connect session (or when
    ``PRAVEGA_SPARK_BACKEND=connect``), else classic."""
    return ConnectBackend(spark) if connect.is_connect(spark) else ClassicBackend(spark)


class ClassicBackend:
    """``DeltaBackend`` through the session's JVM (classic Spark and Databricks classic clusters)."""

    connect = False

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __repr__(self) -> str:
        return f"ClassicBackend({self.spark.sparkContext.master})"

    def qualify(self, path: str) -> str:
        return session.qualify(self.spark, path)

    def table_state(self, path: str, version: int | None = None) -> TableState:
        return log.table_state(self.spark, path, version)

    def create_table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                     properties: dict[str, str] | None = None) -> bool:
        return create_table(self.spark, path, schema, partition_by, properties)

    def read(self, path: str, version: int | None = None) -> DataFrame:
        return storage.read(self.spark, path, version)

    def read_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict] | None:
        files = log.listed_files(self.spark, log.snapshot(self.spark, path))
        if files is None:
            return None
        if column is not None:
            files = tuple(f for f in files if f.partition(column) == value)
        return storage.read_rows(self.spark, path, files)

    def summarize(self, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
                  version: int | None = None) -> dict[int, PartitionSummary]:
        return log.summarize_table(self.spark, path, column, values, end_column, stat, version)

    def replace_rows(self, path: str, schema: StructType, change: RowsChange, what: str,
                     partition: tuple[str, str] | None = None, partition_by: tuple[str, ...] = (),
                     retry: RetryPolicy | None = None) -> bool:
        partition_by = partition_by or ((partition[0],) if partition else ())

        def attempt() -> bool:
            txn = self.transaction(path)
            files = txn.read_partition(*partition) if partition else txn.read_whole_table()
            rows = change(txn.rows(files))
            if rows is None:
                return False
            replace(txn, files, rows, schema, partition_by)
            return True

        return retrying(attempt, what) if retry is None else retrying(attempt, what, retry)

    def transaction(self, path: str) -> DeltaTransaction:
        return DeltaTransaction(self.spark, path)

    def file_changes(self, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
        return log.file_changes(self.spark, path, start, end)

    def vacuum(self, path: str, retention_hours: float | None) -> None:
        storage.vacuum(self.spark, path, retention_hours)

    def remove_path(self, path: str) -> bool:
        return storage.remove_path(self.spark, path)


class ConnectBackend(ClassicBackend):
    """``DeltaBackend`` with public SQL only (Spark Connect: Databricks serverless and standard
    clusters). Its transactions are ``connect.ConnectTransaction``s: a commit is one MERGE."""

    connect = True

    def __repr__(self) -> str:
        return "ConnectBackend()"

    def qualify(self, path: str) -> str:
        return connect.qualify(self.spark, path)

    def table_state(self, path: str, version: int | None = None) -> TableState:
        number = connect.version(self.spark, path) if version is None else int(version)
        return TableState(number, connect.table_id(self.spark, path) if number >= 0 else None, None)

    def create_table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                     properties: dict[str, str] | None = None) -> bool:
        return dispatch.create_table(self.spark, path, schema, partition_by, properties)

    def read(self, path: str, version: int | None = None) -> DataFrame:
        return connect.read(self.spark, path, version)

    def read_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict] | None:
        """One query (no file access; and a cache check would cost one too); no rows when the
        table does not exist yet."""
        return connect.read_rows(self.spark, path, column, value)

    def summarize(self, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
                  version: int | None = None) -> dict[int, PartitionSummary]:
        return connect.summarize(self.spark, path, column, values, end_column, stat, version)

    def transaction(self, path: str) -> connect.ConnectTransaction:
        return connect.ConnectTransaction(self.spark, path)

    def file_changes(self, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
        return dispatch.file_changes(self.spark, path, start, end)

    def vacuum(self, path: str, retention_hours: float | None) -> None:
        connect.vacuum(self.spark, path, retention_hours)

    def remove_path(self, path: str) -> bool:
        return dispatch.remove_path(self.spark, path)

    def clear_tables(self, paths: Sequence[str]) -> bool:
        """Delete every row of each of these tables that exists; True if one did."""
        found = False
        for path in paths:
            if connect.exists(self.spark, path):
                connect.delete_where(self.spark, path, "true")
                found = True
        return found

    def truncate(self, path: str, column: str, below: dict[int, int | None]) -> tuple[int | None, dict]:
        """Delete the rows below each partition's offset (None: all): see ``connect.truncate``."""
        return connect.truncate(self.spark, path, column, below)


def replace(txn: DeltaTransaction, files: Sequence, rows: Sequence[tuple], schema: StructType,
            partition_by: tuple[str, ...] = ()) -> int:
    """Commit ``rows`` (one new file per partition) in place of ``files``; returns the version."""
    adds = txn.write_rows(list(rows), schema, partition_by) if rows else None
    return txn.commit(adds, partition_by, extra=txn.removals(files))
