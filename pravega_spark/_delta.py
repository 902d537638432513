"""Delta access: the one module that imports ``delta.tables`` or handles commit conflicts.

Every other module describes *what* to commit (a DataFrame and a guard condition); this module
runs the commit, recognises Delta's optimistic-concurrency conflicts (which share no Python base
class) and retries with bounded exponential backoff.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .errors import RetriesExhaustedError, TableLocationError

log = logging.getLogger("pravega_spark")

T = TypeVar("T")

CONFLICTS: tuple[type[BaseException], ...] = (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    ConcurrentDeleteDeleteException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    MetadataChangedException,
    ProtocolChangedException,
    DeltaConcurrentModificationException,
)

# Delta lists a table's application versions (SetTransaction) in each commit's checksum file only
# up to this many; ``DeltaTransaction.app_version`` reads them from there (no Spark job). Every session
# that commits to an events table sets it (see ``writer.WRITER_CONF`` and ``StreamManager``).
CRC_APP_VERSIONS_CONF = "spark.databricks.delta.setTransactionsInCrc.maxAllowed"
CRC_APP_VERSIONS = "10000"

# Delta can also list a small table's files in each commit's checksum file. Catalog tables (one
# file per stream row, one per segments table) and young events tables stay under the threshold,
# so their files, tails and rows are found without a Spark job (``DeltaTransaction.all_files``); a
# bigger table falls back to a query over the snapshot.
SESSION_CONF = {
    CRC_APP_VERSIONS_CONF: CRC_APP_VERSIONS,
    "spark.databricks.delta.allFilesInCrc.enabled": "true",
    "spark.databricks.delta.allFilesInCrc.thresholdNumFiles": "1000",
}


def configure_session(spark: SparkSession) -> None:
    """Apply ``SESSION_CONF`` to a session that commits to a store's tables."""
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)


def qualify(spark: SparkSession, path: str) -> str:
    """``path`` made absolute and qualified by its file system (Hadoop's ``makeQualified``):
    ``store/demo`` -> ``file:/home/me/store/demo``; ``dbfs:/``, ``s3a://``, ``abfss://`` paths keep
    their scheme and authority. Delta takes a relative path for a table name, so every table path
    is built on a qualified root."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not hadoop_path.isAbsolute() and str(fs.getUri().getScheme()) == "file":
        # relative to this Python process's working directory (the JVM's may differ after a chdir)
        hadoop_path = jvm.org.apache.hadoop.fs.Path(os.path.abspath(path))
    return str(fs.makeQualified(hadoop_path).toString()).rstrip("/")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter."""

    attempts: int = 30
    initial_backoff: float = 0.05
    max_backoff: float = 2.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_backoff, self.initial_backoff * (2**attempt)))


DEFAULT_RETRY = RetryPolicy()


class Retry(Exception):
    """Raised inside a retried step to ask for another attempt (e.g. a stale read was detected)."""


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Delta's optimistic-concurrency conflicts."""
    if isinstance(exc, CONFLICTS):
        return True
    # Table creation races surface as a file-already-exists from the log store; conflicts from a
    # transaction driven through the JVM (see ``DeltaTransaction``) arrive as a Py4J error naming them.
    text = str(exc)
    return ("FileAlreadyExistsException" in text or "DELTA_CONCURRENT" in text
            or any(f"exceptions.{cls.__name__}" in text for cls in CONFLICTS))


def retrying(step: Callable[[], T], what: str, policy: RetryPolicy = DEFAULT_RETRY) -> T:
    """Run ``step`` until it succeeds, retrying on Delta conflicts and :class:`Retry`.

    Raises:
        RetriesExhaustedError: after ``policy.attempts`` conflicting attempts. Each attempt is a
            single Delta commit or none, so nothing is half-written.
    """
    last: BaseException | None = None
    for attempt in range(policy.attempts):
        try:
            return step()
        except Retry as exc:
            last = exc
            log.debug("%s: retry %d (%s)", what, attempt + 1, exc)
        except Exception as exc:  # noqa: BLE001 - filtered right below
            if not is_conflict(exc):
                raise
            last = exc
            log.debug("%s: conflict on attempt %d: %s", what, attempt + 1, type(exc).__name__)
        if attempt + 1 < policy.attempts:
            time.sleep(policy.delay(attempt))
    raise RetriesExhaustedError(
        f"{what}: gave up after {policy.attempts} attempts conflicting with concurrent writers "
        f"(last: {type(last).__name__}: {str(last).splitlines()[0] if last else ''}); nothing was "
        "written by this call") from last


def is_table(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


def create_table(spark: SparkSession, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
    """Create the Delta table at ``path`` unless one exists; True if this call created it.

    Safe to race between processes and machines (``tests/test_first_use_race.py``). Version 0,
    the table's metadata and ``rows`` (tuples in ``schema``'s order, if any), is one commit that
    the log store writes only if absent, so of several creators exactly one writes it; the others'
    commits conflict, and their retry finds the table and uses it. A location that is becoming a
    table (an empty ``_delta_log/``, or a creator's data files not yet committed) is a race, not
    an error: this call competes for version 0 like any creator, and never deletes anything. (It
    does not use Delta's ``createIfNotExists``, which refuses such a location.)

    Raises:
        TableLocationError: the location holds something that is not a table being created (a
            plain file, or a folder with other files); nothing is written.
        RetriesExhaustedError: the creation kept conflicting (see ``retrying``).
    """
    def attempt() -> bool:
        txn = DeltaTransaction(spark, path)
        if txn.read_version >= 0:
            return False
        check_table_location(spark, path)
        adds = txn.write_rows(rows, schema, partition_by) if rows else []
        txn.commit_new_table(schema, partition_by, properties or {}, adds)
        return True

    return retrying(attempt, f"create table {path}")


def _is_delta_entry(name: str, is_dir: bool) -> bool:
    """Whether a Delta writer makes an entry of this name in a table's folder: its log, hidden and
    underscored files (checksums, markers), data files, partition folders."""
    return name.startswith(("_", ".")) or (name.startswith("part-") and not is_dir) or (is_dir and "=" in name)


def check_table_location(spark: SparkSession, path: str) -> None:
    """Refuse a location holding anything but what a Delta writer makes (``TableLocationError``).

    A folder whose entries are all a Delta writer's (``_delta_log/``, data files, partition
    folders) may be becoming a table in another process: it passes."""
    fs, p = _fs(spark, path)
    if not fs.exists(p):
        return
    status = fs.getFileStatus(p)
    if not status.isDirectory():
        raise TableLocationError(f"cannot create a table at {path}: a file is there")
    entries = fs.listStatus(p)
    stray = sorted(str(e.getPath().getName()) for e in entries
                   if not _is_delta_entry(str(e.getPath().getName()), bool(e.isDirectory())))
    if stray:
        shown = ", ".join(stray[:5]) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
        raise TableLocationError(f"cannot create a table at {path}: it holds {shown}, which is not a Delta "
                                 "table's; move it away and try again")


def read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The table at ``path`` (at ``version`` if given) as a DataFrame."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def latest(spark: SparkSession, path: str) -> tuple[int, str]:
    """The table's latest committed version and its table id, from the log alone (no Spark job).

    The id changes when a table is deleted and created again at the same path, so the pair
    identifies one state of one table: a safe key for caching anything read from it.
    """
    snap = snapshot(spark, path)
    return int(snap.version()), str(snap.metadata().id())


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the JVM thread serving this Python thread (a
    listener's callback thread has none, and Delta's log reads need one)."""
    sessions = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession
    sessions.setActiveSession(spark._jsparkSession)
    if not sessions.getDefaultSession().isDefined():
        sessions.setDefaultSession(spark._jsparkSession)


def snapshot(spark: SparkSession, path: str, version: int | None = None):  # -> Snapshot JVM object
    """The table's latest snapshot, or the one at ``version`` (log reads; no Spark job)."""
    jvm = spark.sparkContext._jvm
    none = jvm.scala.Option.empty()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    if version is None:
        return delta_log.update(False, none, none)
    return delta_log.getSnapshotAt(int(version), none, none, False)


def file_changes(spark: SparkSession, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
    """``(version, adds, removes)`` of each commit of the table at ``path`` in versions
    ``[start, end]``: the file actions as their log JSON (log reads; no Spark job)."""
    if end < start:
        return []
    jvm = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    changes = delta_log.getChanges(int(start), int(end), jvm.scala.Option.empty(), True)
    out = []
    while changes.hasNext():
        change = changes.next()
        adds, removes = [], []
        actions = change._2()
        for i in range(actions.size()):
            entry = json.loads(actions.apply(i).json())
            if "add" in entry:
                adds.append(entry["add"])
            elif "remove" in entry:
                removes.append(entry["remove"])
        out.append((int(change._1()), adds, removes))
    return out


def recent_changes(spark: SparkSession, path: str, since_ms: int, keep) -> list[tuple[int, list[dict], list[dict]]]:
    """The newest commits of the table at ``path`` (as ``file_changes``, oldest first), read
    backwards from the latest version until a commit whose adds that ``keep(adds, removes)``
    returns are all older than ``since_ms`` (their ``modificationTime``), or the log's start: the
    cost follows the recent commits, not the table's history. Versions are read in chunks of 1,
    2, 4, ... 64, so little of the history is decoded past the window."""
    latest = int(snapshot(spark, path).version())
    out: list[tuple[int, list[dict], list[dict]]] = []
    hi, chunk = latest, 1
    while hi >= 0:
        lo = max(0, hi - chunk + 1)
        try:
            changes = file_changes(spark, path, lo, hi)
        except Exception as exc:  # noqa: BLE001 - older log files already cleaned up
            log.debug("no log before version %d of %s (%s)", hi, path, exc)
            break
        for version, adds, removes in reversed(changes):
            kept = keep(adds, removes)
            if kept and max(int(a.get("modificationTime", 0)) for a in kept) < since_ms:
                return out[::-1]
            out.append((version, adds, removes))
        hi, chunk = lo - 1, min(chunk * 2, 64)
    return out[::-1]


def wait_for_listeners(spark: SparkSession, timeout_seconds: float) -> bool:
    """Wait until the session's listener bus has delivered every event posted so far (Spark posts
    streaming progress to listeners asynchronously); False if ``timeout_seconds`` passed first."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(timeout_seconds * 1000))
        return True
    except Exception:  # noqa: BLE001 - py4j wraps the JVM's TimeoutException
        return False


def exists(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table exists at ``path`` (a log listing; no Spark job)."""
    return int(snapshot(spark, path).version()) >= 0


def crc_files(snap) -> list | None:
    """A snapshot's files as listed by its checksum file (no Spark job), or None if not listed."""
    checksum = snap.checksumOpt()
    if not checksum.isDefined() or not checksum.get().allFiles().isDefined():
        return None
    files = checksum.get().allFiles().get()
    return [files.apply(i) for i in range(files.size())]


def partition_value(file, column: str) -> str | None:
    value = file.partitionValues().get(column)
    return value.get() if value.isDefined() else None


def file_stats(file) -> dict:
    """A file's statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) as a
    dict; empty if it has none."""
    stats = file.stats()
    return json.loads(stats) if stats else {}


_ROWS: dict[tuple[str, str], tuple] = {}
_ROWS_LIMIT = 20_000


def read_rows(spark: SparkSession, path: str, files: list) -> list[dict]:
    """The rows of a few small data files of the table at ``path`` (partition columns added), as
    dicts with Python values (timestamps aware UTC). A file never changes once written, so rows
    are kept per file path: reading the same files again costs nothing. The bytes are read through
    the table's Hadoop file system and decoded with pyarrow (no Spark job)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: list[dict] = []
    jvm = spark.sparkContext._jvm
    base = jvm.org.apache.hadoop.fs.Path(path)
    for f in files:
        key = (path, str(f.path()))
        rows = _ROWS.get(key)
        if rows is None:
            child = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(f.path()))
            full = child if child.isAbsolute() else jvm.org.apache.hadoop.fs.Path(base, child)
            fs = full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
            stream = fs.open(full)
            try:
                data = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()
            table = pq.read_table(pa.BufferReader(data))
            columns = []
            for field in table.schema:
                column = table.column(field.name)
                if pa.types.is_timestamp(field.type):
                    column = column.cast(pa.timestamp("us", tz="UTC"))
                columns.append(column)
            table = pa.table(columns, names=table.schema.names)
            parts = {k: v for k, v in _scala_map(f.partitionValues()).items()}
            rows = tuple({**r, **parts} for r in table.to_pylist())
            if len(_ROWS) >= _ROWS_LIMIT:
                _ROWS.clear()
            _ROWS[key] = rows
        out.extend(dict(r) for r in rows)
    return out


def session_key(spark: SparkSession) -> int:
    """A key of the session's JVM side (two Python handles of one session share it)."""
    return id(spark._jsparkSession) if hasattr(spark, "_jsparkSession") else id(spark)


def is_stopped(spark: SparkSession) -> bool:
    """Whether the session's SparkContext has stopped."""
    return bool(spark.sparkContext._jsc.sc().isStopped())


def plan_leaves(df: DataFrame) -> list[str]:
    """The class names of the leaves of ``df``'s optimized plan (``LocalRelation``, ...)."""
    leaves = df._jdf.queryExecution().optimizedPlan().collectLeaves()
    return [leaves.apply(i).getClass().getSimpleName() for i in range(leaves.size())]


def estimated_size(df: DataFrame) -> int | None:
    """Spark's own size estimate of ``df``'s optimized plan in bytes (no job), or None."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()  # a Scala BigInt
        return int(size if isinstance(size, int) else str(size.toString()))
    except Exception:  # noqa: BLE001 - no estimate
        return None


def in_session(df: DataFrame, session: SparkSession) -> DataFrame:
    """``df``'s (analyzed) plan as a DataFrame of ``session``, so that a commit, its settings and
    its observed metrics all live in that session."""
    if df.sparkSession is session:
        return df
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    jvm = session.sparkContext._jvm
    jdf = getattr(jvm, "org.apache.spark.sql.classic.Dataset").ofRows(
        session._jsparkSession, df._jdf.queryExecution().analyzed())
    return ClassicDataFrame(jdf, session)


def _scala_map(m) -> dict:
    out = {}
    it = m.iterator()
    while it.hasNext():
        kv = it.next()
        out[kv._1()] = kv._2()
    return out


def version(spark: SparkSession, path: str) -> int:
    """The table's latest committed version."""
    return latest(spark, path)[0]


@dataclass(frozen=True)
class CommitMetrics:
    """A commit's version and Delta's operation metrics (``DESCRIBE HISTORY``), as ints."""

    version: int | None
    metrics: dict[str, int]

    def get(self, name: str) -> int:
        return self.metrics.get(name, 0)


def vacuum(spark: SparkSession, path: str, retention_hours: float | None) -> None:
    """VACUUM the table; retention below the table's own window needs the safety check off.

    Runs in a session of its own: the retention check and the listing parallelism (the cluster's
    cores, not Spark's 10,000 tasks) are set for this VACUUM only.
    """
    session = spark.newSession()
    session.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism",
                     str(max(2, spark.sparkContext.defaultParallelism)))
    if retention_hours is not None:
        session.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    DeltaTable.forPath(session, path).vacuum(retention_hours)


_WRITE_SLICE = 1 << 20


def arrow_type(spark_type):
    """The pyarrow type Spark reads back as ``spark_type`` (the types of our tables)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    simple = {T.StringType: pa.string(), T.LongType: pa.int64(), T.IntegerType: pa.int32(),
              T.DoubleType: pa.float64(), T.BooleanType: pa.bool_(), T.BinaryType: pa.binary(),
              T.TimestampType: pa.timestamp("us", tz="UTC")}
    for kind, arrow in simple.items():
        if isinstance(spark_type, kind):
            return arrow
    if isinstance(spark_type, T.ArrayType):
        return pa.list_(arrow_type(spark_type.elementType))
    if isinstance(spark_type, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType)) for f in spark_type.fields])
    raise TypeError(f"no Arrow type for {spark_type}")


@dataclass(frozen=True)
class PartitionSummary:
    """What the log says about one partition's files: the largest value of an integer partition
    column (``end``), and the smallest and largest of one statistic over the files."""

    end: int
    low: int | None
    high: int | None


def summarize(files: list, column: str, values: list[int], end_column: str,
              stat: str) -> dict[int, PartitionSummary] | None:
    """Per value of ``column`` in ``values``: the largest ``end_column`` partition value and the
    extrema of ``stat`` over ``files`` (from the log: no data read). Partitions without files are
    absent. None if a file lacks statistics for ``stat``."""
    wanted = {int(v) for v in values}
    out: dict[int, PartitionSummary] = {}
    for f in files:
        part = partition_value(f, column)
        if part is None or int(part) not in wanted:
            continue
        stats = file_stats(f)
        low, high = (stats.get("minValues") or {}).get(stat), (stats.get("maxValues") or {}).get(stat)
        if low is None or high is None:
            if stats.get("numRecords", 1) != 0:
                return None
        end = int(partition_value(f, end_column))
        seen = out.get(int(part))
        if seen is not None:
            end = max(end, seen.end)
            low = seen.low if low is None else low if seen.low is None else min(low, seen.low)
            high = seen.high if high is None else high if seen.high is None else max(high, seen.high)
        out[int(part)] = PartitionSummary(end, low, high)
    return out


def summarize_snapshot(spark: SparkSession, snap, column: str, values: list[int], end_column: str,
                       stat: str) -> dict[int, PartitionSummary]:
    """``summarize`` over a snapshot too big for its checksum file to list its files: one
    aggregate over Delta's in-memory file list (the log's state, not the data)."""
    files = DataFrame(snap.withStats(), spark)
    part = F.col("partitionValues").getItem(column).cast("long")
    rows = (files.where(part.isin([int(v) for v in values])).groupBy(part.alias("p"))
            .agg(F.max(F.col("partitionValues").getItem(end_column).cast("long")).alias("end"),
                 F.min(F.col(f"stats.minValues.{stat}")).alias("low"),
                 F.max(F.col(f"stats.maxValues.{stat}")).alias("high"))
            .collect())
    return {int(r["p"]): PartitionSummary(int(r["end"]), r["low"], r["high"]) for r in rows}


def placed(add, values: dict[str, int | str], data_change: bool = True, modification_time: int | None = None):
    """The add action ``add`` (of a file written but not committed, or committed elsewhere) with
    these partition values set: a file's base offset is fixed this way, at commit, without
    touching its bytes. Delta reads partition values from the log, never from the path.

    ``modification_time`` (ms) replaces the file's: Delta's streaming source orders a table's
    initial snapshot by it, so commits set it in append order (``commit_times``)."""
    entry = json.loads(add.json())["add"]
    entry["partitionValues"] = {**entry["partitionValues"], **{k: str(v) for k, v in values.items()}}
    entry["dataChange"] = data_change
    if modification_time is not None:
        entry["modificationTime"] = int(modification_time)
    return add_from_json(json.dumps(entry))


# The clock of data files' modification times (seconds). Tests that need traffic at chosen times
# (auto-scaling's rates) replace it; nothing public sets it.
_clock = time.time


def clock() -> float:
    """The store's clock, in seconds since the epoch (``_clock``)."""
    return _clock()


def commit_times(segment_bases: Sequence[tuple[int, int]]) -> list[int]:
    """Modification times (ms) for the files a commit adds, given each file's ``(segment_id,
    base_offset)``: the commit's clock plus the file's rank among the commit's files of its
    segment, so within a segment later offsets get later times, in this commit and (commits to
    a segment being at least a commit's round trip apart) across commits. Delta's streaming
    source then reads an initial snapshot in append order even when a rate limit splits it."""
    now = int(_clock() * 1000)
    times = [0] * len(segment_bases)
    rank: dict[int, int] = {}
    for i in sorted(range(len(segment_bases)), key=lambda i: segment_bases[i]):
        sid = segment_bases[i][0]
        times[i] = now + rank.get(sid, 0)
        rank[sid] = rank.get(sid, 0) + 1
    return times


def add_json(add) -> str:
    """An add action as its JSON entry (what ``add_from_json`` takes back)."""
    return json.dumps(json.loads(add.json())["add"])


def add_from_json(entry: str):
    """The add action of a JSON entry (from ``add_json``), as Delta's ``Action``."""
    return SparkSession.getActiveSession().sparkContext._jvm.org.apache.spark.sql.delta.actions.Action.fromJson(
        json.dumps({"add": json.loads(entry)}))


def _fs(spark: SparkSession, path: str):  # -> (FileSystem, Path) JVM objects
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hadoop_path


def delete_files(spark: SparkSession, table_path: str, paths: list[str]) -> int:
    """Delete files that no commit references (table-relative or absolute paths) from storage
    right away; returns how many existed. For staged data discarded by an abort: nothing can
    read them, so there is no need to wait for VACUUM."""
    jvm = spark.sparkContext._jvm
    base = jvm.org.apache.hadoop.fs.Path(table_path)
    deleted = 0
    for p in paths:
        child = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(p))
        full = child if child.isAbsolute() else jvm.org.apache.hadoop.fs.Path(base, child)
        fs = full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        deleted += bool(fs.delete(full, False))
    return deleted


def remove_path(spark: SparkSession, path: str) -> bool:
    """Recursively delete ``path`` from storage (any Hadoop file system)."""
    fs, p = _fs(spark, path)
    return bool(fs.delete(p, True)) if fs.exists(p) else False


# ---- a Delta transaction driven directly -------------------------------------------------------
@dataclass(frozen=True)
class AddedFile:
    """A data file a transaction wrote: its partition, row count, per-column extrema, and its add
    action (Delta's ``AddFile``, not yet committed)."""

    partition: dict[str, str]
    num_records: int
    max_values: dict
    min_values: dict = None
    action: object = None

    @staticmethod
    def of(action) -> AddedFile:
        stats = json.loads(action.stats() or "{}")
        return AddedFile(_scala_map(action.partitionValues()), int(stats.get("numRecords", 0)),
                         stats.get("maxValues", {}), stats.get("minValues", {}), action)


class DeltaTransaction:
    """One optimistic transaction on a Delta table, driven through the JVM.

    This is the fenced append: the transaction declares which partitions it depends on
    (``track_partitions``), reads their state from file statistics (``partition_maxima``), writes
    its files and commits them. If a concurrent commit adds a file to a tracked partition after the
    transaction's snapshot, the commit fails with ``ConcurrentAppendException`` and nothing is
    written (the files are orphans that ``VACUUM`` removes). A plain append is never fenced, and a
    MERGE would read (and rewrite nothing but still scan) the data; this reads only the log.
    """

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        log_ = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
        self._txn = log_.startTransaction()

    def __repr__(self) -> str:
        return f"DeltaTransaction({self.path}, read_version={self.read_version})"

    @property
    def table_id(self) -> str:
        """The snapshot's table id (a table deleted and created again gets a new one)."""
        return str(self._txn.snapshot().metadata().id())

    @property
    def read_version(self) -> int:
        """The table version this transaction read (-1 for a table with no commit)."""
        return int(self._txn.readVersion())

    def _seq(self, items: list):
        return self._jvm.org.apache.spark.api.python.PythonUtils.toSeq(items)

    def track_partitions(self, column: str, values: list[int]) -> None:
        """Declare that this transaction depends on these partitions (its fence)."""
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        predicate = parser.parseExpression(f"{column} IN ({', '.join(str(int(v)) for v in values)})")
        self._txn.trackReadPredicates(self._seq([predicate]), True, True)

    def summarize(self, column: str, values: list[int], end_column: str, stat: str) -> dict[int, PartitionSummary]:
        """``summarize`` of the snapshot's files in these partitions (the checksum file's list,
        else one aggregate over the snapshot's file list; never the data)."""
        files = self.all_files()
        found = summarize(files, column, values, end_column, stat) if files is not None else None
        if found is None:
            found = summarize_snapshot(self.spark, self._txn.snapshot(), column, values, end_column, stat)
        return found

    def all_files(self) -> list | None:
        """The snapshot's files from its checksum file (no Spark job), or None if it does not
        list them. Not a dependency by itself (see ``read_partition``/``read_whole_table``)."""
        return crc_files(self._txn.snapshot())

    def read_partition(self, column: str, value: str) -> list:
        """The snapshot's files in one (string) partition, read and so fenced by this
        transaction: a concurrent add to the partition, or a removal of one of these files, makes
        the commit fail."""
        files = self.all_files()
        if files is None:
            return self.files_where(f"{column} = '{value}'")
        files = [f for f in files if partition_value(f, column) == value]
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        self._txn.trackReadPredicates(self._seq([parser.parseExpression(f"{column} = '{value}'")]), True, True)
        self._txn.trackFilesRead(self._seq(files))
        return files

    def read_whole_table(self) -> list:
        """Every file of the snapshot, read (and fenced) by this transaction: any concurrent
        change of the table makes the commit fail."""
        files = self.all_files()
        if files is None:
            return self.files_where(None)
        self._txn.readWholeTable()
        self._txn.trackFilesRead(self._seq(files))
        return files

    def read_files_in(self, column: str, values: list[int]) -> list:
        """The snapshot's files in these (integer) partitions, with the files themselves as this
        transaction's reads: a concurrent removal of one of them makes the commit fail, a
        concurrent add to the partitions does not (when the checksum file lists the files;
        otherwise Delta's ``filterFiles`` also fences the partitions)."""
        files = self.all_files()
        if files is None:
            return self.files_in(column, values)
        wanted = {str(int(v)) for v in values}
        files = [f for f in files if partition_value(f, column) in wanted]
        self._txn.trackFilesRead(self._seq(files))
        return files

    def unfenced_files(self) -> list:
        """Every file of the snapshot, without declaring a read: the checksum file's list, else
        the snapshot's file list (a query over the log's state). See ``track_files``."""
        files = self.all_files()
        if files is None:
            found = self._txn.snapshot().allFiles().collectAsList()
            files = [found.get(i) for i in range(found.size())]
        return files

    def track_files(self, files: list) -> None:
        """Declare ``files`` read: a concurrent commit removing one of them makes ours fail
        (``ConcurrentDeleteReadException``); adds to their partitions do not."""
        self._txn.trackFilesRead(self._seq(files))

    def rows(self, files: list) -> list[dict]:
        """The rows of ``files`` (small files: see ``read_rows``)."""
        return read_rows(self.spark, self.path, files)

    def write_rows(self, rows: list[tuple], schema: StructType, partition_by: tuple[str, ...] = (),
                   stats_columns: tuple[str, ...] = (), folder: str | None = None) -> list:
        """Write a few rows (tuples in ``schema``'s order) as new files of the table, one per
        partition, without a Spark job: encoded with pyarrow in this process and put through the
        table's Hadoop file system. Returns their add actions (for ``commit``), with statistics
        (record count; min, max and null count of ``stats_columns``). Not yet visible. ``folder``
        (optional) is the directory to write into instead of the partition's."""
        by_partition: dict[tuple, list[tuple]] = {}
        names = schema.fieldNames()
        keys = [names.index(c) for c in partition_by]
        for row in rows:
            by_partition.setdefault(tuple(str(row[i]) for i in keys), []).append(row)
        data_fields = [f for f in schema.fields if f.name not in partition_by]
        return [self._write_file([tuple(r[names.index(f.name)] for f in data_fields) for r in part_rows],
                                 data_fields, dict(zip(partition_by, values, strict=True)), stats_columns, folder)
                for values, part_rows in by_partition.items()]

    def _write_file(self, rows: list[tuple], fields: list, partition: dict[str, str],
                    stats_columns: tuple[str, ...], folder: str | None = None):
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in fields]
        arrow_schema = pa.schema([pa.field(f.name, arrow_type(f.dataType)) for f in fields])
        table = pa.table([pa.array(list(c), type=t.type) for c, t in zip(columns, arrow_schema, strict=True)],
                         schema=arrow_schema)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="snappy")
        del table, columns
        data = memoryview(sink.getvalue())  # no copy
        folder = "".join(f"{k}={v}/" for k, v in partition.items()) if folder is None else folder.rstrip("/") + "/"
        relative = f"{folder}part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        jvm = self._jvm
        full = jvm.org.apache.hadoop.fs.Path(jvm.org.apache.hadoop.fs.Path(self.path), relative)
        fs = full.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        out = fs.create(full, False)
        try:  # in slices: each crosses to the JVM as a copy (a big chunk would be copied whole)
            for start in range(0, len(data), _WRITE_SLICE):
                out.write(bytearray(data[start:start + _WRITE_SLICE]))
        finally:
            out.close()
        stats = {"numRecords": len(rows), "minValues": {}, "maxValues": {}, "nullCount": {}}
        for i, f in enumerate(fields):
            if f.name not in stats_columns:
                continue
            values = [r[i] for r in rows if r[i] is not None]
            stats["nullCount"][f.name] = len(rows) - len(values)
            if values:
                stats["minValues"][f.name], stats["maxValues"][f.name] = min(values), max(values)
        add = {"path": relative, "partitionValues": partition, "size": len(data),
               "modificationTime": int(time.time() * 1000), "dataChange": True, "stats": json.dumps(stats)}
        return jvm.org.apache.spark.sql.delta.actions.Action.fromJson(json.dumps({"add": add}))

    def write(self, df: DataFrame, partition_by: tuple[str, ...]) -> tuple[object, list[AddedFile]]:
        """Write ``df``'s rows as new files of the table (not yet visible: see ``commit``)."""
        # Delta's write takes its settings (Hadoop and Parquet options) from the thread's active
        # session: make that ours for the duration of the write.
        sessions = self._jvm.org.apache.spark.sql.SparkSession
        previous = sessions.getActiveSession()
        sessions.setActiveSession(self.spark._jsparkSession)
        try:
            actions = self._txn.writeFiles(df._jdf)
        finally:
            if previous.isDefined():
                sessions.setActiveSession(previous.get())
            else:
                sessions.clearActiveSession()
        files = []
        it = actions.iterator()
        while it.hasNext():
            files.append(AddedFile.of(it.next()))
        return actions, files

    # ---- application versions (Delta's SetTransaction): exactly-once markers in the log -----------
    def app_version(self, app_id: str) -> int:
        """The version last recorded for ``app_id`` in the snapshot (-1 if none), and a declared
        dependency on it: a concurrent commit recording ``app_id`` makes this one fail with
        ``ConcurrentTransactionException``.

        Read from the snapshot's checksum file when it lists the table's application versions (no
        Spark job), else from the snapshot's state.
        """
        checksum = self._txn.snapshot().checksumOpt()
        known = checksum.get().setTransactions() if checksum.isDefined() else None
        if known is not None and known.isDefined():
            self._txn.readTxn().addOne(app_id)
            entries = known.get()
            for i in range(entries.size()):
                entry = entries.apply(i)
                if entry.appId() == app_id:
                    return int(entry.version())
            return -1
        return int(self._txn.txnVersion(app_id))

    def app_versions(self, prefix: str) -> dict[str, tuple[int, int | None]]:
        """Every recorded application id starting with ``prefix``: (version, last-updated ms)."""
        checksum = self._txn.snapshot().checksumOpt()
        known = checksum.get().setTransactions() if checksum.isDefined() else None
        entries = known.get() if known is not None and known.isDefined() else self._txn.snapshot().setTransactions()
        out = {}
        for i in range(entries.size()):
            entry = entries.apply(i)
            if entry.appId().startswith(prefix):
                updated = entry.lastUpdated()
                out[entry.appId()] = (int(entry.version()), int(updated.get()) if updated.isDefined() else None)
        return out

    def set_app_version(self, app_id: str, version: int) -> object:
        """A SetTransaction action recording ``version`` for ``app_id`` (pass it to ``commit``)."""
        jvm = self._jvm
        now = jvm.scala.Some(jvm.java.lang.Long(int(time.time() * 1000)))
        return jvm.org.apache.spark.sql.delta.actions.SetTransaction(app_id, int(version), now)

    # ---- files of tracked partitions -----------------------------------------------------------
    def files_in(self, column: str, values: list[int]) -> list:
        """The snapshot's files in these partitions, read (and so fenced) by this transaction:
        a concurrent add or remove there makes the commit fail."""
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        predicate = parser.parseExpression(f"{column} IN ({', '.join(str(int(v)) for v in values)})")
        files = self._txn.filterFiles(self._seq([predicate]), False)
        return [files.apply(i) for i in range(files.size())]

    def files_where(self, predicate: str | None) -> list:
        """The snapshot's files whose partition values satisfy ``predicate`` (SQL; None: all),
        read (and so fenced) by this transaction."""
        if predicate is None:
            files = self._txn.filterFiles()
        else:
            parsed = self.spark._jsparkSession.sessionState().sqlParser().parseExpression(predicate)
            files = self._txn.filterFiles(self._seq([parsed]), False)
        return [files.apply(i) for i in range(files.size())]

    def partition_files_since(self, column: str, values: list[int], after_version: int,
                              limit: int | None = None) -> tuple[list, bool] | None:
        """The files added to (and not removed from) these partitions by the commits after
        ``after_version`` up to this snapshot, read from the JSON log (no Spark job), and whether
        any commit there removed a file of them or changed the table's metadata. None if the log
        no longer has those commits, or there are more than ``limit`` of them.

        Not a dependency by itself: call ``track_partitions`` to be fenced on the partitions.
        """
        if limit is not None and self.read_version - after_version > limit:
            return None
        if self.read_version <= after_version:
            return [], False
        wanted = {str(int(v)) for v in values}
        added: dict[str, object] = {}
        touched = False
        try:
            changes = self._txn.deltaLog().getChanges(after_version + 1, self.read_version,
                                                      self._jvm.scala.Option.empty(), True)
            while changes.hasNext():
                actions = changes.next()._2()
                for i in range(actions.size()):
                    action = actions.apply(i)
                    kind = action.getClass().getSimpleName()
                    if kind in ("Metadata", "Protocol"):
                        touched = True
                    if kind not in ("AddFile", "RemoveFile"):
                        continue
                    part = action.partitionValues().get(column)
                    if not part.isDefined() or part.get() not in wanted:
                        continue
                    if kind == "AddFile":
                        added[action.path()] = action
                    else:
                        touched = True
                        added.pop(action.path(), None)
        except Exception as exc:  # noqa: BLE001 - e.g. log files already cleaned up
            log.debug("log replay after version %d failed (%s); falling back", after_version, exc)
            return None
        return list(added.values()), touched

    def read_files(self, files: list) -> DataFrame:
        """The rows of ``files`` (from ``files_in``) as a DataFrame of the table's schema."""
        jdf = self._txn.deltaLog().createDataFrame(self._txn.snapshot(), self._seq(files), False,
                                                    self._jvm.scala.Option.empty())
        return DataFrame(jdf, self.spark)

    @staticmethod
    def removals(files: list, data_change: bool = True) -> list:
        """Remove actions for ``files`` (a logical delete; VACUUM removes the bytes later).
        ``data_change=False`` marks a removal that changes no data (clean-up, compaction): Delta's
        streaming source skips it."""
        if data_change:
            return [f.remove() for f in files]
        now = int(time.time() * 1000)
        return [f.removeWithTimestamp(now, False) for f in files]

    def record_metrics(self, metrics: dict[str, int]) -> None:
        """Operation metrics for this commit's entry in the table's history (as Delta's own
        commands record them, e.g. a DELETE's ``numRemovedFiles``)."""
        jvm = self._jvm
        sc = self.spark.sparkContext._jsc.sc()
        registered = jvm.java.util.HashMap()
        for name, value in metrics.items():
            metric = jvm.org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(sc, name)
            metric.set(int(value))
            registered.put(name, metric)
        self._txn.registerSQLMetrics(self.spark._jsparkSession,
                                     jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(registered))

    def commit_new_table(self, schema: StructType, partition_by: tuple[str, ...], properties: dict[str, str],
                         actions: list) -> int:
        """Commit version 0 of a table that has none (``read_version`` -1): its metadata (schema,
        partition columns, properties; the protocol follows from them, as for Delta's CREATE
        TABLE) and ``actions``. If another creator commits version 0 first, this fails with a
        conflict (``ProtocolChangedException``) and writes nothing."""
        if self.read_version >= 0:
            raise ValueError(f"{self.path} already has version {self.read_version}")
        jvm = self._jvm
        metadata = jvm.org.apache.spark.sql.delta.actions.Action.fromJson(json.dumps({"metaData": {
            "id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": schema.json(), "partitionColumns": list(partition_by),
            "configuration": dict(properties), "createdTime": int(time.time() * 1000)}}))
        self._txn.updateMetadataForNewTable(metadata)
        operation = getattr(jvm, "org.apache.spark.sql.delta.DeltaOperations$CreateTable")(
            metadata, False, False, jvm.scala.Option.empty())
        return int(self._txn.commit(self._seq(list(actions)), operation))

    def commit(self, actions, partition_by: tuple[str, ...] = (), extra: list | None = None,
               delete_predicate: str | None = None) -> int:
        """Commit ``actions`` (from ``write``/``write_rows``, or None) plus ``extra`` actions
        (removals, application versions) as one WRITE, or as one DELETE of ``delete_predicate``
        (SQL, recorded in the table's history); returns the new table version."""
        jvm = self._jvm
        none = jvm.scala.Option.empty()
        items = []
        if isinstance(actions, list):
            items.extend(actions)
        elif actions is not None:
            it = actions.iterator()
            while it.hasNext():
                items.append(it.next())
        items.extend(extra or [])
        if delete_predicate is not None:
            parsed = self.spark._jsparkSession.sessionState().sqlParser().parseExpression(delete_predicate)
            operation = getattr(jvm, "org.apache.spark.sql.delta.DeltaOperations$Delete")(self._seq([parsed]))
        else:
            operation = getattr(jvm, "org.apache.spark.sql.delta.DeltaOperations$Write")(
                jvm.org.apache.spark.sql.SaveMode.Append,
                jvm.scala.Option.apply(self._seq(list(partition_by))), none, none, none, none, none, none, none)
        return int(self._txn.commit(self._seq(items), operation))
