"""The public-API backend's requests: a command's result rows, a table by path, its version and
id, reads of small tables (one query each, no JVM handle, no session setting)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..errors import InvalidConfigError

log = logging.getLogger("pravega_spark")

BACKEND_ENV = "PRAVEGA_SPARK_BACKEND"

DATABRICKS_ENV = "DATABRICKS_RUNTIME_VERSION"  # set on every Databricks Runtime cluster

# Spark Connect's client logs a failed query at ERROR (with the server's stack trace) before it
# raises: our expected failures (a stale read, a missing table) are not errors to a user
_CLIENT_LOGGERS = ("SQLQueryContextLogger", "pyspark.sql.connect.client.logger", "pyspark.sql.connect.logging")

def command_rows(df: DataFrame) -> list[dict]:
    """The rows of a command's result (``spark.sql`` of a MERGE, DELETE, DESCRIBE, ...) as dicts.

    A command runs when ``spark.sql`` sends it, and Spark Connect returns its result with that
    request, as Arrow data: it is decoded here, with no second request. Elsewhere (a classic
    session, or a result the client holds otherwise) the rows are collected."""
    relation = getattr(getattr(df, "_plan", None), "_plan", None)  # the client's CachedRelation
    try:
        if relation is not None and relation.HasField("local_relation") and relation.local_relation.HasField("data"):
            import pyarrow as pa

            return pa.ipc.open_stream(relation.local_relation.data).read_all().to_pylist()
    except Exception:  # noqa: BLE001 - the client's classes are not an API: collect instead
        log.debug("command result not decoded in the client; collecting it", exc_info=True)
    return [row.asDict() for row in df.collect()]

def plan_leaves(df: DataFrame) -> list[str]:
    """The class names of the leaves of a Spark Connect DataFrame's plan as the client built it
    (no request): ``LocalRelation`` for ``createDataFrame`` data. Empty for any other DataFrame,
    or when the client's plan cannot be walked (its classes are the client's own, not an API)."""
    try:
        from pyspark.sql.connect.plan import LogicalPlan
    except ImportError:
        return []
    plan = getattr(df, "_plan", None)
    if not isinstance(plan, LogicalPlan):
        return []
    leaves, todo = [], [plan]
    while todo:
        node = todo.pop()
        children = []
        for value in vars(node).values():  # a join's sides, a union's other side, a view's relations
            for item in value if isinstance(value, list | tuple) else [value]:
                if isinstance(item, LogicalPlan):
                    children.append(item)
        if children:
            todo.extend(children)
        else:
            leaves.append(type(node).__name__)
    return leaves

def quiet_client_logs() -> None:
    """Keep Spark Connect's client from logging, at ERROR, failures this package handles."""
    for name in _CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)

def table(path: str) -> str:
    """``delta.`path``` for SQL, the path's backticks doubled."""
    return "delta.`" + path.replace("`", "``") + "`"

def literal(value) -> str:
    """A SQL literal of a string or int partition value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"

def missing_table(exc: BaseException) -> bool:
    """Whether ``exc`` says there is no table at the path (a folder inside another table, which
    Delta reads as a partition path of that one, is no table either)."""
    text = str(exc)
    return any(mark in text for mark in ("DELTA_MISSING_DELTA_TABLE", "PATH_NOT_FOUND", "is not a Delta table",
                                         "DELTA_TABLE_NOT_FOUND", "DELTA_PATH_DOES_NOT_EXIST",
                                         "TABLE_OR_VIEW_NOT_FOUND", "doesn't exist", "DELTA_INVALID_PARTITION_PATH"))

# ---- paths and tables ---------------------------------------------------------------------------
def qualify(spark: SparkSession, path: str) -> str:
    """``path`` unchanged (without a trailing ``/``) when it names a location on its own: a URI
    (``file:``, ``s3a://``, ``abfss://``, ``dbfs:/``) or an absolute path (``/Volumes/...``).

    Raises:
        InvalidConfigError: a relative path: the client's working directory is not the server's.
    """
    text = str(path)
    if ":" in text.split("/")[0] or text.startswith("/"):
        return text.rstrip("/") or text
    raise InvalidConfigError(f"root {text!r} is relative, and a Spark Connect server does not share this process's "
                             "working directory: give an absolute path or a URI (file:/..., s3a://..., "
                             "abfss://..., /Volumes/...)")

def version(spark: SparkSession, path: str) -> int:
    """The table's latest committed version, -1 when there is no table (one history query)."""
    quiet_client_logs()
    try:
        rows = command_rows(spark.sql(f"DESCRIBE HISTORY {table(path)} LIMIT 1"))
    except Exception as exc:
        if missing_table(exc):
            return -1
        raise
    return int(rows[0]["version"]) if rows else -1

def table_id(spark: SparkSession, path: str) -> str:
    """The table's id (``DESCRIBE DETAIL``): a table deleted and created again gets a new one."""
    return str(command_rows(spark.sql(f"DESCRIBE DETAIL {table(path)}"))[0]["id"])

def latest(spark: SparkSession, path: str) -> tuple[int, str]:
    """The table's latest version and its id."""
    number = version(spark, path)
    return number, table_id(spark, path)

def exists(spark: SparkSession, path: str) -> bool:
    return version(spark, path) >= 0

def read(spark: SparkSession, path: str, at: int | None = None) -> DataFrame:
    """The table (at version ``at``) as a DataFrame."""
    reader = spark.read.format("delta")
    if at is not None:
        reader = reader.option("versionAsOf", int(at))
    return reader.load(path)

def read_rows(spark: SparkSession, path: str, column: str | None = None, value: str | None = None) -> list[dict]:
    """A small table's rows (or one string partition's) as dicts, timestamps aware UTC; none
    when there is no table."""
    quiet_client_logs()
    df = read(spark, path)
    if column is not None:
        df = df.where(F.col(column) == value)
    try:  # the names come with the rows: no analysis request for the schema
        return [row_dict(r) for r in df.collect()]
    except Exception as exc:
        if missing_table(exc):
            return []
        raise

def read_rows_together(spark: SparkSession, reads: Sequence[tuple[str, str | None, str | None]]) -> list[list[dict]] | None:
    """``read_rows`` of several ``(path, column, value)`` in one query: a union in which each
    table's rows are one struct column (the other columns null), so each keeps its own types.
    None when a table is missing (the caller reads them one by one: each tells its own story).

    Each table is read at its own latest snapshot, taken while the server plans the query: no
    order between them is promised, so a caller that needs one checks what it got."""
    quiet_client_logs()
    union = None
    for i, (path, column, value) in enumerate(reads):
        df = read(spark, path)
        if column is not None:
            df = df.where(F.col(column) == value)
        part = df.select(F.struct("*").alias(f"__t{i}"))
        union = part if union is None else union.unionByName(part, allowMissingColumns=True)
    if union is None:
        return []
    try:
        rows = union.collect()
    except Exception as exc:
        if missing_table(exc):
            return None
        raise
    found: list[list[dict]] = [[] for _ in reads]
    for row in rows:
        i = next(i for i in range(len(reads)) if row[f"__t{i}"] is not None)
        found[i].append(row_dict(row[f"__t{i}"]))
    return found

def aware(value):
    """A collected timestamp as an aware UTC datetime (Connect hands back naive local times)."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    return value

def row_dict(row, names: Sequence[str] | None = None) -> dict:
    """``row`` as a dict of ``names`` (default: all of its fields, in order), timestamps aware UTC."""
    if names is None:
        return {n: aware(v) for n, v in row.asDict().items()}
    return {n: aware(row[n]) for n in names}
