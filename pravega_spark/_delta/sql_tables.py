"""The public-API backend's table lifecycle and log reads: DDL, VACUUM, properties, the data
files now and the files each commit added or removed (the log's JSON read as data)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from .files import FileEntry
from .sql_requests import aware, command_rows, literal, missing_table, read, table, version


def column_ddl(schema: StructType) -> str:
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
                     for f in schema.fields)

# Delta refuses a VACUUM retention shorter than the table's ``delta.deletedFileRetentionDuration``
# unless a session setting turns its check off (refused on serverless): a shorter one lowers the
# property for that VACUUM, then puts it back
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"

DEFAULT_RETENTION_HOURS = 168.0

def vacuum(spark: SparkSession, path: str, retention_hours: float | None) -> None:
    """``VACUUM`` with the table's retention (``retention_hours`` None), or a shorter one for
    this command only (see ``RETENTION_PROPERTY``). No session setting: list-heavy VACUUMs want
    ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` low where the session is built
    (``ps.spark_session`` does; Databricks tunes its own VACUUM)."""
    if retention_hours is None:
        spark.sql(f"VACUUM {table(path)}")  # a command runs when sent
        return
    hours = float(retention_hours)
    kept = table_property(spark, path, RETENTION_PROPERTY)
    if hours >= _interval_hours(kept):
        spark.sql(f"VACUUM {table(path)} RETAIN {hours} HOURS")
        return
    spark.sql(f"ALTER TABLE {table(path)} SET TBLPROPERTIES ({literal(RETENTION_PROPERTY)} = "
              f"{literal(f'interval {int(hours * 3600)} seconds')})")
    try:
        spark.sql(f"VACUUM {table(path)} RETAIN {hours} HOURS")
    finally:
        if kept is None:
            spark.sql(f"ALTER TABLE {table(path)} UNSET TBLPROPERTIES IF EXISTS ({literal(RETENTION_PROPERTY)})")
        else:
            spark.sql(f"ALTER TABLE {table(path)} SET TBLPROPERTIES ({literal(RETENTION_PROPERTY)} = {literal(kept)})")

def set_properties(spark: SparkSession, path: str, values: Mapping[str, str], unset: tuple[str, ...] = ()) -> None:
    """Set (and unset) table properties: one metadata commit each (``ALTER TABLE``)."""
    if values:
        pairs = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in values.items())
        spark.sql(f"ALTER TABLE {table(path)} SET TBLPROPERTIES ({pairs})")
    if unset:
        spark.sql(f"ALTER TABLE {table(path)} UNSET TBLPROPERTIES IF EXISTS ({', '.join(map(literal, unset))})")


def table_property(spark: SparkSession, path: str, key: str) -> str | None:
    """A table property (``SHOW TBLPROPERTIES``, one command), or None."""
    rows = command_rows(spark.sql(f"SHOW TBLPROPERTIES {table(path)} ({literal(key)})"))
    value = rows[0]["value"] if rows else None
    return None if value is None or "does not have property" in str(value) else str(value)

def _interval_hours(text: str | None) -> float:
    """Hours of a Delta interval property (``interval 7 days``; None: Delta's default, 7 days)."""
    if not text:
        return DEFAULT_RETENTION_HOURS
    parts = str(text).lower().replace("interval", "").split()
    units = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0}
    total = 0.0
    for number, unit in zip(parts[::2], parts[1::2], strict=False):
        scale = next((v for k, v in units.items() if unit.startswith(k)), None)
        if scale is None:
            return DEFAULT_RETENTION_HOURS
        total += float(number) * scale
    return total

# a commit file's add and remove actions, as far as ``file_changes`` reads them
_FILE_ACTION = StructType([StructField("path", StringType()),
                           StructField("partitionValues", MapType(StringType(), StringType())),
                           StructField("dataChange", BooleanType())])

_COMMIT_ACTIONS = StructType([StructField("add", _FILE_ACTION), StructField("remove", _FILE_ACTION)])

def file_changes(spark: SparkSession, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
    """``(version, adds, removes)`` of each commit of the table at ``path`` in versions
    ``[start, end]``, as ``log.file_changes`` gives them (path, partition values, dataChange),
    from the log's JSON commits read as data: one query, public API (the server must reach the
    log as files: a path-based table, as a store's tables are)."""
    if end < start:
        return []
    log_dir = path.rstrip("/") + "/_delta_log"
    files = [f"{log_dir}/{v:020d}.json" for v in range(int(start), int(end) + 1)]
    rows = (spark.read.schema(_COMMIT_ACTIONS).json(files)
            .where(F.col("add").isNotNull() | F.col("remove").isNotNull())
            .select(F.regexp_extract(F.col("_metadata.file_name"), r"^(\d+)\.json$", 1).cast("long").alias("v"),
                    "add", "remove").collect())
    changes: dict[int, tuple[list[dict], list[dict]]] = {v: ([], []) for v in range(int(start), int(end) + 1)}
    for r in rows:
        adds, removes = changes[int(r["v"])]
        for action, into in ((r["add"], adds), (r["remove"], removes)):
            if action is not None:
                into.append({"path": action["path"], "partitionValues": dict(action["partitionValues"] or {}),
                             "dataChange": True if action["dataChange"] is None else bool(action["dataChange"])})
    return [(v, adds, removes) for v, (adds, removes) in sorted(changes.items())]

def data_files(spark: SparkSession, path: str) -> list[FileEntry]:
    """The table's data files now (path, partition values, size, modification time, rows), by
    one query over ``_metadata`` grouped by file, after one for its partition columns."""
    parts = [str(c) for c in command_rows(spark.sql(f"DESCRIBE DETAIL {table(path)}"))[0]["partitionColumns"]]
    df = read(spark, path)
    rows = (df.groupBy(F.col("_metadata.file_path").alias("__path"))
            .agg(*[F.first(F.col(c)).alias(c) for c in parts],
                 F.first(F.col("_metadata.file_size")).alias("__size"),
                 F.first(F.col("_metadata.file_modification_time")).alias("__time"),
                 F.count(F.lit(1)).alias("__rows")).collect())
    return [FileEntry(r["__path"], {c: None if r[c] is None else str(r[c]) for c in parts}, int(r["__size"]),
                      int(aware(r["__time"]).timestamp() * 1000), True, {"numRecords": int(r["__rows"])})
            for r in rows]

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


# the commits ``version_adding`` reads first: the latest ones (a write asks soon after it)
RECENT_COMMITS = 64


def version_adding(spark: SparkSession, path: str, partition: Mapping[str, object]) -> int | None:
    """The version of the latest commit still in the log's JSON that added a data file to
    ``partition`` (all of its partition values) and removed no file: a write at a segment's tail
    is the only such commit (a truncation's rewrite removes the file it rewrites, a compaction
    changes no data), unless the stream was deleted and written again since. None when there is
    none. The latest ``RECENT_COMMITS`` are read first, then the whole log (one query each)."""
    latest = version(spark, path)
    if latest < 0:
        return None
    log_dir = path.rstrip("/") + "/_delta_log"
    first = latest - RECENT_COMMITS + 1
    windows = [[f"{log_dir}/{v:020d}.json" for v in range(first, latest + 1)]] if first > 0 else []
    windows.append([f"{log_dir}/*.json"])
    adds = F.col("add.dataChange").isNull() | F.col("add.dataChange")
    for key, value in partition.items():
        adds = adds & (F.col("add.partitionValues").getItem(key) == str(value))
    for files in windows:
        try:
            commits = spark.read.schema(_COMMIT_ACTIONS).json(files)
            rows = (commits.groupBy(F.col("_metadata.file_name").alias("commit"))
                    .agg(F.max(F.when(F.col("add").isNotNull() & adds, 1).otherwise(0)).alias("adds"),
                         F.max(F.when(F.col("remove").isNotNull(), 1).otherwise(0)).alias("removes"))
                    .where("adds = 1 AND removes = 0")
                    .select(F.max(F.regexp_extract("commit", r"^(\d+)\.json$", 1).cast("long"))).collect())
        except Exception as exc:  # noqa: BLE001 - a commit of the window cleaned up: read the whole log
            if missing_table(exc) or "Path does not exist" in str(exc):
                continue
            raise
        if rows and rows[0][0] is not None:
            return int(rows[0][0])
    return None
