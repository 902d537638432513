"""``SqlBackend``: the seam with public SQL and DataFrame calls only (``sql``).

It serves Spark Connect sessions (Databricks serverless and standard clusters), which have no
JVM handle. Each fence is one MERGE whose ON clause names the partitions literally and whose
condition carries the decision (``sql.SqlTransaction``); truncation is DELETEs on
partition values; nothing reads Delta's log files or places a file by hand, and nothing sets a
session setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from . import sql, sql_reads, sql_requests, sql_tables, sql_writes
from .files import CommitMetrics, PartitionSummary, TableState
from .local_data import is_connect_session
from .retry import RetryPolicy, retrying
from .rows import RowsChange, replace_rows
from .transaction_protocol import TableTransaction


class SqlBackend:
    """``DeltaBackend`` with public SQL only."""

    places_files = False
    reads_log_changes = False
    removes_folders = False

    @property
    def resolves_at_evaluation(self) -> bool:
        """Over Spark Connect only (a classic session's reads pin "latest" at the call)."""
        return is_connect_session(self.spark)

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __repr__(self) -> str:
        return "SqlBackend()"

    # ---- capabilities and the session --------------------------------------------------------
    def configure_session(self) -> None:
        """Nothing: those settings serve the classic backend's log reads, and serverless refuses them."""

    def writer_session(self, conf: Mapping[str, str]) -> SparkSession:
        """The session itself (Connect has no ``newSession``): settings are given per write."""
        return self.spark

    def check_root(self, root: str) -> None:
        """Nothing: the server owns the storage settings, and the first table access reports a bad root."""

    def pyarrow_s3_options(self, path: str) -> dict | None:
        return None

    def in_session(self, df: DataFrame) -> DataFrame:
        return df

    def plan_leaves(self, df: DataFrame) -> list[str]:
        """A Connect DataFrame's leaves from the client's own plan (none on a classic session:
        its plan lives in the JVM, which this backend does not reach)."""
        return sql_requests.plan_leaves(df) if is_connect_session(df.sparkSession) else []

    def estimated_size(self, df: DataFrame) -> int | None:
        return None

    def activate(self) -> None:
        """Nothing: a Connect client has no active-session thread state to set."""

    def wait_for_listeners(self, timeout_seconds: float) -> bool:
        return True

    def is_stopped(self) -> bool:
        return bool(getattr(self.spark, "is_stopped", False))

    # ---- tables -----------------------------------------------------------------------------
    def qualify(self, path: str) -> str:
        return sql_requests.qualify(self.spark, path)

    def exists(self, path: str) -> bool:
        return sql_requests.exists(self.spark, path)

    def is_table(self, path: str) -> bool:
        return sql_requests.exists(self.spark, path)

    def latest(self, path: str) -> tuple[int, str]:
        return sql_requests.latest(self.spark, path)

    def version(self, path: str) -> int:
        return sql_requests.version(self.spark, path)

    def table_state(self, path: str, version: int | None = None) -> TableState:
        number = sql_requests.version(self.spark, path) if version is None else int(version)
        return TableState(number, sql_requests.table_id(self.spark, path) if number >= 0 else None, None)

    def create_table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                     properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
        return retrying(lambda: sql.create_table(self.spark, path, schema, partition_by, properties, rows),
                        f"create table {path}")

    def table_property(self, path: str, key: str) -> str | None:
        return sql_tables.table_property(self.spark, path, key)

    def read(self, path: str, version: int | None = None) -> DataFrame:
        return sql_requests.read(self.spark, path, version)

    def read_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict] | None:
        """One query (no file access; and a cache check would cost one too); no rows when the
        table does not exist yet."""
        return sql_requests.read_rows(self.spark, path, column, value)

    def read_rows_together(self, reads: Sequence[tuple[str, str | None, str | None]]) -> list[list[dict]] | None:
        """One query for all of them (``sql_requests.read_rows_together``)."""
        return sql_requests.read_rows_together(self.spark, reads)

    def summarize(self, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
                  version: int | None = None) -> dict[int, PartitionSummary]:
        return sql_reads.summarize(self.spark, path, column, values, end_column, stat, version)

    def lookup(self, path: str, column: str, value: int, stat: str, wanted: list[int],
               version: int | None = None) -> tuple[list[dict], int | None]:
        return sql_reads.lookup(self.spark, path, column, value, stat, wanted, version), None

    def file_changes(self, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
        """The commits' file actions from the log's JSON commits read as data (one query: see
        ``sql_tables.file_changes``); the streaming gap check runs here too."""
        return sql_tables.file_changes(self.spark, path, start, end)

    def recent_changes(self, path: str, since_ms: int, keep) -> list[tuple[int, list[dict], list[dict]]]:
        raise NotImplementedError("the public-API backend reads no log file (reads_log_changes is False)")

    def added_in(self, path: str) -> DataFrame:
        return sql_tables.added_in(self.spark, path)

    def version_adding(self, path: str, partition: Mapping[str, object]) -> int | None:
        return sql_tables.version_adding(self.spark, path, partition)

    # ---- commits ----------------------------------------------------------------------------
    def transaction(self, path: str) -> TableTransaction:
        return sql.SqlTransaction(self.spark, path)

    def replace_rows(self, path: str, schema: StructType, change: RowsChange, what: str,
                     partition: Mapping[str, str] | None = None, partition_by: tuple[str, ...] = (),
                     retry: RetryPolicy | None = None) -> bool:
        return replace_rows(lambda: self.transaction(path), schema, change, what, partition, partition_by, retry)

    def rewrite_where(self, path: str, rows: DataFrame, condition: str) -> None:
        """One ``replaceWhere`` overwrite that changes no data (see ``sql_writes.rewrite_where``)."""
        sql_writes.rewrite_where(self.spark, path, rows, condition)

    def marks_in(self, path: str, prefix: str) -> dict[str, int]:
        return sql_writes.marks_in(self.spark, path, prefix)

    def merge_marked(self, path: str, rows: DataFrame | None, marks: Mapping[str, int],
                     expected: Mapping[str, int | None]) -> None:
        sql_writes.merge_marked(self.spark, path, rows, marks, expected)

    def delete_matching(self, path: str, source: DataFrame, on: list[str]) -> int:
        return sql_writes.delete_matching(self.spark, path, source, on)

    def delete_partitions(self, path: str, column: str, values: Sequence) -> None:
        """One DELETE on partition values (metadata only: no file is read)."""
        retrying(lambda: sql_writes.delete_where(self.spark, path, f"`{column}` IN ({', '.join(sql_requests.literal(v) for v in values)})"),
                 f"delete partitions of {path}")

    def truncate(self, path: str, column: str, below: Mapping[int, int | None]) -> CommitMetrics:
        """DELETEs on partition values: see ``sql_writes.truncate``."""
        return CommitMetrics(*sql_writes.truncate(self.spark, path, column, below))

    # ---- storage ----------------------------------------------------------------------------
    def vacuum(self, path: str, retention_hours: float | None) -> None:
        sql_tables.vacuum(self.spark, path, retention_hours)

    def remove_tables(self, paths: Sequence[str], folder: str | None = None) -> bool:
        """Empty each table that exists (the client has no file system; VACUUM removes the bytes
        later, and a table created again at a path refills it). True if one existed."""
        found = False
        for path in paths:
            if sql_requests.exists(self.spark, path):
                sql_writes.delete_where(self.spark, path, "true")
                found = True
        return found

    def delete_files(self, table_path: str, paths: list[str]) -> int:
        """Nothing (no file access): VACUUM removes uncommitted files once older than its retention."""
        return 0
