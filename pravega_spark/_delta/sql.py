"""The Delta seam with public SQL and DataFrame calls only: no JVM handle, no session setting.

Databricks serverless and standard clusters hand out Spark Connect sessions (no ``_jvm``, no
``_jsparkSession``, no ``_jdf``), and no Databricks Runtime ships OSS Delta's classes, so this is
the backend every Databricks compute gets (``backend.backend_kind``). A commit there is one Delta command, so each fence
of the classic backend (a transaction driven directly) becomes one MERGE whose ON clause names the
fenced partitions literally (Delta's conflict checker then fails it on a concurrent add there, as
it fails the classic transaction) and whose conditions carry the decision taken on the rows read:

- **rows** (small tables: compare-and-set of a partition). The rows read are identified by a
  fingerprint (``xxhash64`` of all columns, computed by the server at the read). One source row
  per fingerprint matches its target row; one more source row per commit matches every target
  row of the fence whose fingerprint was *not* read. So each target row in the fence matches
  exactly one source row, and the MERGE raises ``STALE`` if a row read has gone (or changed) or a
  row not read has appeared since the read; otherwise it deletes the rows removed and inserts the
  new ones. The read and the MERGE's own snapshot may differ; what matters is that the rows are
  the same.
- **tails** (events tables: appends, seals). The ON clause fences the segments and prunes to the
  region at or after each tail read; a data condition matches any row there that ends after the
  tail or seals the segment. Such a row matches every source row, and ``WHEN MATCHED`` raises:
  the MERGE commits nothing, and the writer retries from fresh tails. A write number is the
  writer's *write mark*, a row the same MERGE appends (``MARKS_SEGMENT``), never a session
  setting.

Where the classic backend places files it wrote before the commit (a transaction's staged
events, a large event's chunks), this one stages rows in a partition no reader reads and copies
them in the commit's MERGE, whose marks are compare-and-sets of the states read (a mark's
generation counts its changes, so a change that kept the number still fails it).

**No commit that adds events removes a file.** Delta's streaming source (``skipChangeCommits``)
skips every add of a commit that removes a file with ``dataChange=true``: a mark is therefore
appended as a new row of a later generation, never updated in place, and a transaction's staged
rows are deleted by a commit of their own.

``SqlTransaction`` offers ``DeltaTransaction``'s interface, so the control plane's code is the
same on both backends. The file verbs (placing files at commit, job-free log reads) raise
``NotImplementedError``: their callers check ``places_files`` first.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from ..errors import InvalidConfigError
from .files import AppVersion, FileEntry, PartitionSummary
from .local_data import local_frame
from .retry import STALE, Retry, raised

log = logging.getLogger("pravega_spark")

BACKEND_ENV = "PRAVEGA_SPARK_BACKEND"
DATABRICKS_ENV = "DATABRICKS_RUNTIME_VERSION"  # set on every Databricks Runtime cluster
FINGERPRINT = "__fp"
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


def _missing(exc: BaseException) -> bool:
    text = str(exc)
    return any(mark in text for mark in ("DELTA_MISSING_DELTA_TABLE", "PATH_NOT_FOUND", "is not a Delta table",
                                         "DELTA_TABLE_NOT_FOUND", "DELTA_PATH_DOES_NOT_EXIST",
                                         "TABLE_OR_VIEW_NOT_FOUND", "doesn't exist"))


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
        if _missing(exc):
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
        if _missing(exc):
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
        if _missing(exc):
            return None
        raise
    found: list[list[dict]] = [[] for _ in reads]
    for row in rows:
        i = next(i for i in range(len(reads)) if row[f"__t{i}"] is not None)
        found[i].append(row_dict(row[f"__t{i}"]))
    return found


def column_ddl(schema: StructType) -> str:
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
                     for f in schema.fields)


def create_table(spark: SparkSession, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
    """``CREATE TABLE IF NOT EXISTS`` at ``path``; True if this call created it. Two creators
    racing: the log store lets one write version 0, the other's commit conflicts and its retry
    (``retrying`` around this) finds the table."""
    if version(spark, path) >= 0:
        # a table emptied by a deletion over Connect (no folder can be removed) counts as absent
        # for rows: they go in if it is still empty when they are inserted
        if rows:
            txn = SqlTransaction(spark, path)
            if not txn.rows(txn.read_whole_table()):
                txn.commit(txn.write_rows(rows, schema))
                return True
        return False
    props = {"delta.isolationLevel": "Serializable", **(properties or {})}
    parts = f" PARTITIONED BY ({', '.join(f'`{c}`' for c in partition_by)})" if partition_by else ""
    tbl = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in props.items())
    if rows:  # the metadata and the rows in one commit (version 0)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table(path)} USING delta{parts} TBLPROPERTIES ({tbl}) "
                  "AS SELECT * FROM {source}", source=local_frame(spark, rows, schema))
    else:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table(path)} ({column_ddl(schema)}) USING delta{parts} "
                  f"TBLPROPERTIES ({tbl})")
    return True


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


def delete_where(spark: SparkSession, path: str, condition: str) -> tuple[int | None, dict[str, int]]:
    """One ``DELETE`` (partition-only conditions delete whole files without reading them; others
    rewrite the files they touch): the new version (None when nothing matched) and its metrics."""
    before = version(spark, path)
    result = command_rows(spark.sql(f"DELETE FROM {table(path)} WHERE {condition}"))
    deleted = int(result[0]["num_affected_rows"] or 0) if result else 0
    after = version(spark, path)
    if after == before:
        return None, {"numDeletedRows": 0}
    return after, {"numDeletedRows": deleted}


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


def summarize(spark: SparkSession, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
              at: int | None = None) -> dict[int, PartitionSummary]:
    """Per partition value: the largest ``end_column`` and the extrema of ``stat`` (one aggregate
    query over the partitions' rows: Connect reads no log)."""
    ids = sorted({int(v) for v in values})
    if not ids:
        return {}
    df = read(spark, path, at).where(F.col(column).isin(ids))
    rows = df.groupBy(column).agg(F.max(end_column).alias("end"), F.min(stat).alias("low"),
                                  F.max(stat).alias("high")).collect()
    return {int(r[column]): PartitionSummary(int(r["end"]), r["low"], r["high"]) for r in rows}


def lookup(spark: SparkSession, path: str, column: str, value: int, stat: str, wanted: Sequence[int],
           at: int | None = None) -> list[dict]:
    """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted`` (one query)."""
    df = read(spark, path, at)
    names = df.columns
    rows = df.where((F.col(column) == int(value)) & F.col(stat).isin([int(w) for w in wanted])).collect()
    return [row_dict(r, names) for r in rows]


# ---- the transaction ----------------------------------------------------------------------------
@dataclass
class FenceRead:
    """A read of a ``SqlTransaction``: the fence (SQL over the target ``t``) and the
    fingerprints of every row it found."""

    fence: str
    fingerprints: list[int]


@dataclass
class RowRead:
    """One row read by a ``SqlTransaction`` (what ``DeltaTransaction`` calls a file): its
    values and fingerprint. ``partition`` gives a column's value as a string, like a file's
    partition value."""

    values: dict
    fingerprint: int

    def partition(self, column: str) -> str | None:
        value = self.values.get(column)
        return None if value is None else str(value)

    def int_partition(self, column: str) -> int:
        return int(self.values[column])


@dataclass
class RowsRemoved:
    """A ``removals`` marker: this row is deleted by the commit."""

    read: RowRead


@dataclass
class NewRows:
    """A ``write_rows`` result: rows the commit inserts (tuples in ``schema``'s order)."""

    rows: list[tuple]
    schema: StructType
    num_records: int = field(init=False)

    def __post_init__(self) -> None:
        self.num_records = len(self.rows)


class SqlTransaction:
    """A commit of the Connect backend, with ``DeltaTransaction``'s interface (the part the
    control plane uses): reads declare the fence, ``commit`` is one MERGE (see the module
    docstring). Nothing is written before ``commit``."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        quiet_client_logs()
        self.spark = spark
        self.path = path
        self._read_version: int | None = None
        self._table_id: str | None = None
        self._reads: list[FenceRead] = []
        self._tails: dict[int, int] | None = None
        self._tail_column: str | None = None
        self._tail_end: str | None = None  # set by ``expect_max``: the column the condition compares
        self._marks_read: dict[str, tuple[int, int] | None] = {}  # app id -> (number, generation) read
        self.inserted: int | None = None  # rows the last commit inserted
        self.committed_version: int | None = None  # the version of the last insert, when found
        self.unplaced_names: list[str] = []  # files are written where they belong

    def __repr__(self) -> str:
        return f"SqlTransaction({self.path}, read_version={self.read_version})"

    @property
    def read_version(self) -> int:
        """The table's version when first asked (-1: no table). Reads and commits do not depend
        on it: a commit's conditions compare what was read with what the MERGE finds."""
        if self._read_version is None:
            self._read_version = version(self.spark, self.path)
        return self._read_version

    @property
    def table_id(self) -> str:
        if self._table_id is None:
            self._table_id = table_id(self.spark, self.path)
        return self._table_id

    # ---- reads ------------------------------------------------------------------------------
    def _read(self, fence: str) -> list[RowRead]:
        quiet_client_logs()
        try:
            df = read(self.spark, self.path)
            where = fence.replace("t.`", "`")
            # ``xxhash64(*)``: all columns in the table's order, as the commit's MERGE lists them
            # (the names come with the rows: no analysis request for the schema)
            rows = (df.where(where) if fence != "true" else df).select(
                "*", F.expr("xxhash64(*)").alias(FINGERPRINT)).collect()
        except Exception as exc:
            if not _missing(exc):
                raise
            rows = []
        found = [RowRead({n: v for n, v in row_dict(r).items() if n != FINGERPRINT}, int(r[FINGERPRINT]))
                 for r in rows]
        self._reads.append(FenceRead(fence, [r.fingerprint for r in found]))
        return found

    def read_whole_table(self) -> list:
        """Every row, fenced: any change to the table before the commit makes it fail."""
        return self._read("true")

    def read_partition(self, column: str, value: str) -> list:
        """One string partition's rows, fenced."""
        return self._read(f"t.`{column}` = {literal(str(value))}")

    def all_files(self) -> None:
        """Connect lists no files: None (callers fall back to a query)."""
        return None

    def rows(self, files: Sequence) -> list[dict]:
        return [dict(f.values) for f in files if isinstance(f, RowRead)]

    def fence_partitions(self, column: str, values: list[int]) -> None:
        """Fence these (integer) partitions; the commit's condition is the tails read by
        ``summarize`` (see the module docstring)."""
        self._tail_column = column
        self._tails = {int(v): 0 for v in values} if self._tails is None else self._tails

    def summarize(self, column: str, values: list[int], end_column: str, stat: str) -> dict[int, PartitionSummary]:
        """The partitions' summaries at this transaction's version; their ends are the tails the
        commit is conditioned on."""
        found = summarize(self.spark, self.path, column, values, end_column, stat)
        self._tail_column = column
        self._tails = {int(v): (found[int(v)].end if int(v) in found else 0) for v in values}
        return found

    def expect_tails(self, column: str, tails: Mapping[int, int]) -> None:
        """Condition the commit on ``tails`` known from elsewhere (a writer's last commit): if
        they moved, the commit fails (nothing written) and raises ``Retry``."""
        self._tail_column = column
        self._tails = {int(s): int(t) for s, t in tails.items()}

    def ends_of_insert(self) -> dict[int, int]:
        """After an insert at the tails: each segment's end of what it inserted (the rows whose
        base is the tail: the fence kept everyone else out of that region)."""
        column, tails = self._tail_column, self._tails or {}
        where = " OR ".join(f"(`{column}` = {int(s)} AND base_offset = {int(t)})" for s, t in sorted(tails.items()))
        rows = (read(self.spark, self.path).where(where).groupBy(column)
                .agg(F.max("end_offset").alias("end")).collect()) if where else []
        return {int(r[column]): int(r["end"]) for r in rows}

    def insert_frame(self, source: DataFrame | None, app: AppVersion | Sequence[AppVersion] | None = None) -> int:
        """Insert ``source``'s rows at the tails read (or expected; none: only the marks fence
        it), with the application versions ``app`` in the same MERGE: the rows inserted (0: the
        source was empty), -1 when a write number was recorded already (the write mark holds it
        or a larger one: nothing was written). An id whose version this transaction read is a
        compare-and-set against what it read (as Delta fences a read ``SetTransaction``).

        Raises:
            Retry: the tails moved (or a segment was sealed), or a mark read changed, since:
                nothing was written.
        """
        marks = [] if app is None else [app] if isinstance(app, AppVersion) else list(app)
        expected = {m.app_id: self._marks_read[m.app_id] for m in marks if m.app_id in self._marks_read}
        tails = self._tails or {}
        if self._tail_end is None:
            inserted = fenced_insert(self.spark, self.path, source, self._tail_column or "segment_id", tails,
                                     numbered=bool(marks), marks=marks, expected=expected)
        else:  # a versioned table (``expect_max``): always fail when stale
            inserted = fenced_insert(self.spark, self.path, source, self._tail_column, tails,
                                     seal_type=None, end_column=self._tail_end, start_column=None)
        self.inserted = inserted
        self.committed_version = None  # finding it would cost a query (and a session setting to tag it)
        return inserted

    # ---- versioned entries (key-value tables) --------------------------------------------------
    def expect_max(self, column: str, values: Sequence[int], stat: str) -> dict[int, int]:
        """The largest ``stat`` in each of these partitions now (0 for an empty one), one query.
        They become the commit's condition: if a row with a larger ``stat`` appears in one of
        them before the commit's MERGE, it fails (nothing written) and raises ``Retry``."""
        ids = sorted({int(v) for v in values})
        rows = (read(self.spark, self.path).where(F.col(column).isin(ids)).groupBy(column)
                .agg(F.max(stat).alias("high")).collect()) if ids else []
        found = {int(r[column]): int(r["high"]) for r in rows if r["high"] is not None}
        self._tail_column, self._tail_end = column, stat
        self._tails = {v: found.get(v, 0) for v in ids}
        return dict(self._tails)

    def lookup(self, column: str, value: int, stat: str, wanted: Sequence[int]) -> list[dict]:
        """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted`` (one query;
        the commit's condition is set by ``expect_max``)."""
        return lookup(self.spark, self.path, column, value, stat, wanted)

    def frame(self) -> DataFrame:
        """The table's latest version as a DataFrame."""
        return read(self.spark, self.path)

    def append_frame(self, df: DataFrame, partition_by: tuple[str, ...]) -> int | None:
        """Insert ``df``'s rows under the condition set by ``expect_max`` (one MERGE); None (the
        version would cost a query).

        Raises:
            Retry: a partition's largest value grew since ``expect_max``: nothing was written.
        """
        self.insert_frame(df)
        return None

    # ---- writes -----------------------------------------------------------------------------
    def write_rows(self, rows: list[tuple], schema: StructType, partition_by: tuple[str, ...] = (),
                   stats_columns: tuple[str, ...] = (), folder: str | None = None) -> list[NewRows]:
        return [NewRows(list(rows), schema)] if rows else []

    @staticmethod
    def removals(files: Sequence, data_change: bool = True) -> list[RowsRemoved]:
        return [RowsRemoved(f) for f in files if isinstance(f, RowRead)]

    @staticmethod
    def set_app_version(app_id: str, number: int) -> AppVersion:
        return AppVersion(app_id, int(number))

    def app_version(self, app_id: str) -> int:
        """The largest number recorded for ``app_id`` (-1: none): its write mark, one query. The
        commit fences it: setting it then is a compare-and-set against what was read."""
        found = self._mark_reads(app_id).get(app_id)
        self._marks_read[app_id] = None if found is None else (found[0], found[2])
        return -1 if found is None else found[0]

    def app_versions(self, prefix: str) -> dict[str, tuple[int, int | None]]:
        """The write marks of the application ids starting with ``prefix``: each one's number and
        last update (ms), one query over the marks partition."""
        return {a: (n, updated) for a, (n, updated, _) in self._mark_reads(prefix).items()}

    def _mark_reads(self, prefix: str) -> dict[str, tuple[int, int | None, int]]:
        rows = (read(self.spark, self.path)
                .where((F.col("segment_id") == MARKS_SEGMENT) & F.col("writer_id").startswith(prefix))
                .groupBy("writer_id").agg(F.max(F.struct(
                    F.coalesce("rel_event_offset", F.lit(0)).alias("generation"), "rel_offset", "rel_next_offset"))
                    .alias("latest"))
                .collect())
        # a mark is its row of the largest generation (marks are appended: ``fenced_insert``)
        return {r["writer_id"]: (int(r["latest"]["rel_offset"]), None if r["latest"]["rel_next_offset"] is None
                                 else int(r["latest"]["rel_next_offset"]), int(r["latest"]["generation"]))
                for r in rows}

    # ---- files placed by hand: the classic transaction's; no public API offers them -----------
    @staticmethod
    def _refuse(verb: str):
        raise NotImplementedError(f"{verb}: the public-API backend places no files (its callers check "
                                  "``places_files``)")

    def files_in(self, column: str, values: list[int]):
        self._refuse("files_in")

    def files_where(self, predicate: str | None):
        self._refuse("files_where")

    def read_files_in(self, column: str, values: list[int]):
        self._refuse("read_files_in")

    def partition_files_since(self, column: str, values: list[int], after_version: int, limit: int | None = None):
        self._refuse("partition_files_since")

    def unfenced_files(self) -> list[FileEntry]:
        """Every data file of the table now, from a query of its rows' file metadata
        (``_metadata``: path, size, modification time) and partition values: no log read."""
        return data_files(self.spark, self.path)

    def track_files(self, files: Sequence):
        self._refuse("track_files")

    def read_files(self, files: Sequence):
        self._refuse("read_files")

    def write(self, df: DataFrame, partition_by: tuple[str, ...]):
        self._refuse("write")

    def record_metrics(self, metrics: dict[str, int]):
        self._refuse("record_metrics")

    def commit_new_table(self, schema: StructType, partition_by: tuple[str, ...], properties: dict[str, str], adds: list):
        self._refuse("commit_new_table")

    def commit(self, adds: Sequence | None, partition_by: tuple[str, ...] = (), extra: Sequence | None = None,
               delete_predicate: str | None = None) -> int:
        """One MERGE (or INSERT) with this transaction's fence. Returns None (the new version would
        cost a query), or for a commit of nothing the empty commit's version.

        Raises:
            Retry: the tails read are stale (a concurrent append or seal): nothing was written.
            An error naming ``STALE`` (a conflict for ``retrying``): the rows read changed.
        """
        new = [a for a in (adds or []) if isinstance(a, NewRows)]
        removed = [e.read for e in (extra or []) if isinstance(e, RowsRemoved)]
        apps = [e for e in (extra or []) if isinstance(e, AppVersion)]
        if delete_predicate is not None or any(not isinstance(e, (RowsRemoved, AppVersion)) for e in (extra or [])):
            raise NotImplementedError("committing files placed by hand on the public-API backend")
        schema = new[0].schema if new else None
        rows = [r for n in new for r in n.rows]
        if self._tails is not None or (apps and not self._reads):
            if rows or apps:
                self.insert_frame(local_frame(self.spark, rows, schema) if rows else None, apps)
        elif self._reads:
            if apps:
                raise NotImplementedError("an application version with a compare-and-set of rows on the "
                                          "public-API backend")
            self._commit_rows(rows, schema, removed)
        elif rows:
            local_frame(self.spark, rows, schema).write.format("delta").mode("append").save(self.path)
            self.inserted = len(rows)
        else:
            return self.empty_commit()
        return None  # the version would cost a query: no caller of a Connect commit needs it

    def empty_commit(self) -> int:
        """Commit nothing (a version that adds no data) and return that version, found in the
        table's history by a token recorded with it."""
        import uuid

        token = f"pravega-spark-empty-{uuid.uuid4()}"
        target = read(self.spark, self.path)
        target.limit(0).write.format("delta").mode("append").option("userMetadata", token).save(self.path)
        found = (self.spark.sql(f"DESCRIBE HISTORY {table(self.path)} LIMIT 20")
                 .where(F.col("userMetadata") == token).select("version").collect())
        if not found:
            raise Retry(f"{self.path}: the empty commit was not found in the latest 20 versions")
        return int(found[0][0])

    def _commit_rows(self, rows: list[tuple], schema: StructType | None, removed: list[RowRead]) -> None:
        target = read(self.spark, self.path)
        names = target.columns
        fields = {f.name: f for f in target.schema.fields}
        fence = " OR ".join(f"({r.fence})" for r in self._reads)
        known = sorted({fp for r in self._reads for fp in r.fingerprints})
        gone = {r.fingerprint for r in removed}
        control = StructType([StructField(n, fields[n].dataType, True) for n in names] + [
            StructField("__op", StringType(), False), StructField(FINGERPRINT, LongType(), True),
            StructField("__fps", ArrayType(LongType(), False), True), StructField("__del", BooleanType(), True)])
        blank = (None,) * len(names)
        source_rows = [(*blank, "c", None, known, False)]
        source_rows += [(*blank, "r", fp, None, fp in gone) for fp in known]
        order = schema.fieldNames() if schema is not None else names
        for row in rows:
            values = dict(zip(order, row, strict=True))
            source_rows.append((*(values.get(n) for n in names), "n", None, None, False))
        source = local_frame(self.spark, source_rows, control)
        fp = f"xxhash64({', '.join(f't.`{n}`' for n in names)})"
        first = f"`{names[0]}`"
        stale = f"raise_error('{STALE} of {self.path.replace(chr(39), '')}')"
        cols = ", ".join(f"`{n}`" for n in names)
        values = ", ".join(f"s.`{n}`" for n in names)
        self.spark.sql(
            f"MERGE INTO {table(self.path)} AS t USING {{source}} AS s "
            f"ON ({fence}) AND ((s.__op = 'c' AND NOT array_contains(s.__fps, {fp})) "
            f"OR (s.__op = 'r' AND {fp} = s.{FINGERPRINT})) "
            f"WHEN MATCHED AND s.__op = 'c' THEN UPDATE SET t.{first} = {stale} "
            f"WHEN MATCHED AND s.__del THEN DELETE "
            f"WHEN NOT MATCHED AND s.__op = 'r' THEN INSERT ({first}) VALUES ({stale}) "
            f"WHEN NOT MATCHED AND s.__op = 'n' THEN INSERT ({cols}) VALUES ({values})",
            source=source)  # a command runs when sent: its result (counts) is not needed


# Delta's error when a target row matches several source rows: in ``fenced_insert`` it can only
# mean a row past a tail (or a seal) in the fenced region, i.e. stale tails
MULTIPLE_MATCHES = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


# Write numbers on this backend ride in the rows, never in a session setting (Delta's
# idempotent-DML settings ``spark.databricks.delta.write.txnAppId/txnVersion`` are refused on
# serverless): an application id's number is one row of the events table, its *write mark*, in a
# partition no segment or transaction staging area uses (``segment_id = MARKS_SEGMENT``, below
# every staging partition), ``base_offset = end_offset`` = a slot hashed from the id.
# ``writer_id`` holds the id, ``rel_offset`` the number, ``rel_next_offset`` its time (ms),
# ``rel_event_offset`` the row's generation. The fenced MERGE that inserts a write also fences its
# mark's slot and appends the mark's new row in the same commit (the latest row, the largest
# generation, is the mark); a number not above the mark's fails it (nothing written).
MARKS_SEGMENT = -(1 << 62) - 1
RECORD_WRITE_MARK = -5
DUPLICATE = "PRAVEGA_SPARK_DUPLICATE_WRITE"


def mark_slot(app_id: str) -> int:
    """The marks partition's ``base_offset`` for ``app_id`` (several ids may share one: the
    mark is matched by ``writer_id`` too)."""
    return zlib.crc32(app_id.encode("utf-8"))


def mark_row(spark: SparkSession, schema: StructType, app: AppVersion, generation: int) -> DataFrame:
    """``app``'s write mark, generation ``generation``, as a one-row DataFrame of the events
    table's ``schema``."""
    slot = mark_slot(app.app_id)
    values = {"segment_id": MARKS_SEGMENT, "base_offset": slot, "end_offset": slot, "rel_offset": int(app.version),
              "rel_next_offset": int(app.last_updated), "record_type": RECORD_WRITE_MARK, "writer_id": app.app_id,
              "rel_event_offset": int(generation),
              "write_time": datetime.fromtimestamp(app.last_updated / 1000, tz=timezone.utc)}
    return spark.createDataFrame([tuple(values.get(f.name) for f in schema.fields)], schema)


def mark_generation(app: AppVersion, expected: Mapping[str, tuple[int, int] | None]) -> int:
    """The generation of ``app``'s new mark row: one above the generation read for a
    compare-and-set (0 for a mark read as absent); a write number's is the number itself (write
    numbers only grow, and an older store's single row counted at most one update per number)."""
    if app.app_id not in expected:
        return int(app.version)
    read_as = expected[app.app_id]
    return 0 if read_as is None else int(read_as[1]) + 1


def fenced_insert(spark: SparkSession, path: str, source: DataFrame | None, column: str, tails: Mapping[int, int],
                  seal_type: int | None = 1, numbered: bool = True, end_column: str = "end_offset",
                  start_column: str | None = "base_offset", marks: Sequence[AppVersion] = (),
                  expected: Mapping[str, tuple[int, int] | None] | None = None) -> int:
    """Insert ``source``'s rows unless a row of one of the ``tails``' segments ends after its tail
    or seals it (one MERGE, fenced on those segments); the rows inserted, -1 when a write number
    of ``marks`` was recorded already.

    The ON clause's partition-only conjuncts (the segments, and each one's region at or after its
    tail) are the commit's read predicate: a concurrent add there fails it with Delta's
    ``ConcurrentAppendException``. The data conjunct closes the window between reading the tails
    and the MERGE's snapshot: such a row matches every source row, and ``WHEN MATCHED`` raises, so
    the command fails and commits nothing. (An insert-only MERGE would insert nothing and still
    commit.) The source is read once, when nothing matched, so it is not materialized first.
    ``numbered=False``: an insert-only MERGE (one pass over the source); stale, it inserts nothing
    and commits an empty version, which harms no one.

    ``marks`` (application versions, see ``MARKS_SEGMENT``): each mark's slot joins the fence and
    its new row joins the source: a mark is *appended*, never updated, so the commit removes no
    file (Delta's streaming source skips every add of a commit that removes one: the events it
    inserts would never reach a query). A mark's latest row is its largest generation
    (``mark_generation``). A mark whose id is in ``expected`` is a compare-and-set: a row of a
    later generation than the one read (any row, when read as absent) matches, and the MERGE
    raises ``STALE`` (nothing written; the caller reads again). Any other mark is a write number:
    a row with this number or a larger one matches, and the MERGE raises ``DUPLICATE`` (nothing
    written). A stale MERGE fails whole, so no mark is ever recorded without its rows. Marks are
    never deleted.

    The events table's columns are the defaults; a key-value table passes ``end_column="version"``,
    no ``start_column`` (no region within a partition) and no ``seal_type``. No ``tails``: only
    the marks fence the commit (rows staged in a partition of their own).

    Raises:
        Retry: the tails moved, a segment was sealed, or a compare-and-set mark changed: nothing
            was written.
    """
    expected = dict(expected or {})
    # the source's own session runs the statement (a ``foreachBatch`` batch lives in a session of
    # its own, where its view is registered)
    session = (getattr(source, "sparkSession", None) if source is not None else None) or spark
    if source is None:
        source = session.createDataFrame([], read(session, path).schema)
    ids = sorted(int(s) for s in tails)
    fences, conditions = [], []
    if ids:
        region = "true" if start_column is None else " OR ".join(
            f"(t.`{column}` = {s} AND t.`{start_column}` >= {int(tails[s])})" for s in ids)
        ends = " ".join(f"WHEN {s} THEN {int(tails[s])}" for s in ids)
        sealed = "" if seal_type is None else f" OR t.record_type = {int(seal_type)}"
        fences.append(f"t.`{column}` IN ({', '.join(map(str, ids))}) AND ({region})")
        conditions.append(f"(t.`{column}` <> {MARKS_SEGMENT} AND (t.`{end_column}` > CASE t.`{column}` {ends} END"
                          f"{sealed}))")
    stale = f"raise_error('{STALE}: tails moved')"
    clauses = ""
    if marks:
        slots = sorted({mark_slot(m.app_id) for m in marks})
        for m in marks:
            source = source.unionByName(mark_row(session, source.schema, m, mark_generation(m, expected)))
        fences.append(f"(t.`{column}` = {MARKS_SEGMENT} AND t.base_offset IN ({', '.join(map(str, slots))}))")
        conditions.append(f"(t.`{column}` = {MARKS_SEGMENT} AND s.`{column}` = {MARKS_SEGMENT} "
                          f"AND t.writer_id = s.writer_id AND {_mark_conflict(marks, expected)})")
        clauses = _mark_clauses(column, marks, expected)
    if not fences:
        raise ValueError("fenced_insert needs tails or marks")
    fence = " OR ".join(f"({f})" for f in fences)
    moved = " OR ".join(conditions)
    # a write without a number may commit nothing when stale (an empty version, harmless): it
    # keeps Delta's insert-only MERGE, one pass over the source
    matched = f"WHEN MATCHED THEN UPDATE SET t.`{end_column}` = {stale} " if numbered or marks else ""
    try:
        result = session.sql(
            f"MERGE INTO {table(path)} AS t USING {{source}} AS s ON ({fence}) AND ({moved}) "
            f"{clauses}{matched}WHEN NOT MATCHED THEN INSERT *", source=source)
        result = command_rows(result)
    except Exception as exc:
        if raised(exc, DUPLICATE):
            return -1
        if raised(exc, STALE) or MULTIPLE_MATCHES in str(exc).split("\n", 1)[0]:
            raise Retry(f"{path}: tails or marks moved since they were read") from None
        raise
    inserted = int(result[0]["num_inserted_rows"]) if result else 0
    inserted -= len(marks)  # the marks' own rows
    if inserted == 0 and not numbered and not marks and not source.isEmpty():
        raise Retry(f"{path}: tails moved since they were read")
    return inserted


def _mark_conflict(marks: Sequence[AppVersion], expected: Mapping[str, tuple[int, int] | None]) -> str:
    """The condition on a target mark row ``t`` that refuses the new mark ``s`` of its id (see
    ``fenced_insert``): a later generation than the one read (a compare-and-set), any row (read as
    absent), or a number at or above the new one (a write number)."""
    whens = []
    for m in marks:
        if m.app_id not in expected:
            test = "t.rel_offset >= s.rel_offset"
        elif expected[m.app_id] is None:
            test = "true"
        else:
            test = f"coalesce(t.rel_event_offset, 0) > {int(expected[m.app_id][1])}"
        whens.append(f"WHEN {literal(m.app_id)} THEN {test}")
    return f"(CASE t.writer_id {' '.join(whens)} ELSE false END)"


def _mark_clauses(column: str, marks: Sequence[AppVersion], expected: Mapping[str, tuple[int, int] | None]) -> str:
    """The MERGE clause that refuses a mark whose row conflicts (``_mark_conflict``): ``STALE``
    for a compare-and-set, ``DUPLICATE`` for a write number."""
    whens = " ".join(f"WHEN {literal(m.app_id)} THEN {literal(f'{STALE}: mark {m.app_id} changed')}"
                     for m in sorted(marks, key=lambda m: m.app_id) if m.app_id in expected)
    refusal = f"CASE t.writer_id {whens} ELSE {literal(DUPLICATE)} END" if whens else literal(DUPLICATE)
    return f"WHEN MATCHED AND t.`{column}` = {MARKS_SEGMENT} THEN UPDATE SET t.rel_offset = raise_error({refusal}) "


def app_versions(spark: SparkSession, path: str, prefix: str) -> dict[str, tuple[int, int | None]]:
    """Application versions (Delta's ``SetTransaction``) recorded in the table's log for ids
    starting with ``prefix``: the largest version of each and its last update (ms). One query
    over the log's JSON commits and checkpoints (the log must be readable as files by the
    server: a path-based table, as a store's tables are)."""
    quiet_client_logs()
    log_dir = path.rstrip("/") + "/_delta_log"
    found: dict[str, tuple[int, int | None]] = {}
    for reader in (lambda: spark.read.json(log_dir + "/*.json"),
                   lambda: spark.read.parquet(log_dir + "/*.checkpoint*.parquet")):
        try:
            df = reader()
            if "txn" not in df.columns:
                continue
            rows = (df.where(F.col("txn").isNotNull() & F.col("txn.appId").startswith(prefix))
                    .groupBy(F.col("txn.appId").alias("app"))
                    .agg(F.max("txn.version").alias("version"), F.max("txn.lastUpdated").alias("updated")).collect())
        except Exception as exc:  # noqa: BLE001 - no checkpoint yet (or no commit) matches the glob
            if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
                continue
            raise
        for r in rows:
            seen = found.get(r["app"])
            if seen is None or int(r["version"]) > seen[0]:
                found[r["app"]] = (int(r["version"]), None if r["updated"] is None else int(r["updated"]))
    return found


def truncate(spark: SparkSession, path: str, column: str, below: Mapping[int, int | None]) -> tuple[int | None, dict]:
    """Delete, in each segment of ``below``, the rows below its offset (None: all its rows), as
    Spark Connect can: DELETEs whose conditions are partition values only, so appends (always at
    or above every start) never conflict with them. First the files wholly below (metadata only),
    then the rows below the offset in each file straddling it (that file rewritten without them).
    Returns the last version written (None: nothing to delete) and the rows deleted."""
    whole, straddle = [], []
    for sid, start in sorted(below.items()):
        if start is None:
            whole.append(f"`{column}` = {int(sid)}")
        else:
            whole.append(f"(`{column}` = {int(sid)} AND (end_offset < {int(start)} OR "
                         f"(end_offset = {int(start)} AND base_offset < {int(start)})))")
            straddle.append((int(sid), int(start)))
    last, deleted = delete_where(spark, path, " OR ".join(whole))
    if straddle:
        where = " OR ".join(f"(`{column}` = {s} AND base_offset < {o} AND end_offset > {o})" for s, o in straddle)
        files = (read(spark, path).where(where).select(column, "base_offset", "end_offset").distinct().collect())
        starts = dict(straddle)
        if files:
            condition = " OR ".join(
                f"(`{column}` = {int(f[0])} AND base_offset = {int(f[1])} AND end_offset = {int(f[2])} "
                f"AND rel_offset < {starts[int(f[0])] - int(f[1])})" for f in files)
            version_after, more = delete_where(spark, path, condition)
            last = version_after if version_after is not None else last
            deleted = {"numDeletedRows": deleted["numDeletedRows"] + more["numDeletedRows"]}
    return last, deleted


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


def rewrite_where(spark: SparkSession, path: str, rows: DataFrame, condition: str) -> None:
    """Replace the table's rows matching ``condition`` (partition values only) by ``rows``, in
    one commit that changes no data (``dataChange=false``: Delta's streaming source skips it).
    Its read predicate is ``condition``: a concurrent removal there makes it conflict."""
    (rows.write.format("delta").mode("overwrite").option("replaceWhere", condition)
     .option("dataChange", "false").save(path))


# ---- marks in a table of any schema with scope, stream and segment_id (a reader group's sink) -----
# A sink's positions and owner tokens on the public-API backend: one row per mark in the sink's
# own table, ``scope = SINK_MARK_SCOPE`` (no Pravega scope contains a ``/``), ``stream`` the
# mark's id, ``segment_id`` its value, every other column null. Its rows and its marks change in
# one MERGE, a compare-and-set of the marks read.
SINK_MARK_SCOPE = "pravega-spark/mark"


def marks_in(spark: SparkSession, path: str, prefix: str) -> dict[str, int]:
    """The marks of ``path`` whose id starts with ``prefix`` (one query)."""
    rows = (read(spark, path).where((F.col("scope") == SINK_MARK_SCOPE) & F.col("stream").startswith(prefix))
            .select("stream", "segment_id").collect())
    return {r[0]: int(r[1]) for r in rows}


def _zero(data_type):
    """A value of ``data_type`` for a mark row's NOT NULL column that is not one of its own."""
    from pyspark.sql.types import BinaryType, DateType, NumericType, TimestampType

    if isinstance(data_type, NumericType):
        return 0
    if isinstance(data_type, StringType):
        return ""
    if isinstance(data_type, BinaryType):
        return b""
    if isinstance(data_type, BooleanType):
        return False
    if isinstance(data_type, (TimestampType, DateType)):
        return datetime(1970, 1, 1, tzinfo=timezone.utc) if isinstance(data_type, TimestampType) else datetime(1970, 1, 1).date()
    return None


def merge_marked(spark: SparkSession, path: str, rows: DataFrame | None, marks: Mapping[str, int],
                 expected: Mapping[str, int | None]) -> None:
    """Append ``rows`` and set ``marks`` in one MERGE, if every mark of ``expected`` still has
    the value read (None: absent).

    Raises:
        Retry: a mark read changed since (nothing was written).
    """
    session = (rows.sparkSession if rows is not None else None) or spark
    schema = read(session, path).schema
    filler = {f.name: None if f.nullable else _zero(f.dataType) for f in schema.fields}  # NOT NULL columns
    marked = session.createDataFrame(
        [tuple({**filler, "scope": SINK_MARK_SCOPE, "stream": a, "segment_id": int(v)}[n] for n in schema.names)
         for a, v in sorted(marks.items())], schema)
    source = marked if rows is None else rows.unionByName(marked, allowMissingColumns=True)
    checks = " ".join(f"WHEN {literal(a)} THEN " + ("false" if v is None else f"t.segment_id = {int(v)}")
                      for a, v in sorted(expected.items()))
    allowed = f"CASE t.stream {checks} ELSE true END" if checks else "true"
    present = [a for a, v in sorted(expected.items()) if v is not None and a in marks]
    gone = (f"WHEN NOT MATCHED AND s.scope = {literal(SINK_MARK_SCOPE)} AND s.stream IN "
            f"({', '.join(literal(a) for a in present)}) THEN INSERT (scope) VALUES (raise_error('{STALE}: a mark is gone')) "
            if present else "")
    try:
        session.sql(
            f"MERGE INTO {table(path)} AS t USING {{source}} AS s ON t.scope = {literal(SINK_MARK_SCOPE)} "
            f"AND s.scope = {literal(SINK_MARK_SCOPE)} AND t.stream = s.stream "
            f"WHEN MATCHED AND ({allowed}) THEN UPDATE SET t.segment_id = s.segment_id "
            f"WHEN MATCHED THEN UPDATE SET t.segment_id = raise_error('{STALE}: a mark changed') "
            f"{gone}WHEN NOT MATCHED THEN INSERT *", source=source)  # runs when sent
    except Exception as exc:
        if raised(exc, STALE):
            raise Retry(f"{path}: marks changed since they were read") from None
        raise


# ---- public SQL that both backends use --------------------------------------------------------
def delete_matching(spark: SparkSession, path: str, source: DataFrame, on: list[str]) -> int:
    """Delete the table's rows equal on ``on`` to a row of ``source`` (one MERGE, public SQL:
    both backends); returns the rows deleted. A concurrent commit to the files it rewrites makes
    it conflict (retry it)."""
    condition = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on)
    target = table(path)
    result = command_rows(spark.sql(f"MERGE INTO {target} AS t USING {{source}} AS s ON {condition} "
                                    "WHEN MATCHED THEN DELETE", source=source))
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
