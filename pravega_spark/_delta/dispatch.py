"""The seam's functions, each run by the backend of the session it is given: classic (the JVM:
``log``, ``storage``, ``session``, ``transaction``) or Spark Connect (public SQL: ``connect``).

The rest of the library calls these (through ``pravega_spark._delta``) and never asks which
backend serves it; what one backend cannot do raises ``UnsupportedOperationError`` there.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ..errors import UnsupportedOperationError
from . import connect, log, object_store, session, storage
from .connect import ConnectTransaction, is_connect
from .retry import retrying
from .transaction import DeltaTransaction
from .transaction import create_table as classic_create_table


def require_classic(spark: SparkSession, capability: str) -> None:
    """Refuse ``capability`` on the Connect backend, in one line naming it.

    Raises:
        UnsupportedOperationError: ``spark`` is served by the Connect backend.
    """
    if is_connect(spark):
        raise UnsupportedOperationError(f"{capability}: not available over Spark Connect yet (it commits files "
                                        "placed by hand, which needs a classic session with a JVM)")


def transaction(spark: SparkSession, path: str) -> DeltaTransaction | ConnectTransaction:
    """A new transaction on the table at ``path``: a ``DeltaTransaction`` driven through the JVM,
    or a ``ConnectTransaction`` whose commit is one MERGE."""
    return ConnectTransaction(spark, path) if is_connect(spark) else DeltaTransaction(spark, path)


def create_table(spark: SparkSession, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
    """Create the table unless it exists (safe to race); True if this call created it."""
    if is_connect(spark):
        return retrying(lambda: connect.create_table(spark, path, schema, partition_by, properties, rows),
                        f"create table {path}")
    return classic_create_table(spark, path, schema, partition_by, properties, rows)


def qualify(spark: SparkSession, path: str) -> str:
    return connect.qualify(spark, path) if is_connect(spark) else session.qualify(spark, path)


def read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    return connect.read(spark, path, version) if is_connect(spark) else storage.read(spark, path, version)


def exists(spark: SparkSession, path: str) -> bool:
    return connect.exists(spark, path) if is_connect(spark) else log.exists(spark, path)


def is_table(spark: SparkSession, path: str) -> bool:
    return connect.exists(spark, path) if is_connect(spark) else storage.is_table(spark, path)


def latest(spark: SparkSession, path: str) -> tuple[int, str]:
    return connect.latest(spark, path) if is_connect(spark) else log.latest(spark, path)


def version(spark: SparkSession, path: str) -> int:
    return connect.version(spark, path) if is_connect(spark) else log.version(spark, path)


def vacuum(spark: SparkSession, path: str, retention_hours: float | None) -> None:
    (connect.vacuum if is_connect(spark) else storage.vacuum)(spark, path, retention_hours)


def remove_path(spark: SparkSession, path: str) -> bool:
    if is_connect(spark):
        raise UnsupportedOperationError("deleting a folder over Spark Connect (the client has no file system)")
    return storage.remove_path(spark, path)


def delete_files(spark: SparkSession, table_path: str, paths: list[str]) -> int:
    """Delete uncommitted files; over Connect there is no file access, and VACUUM removes them
    once they are older than its retention (0 is returned)."""
    return 0 if is_connect(spark) else storage.delete_files(spark, table_path, paths)


def file_changes(spark: SparkSession, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
    if is_connect(spark):
        raise UnsupportedOperationError("reading the adds and removes of Delta's log over Spark Connect")
    return log.file_changes(spark, path, start, end)


def recent_changes(spark: SparkSession, path: str, since_ms: int, keep) -> list[tuple[int, list[dict], list[dict]]]:
    if is_connect(spark):
        raise UnsupportedOperationError("reading the recent commits of Delta's log over Spark Connect")
    return log.recent_changes(spark, path, since_ms, keep)


def configure_session(spark: SparkSession) -> None:
    """``session.SESSION_CONF`` on a classic session; nothing over Connect (those settings serve
    the classic backend's log reads, and serverless refuses them)."""
    if not is_connect(spark):
        session.configure_session(spark)


def check_root(spark: SparkSession, root: str) -> None:
    """``object_store.check_root`` on a classic session; over Connect the server owns the
    storage settings, and the first table access reports a bad root."""
    if not is_connect(spark):
        object_store.check_root(spark, root)


def pyarrow_s3_options(spark: SparkSession, path: str) -> dict | None:
    return None if is_connect(spark) else object_store.pyarrow_s3_options(spark, path)


def in_session(df: DataFrame, target: SparkSession) -> DataFrame:
    return df if is_connect(target) else session.in_session(df, target)


def plan_leaves(df: DataFrame) -> list[str]:
    return [] if is_connect(df.sparkSession) else session.plan_leaves(df)


def estimated_size(df: DataFrame) -> int | None:
    return None if is_connect(df.sparkSession) else session.estimated_size(df)


def activate(spark: SparkSession) -> None:
    if not is_connect(spark):
        session.activate(spark)


def wait_for_listeners(spark: SparkSession, timeout_seconds: float) -> bool:
    return True if is_connect(spark) else session.wait_for_listeners(spark, timeout_seconds)


def is_stopped(spark: SparkSession) -> bool:
    if is_connect(spark):
        return bool(getattr(spark, "is_stopped", False))
    return session.is_stopped(spark)


def lookup(spark: SparkSession, path: str, column: str, value: int, stat: str, wanted: list[int],
           version: int | None = None) -> tuple[list[dict], int | None]:
    """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted``, at the table's
    latest version (or ``version``), and the number of data files read (None: a query read them).

    Classic: the files the log lists (the checksum file) whose statistics may hold a wanted value,
    read with pyarrow (``storage.read_rows_where``): no Spark job. Otherwise, one query."""
    if not is_connect(spark) and version is None:
        state = log.table_state(spark, path)
        if state.files is not None:
            files = [f for f in state.files if f.partition(column) == str(int(value))]
            from .transaction import might_hold

            files = might_hold(files, stat, wanted)
            return storage.read_rows_where(spark, path, files, stat, wanted), len(files)
    # Connect, a time-travel lookup, or no file list: one query (public API, either backend)
    return connect.lookup(spark, path, column, value, stat, wanted, version), None


def delete_matching(spark: SparkSession, path: str, source: DataFrame, on: list[str]) -> int:
    """Delete the table's rows equal on ``on`` to a row of ``source`` (one MERGE, public SQL:
    both backends); returns the rows deleted. A concurrent commit to the files it rewrites makes
    it conflict (retry it)."""
    condition = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on)
    target = connect.table(path)
    result = spark.sql(f"MERGE INTO {target} AS t USING {{source}} AS s ON {condition} WHEN MATCHED THEN DELETE",
                       source=source).collect()
    return int(result[0]["num_deleted_rows"]) if result else 0


def added_in(spark: SparkSession, path: str) -> DataFrame:
    """``file_name, added_in``: the version of the commit that added each data file, from the
    JSON commits the log still holds (one query, public API: both backends)."""
    from pyspark.sql import functions as F

    commits = spark.read.json(path.rstrip("/") + "/_delta_log/*.json")
    if "add" not in commits.columns:
        return spark.createDataFrame([], "file_name string, added_in bigint")
    return (commits.where(F.col("add").isNotNull())
            .select(F.element_at(F.split(F.col("add.path"), "/"), -1).alias("file_name"),
                    F.regexp_extract(F.col("_metadata.file_name"), r"^(\d+)\.json$", 1).cast("long").alias("added_in"))
            .groupBy("file_name").agg(F.max("added_in").alias("added_in")))
