"""Reading a table's log: versions, the files a version lists, summaries of partitions, and the
changes of commits. Log reads only: no Spark job (but for a summary of a table too big for its
checksum file to list its files, which aggregates the log's state, never the data)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import actions
from .files import PartitionSummary, TableState, summarize
from .jvm import delta_log, none

log = logging.getLogger("pravega_spark")


def snapshot(spark: SparkSession, path: str, version: int | None = None):  # -> Snapshot JVM object
    """The table's latest snapshot, or the one at ``version`` (for this package only)."""
    gateway = spark.sparkContext._jvm
    if version is None:
        return delta_log(spark, path).update(False, none(gateway), none(gateway))
    return delta_log(spark, path).getSnapshotAt(int(version), none(gateway), none(gateway), False)


def listed_files(spark: SparkSession, snap) -> list | None:
    """A snapshot's files as listed by its checksum file (no Spark job), or None if not listed."""
    checksum = snap.checksumOpt()
    if not checksum.isDefined() or not checksum.get().allFiles().isDefined():
        return None
    return actions.entries(spark.sparkContext._jvm, checksum.get().allFiles().get())


# The files of the last versions asked for (a version of a table never changes): turning a
# checksum file's list into Python costs about a millisecond per file.
_LISTED: dict[tuple[str, str, int], tuple | None] = {}
_LISTED_LIMIT = 32


def table_state(spark: SparkSession, path: str, version: int | None = None) -> TableState:
    """The table's latest version (or ``version``): its number, id and, when its checksum file
    lists them, its files (kept for the last few versions asked for)."""
    snap = snapshot(spark, path, version)
    number = int(snap.version())
    if number < 0:
        return TableState(number, None, None)
    key = (path, str(snap.metadata().id()), number)
    if key not in _LISTED:
        files = listed_files(spark, snap)
        if len(_LISTED) >= _LISTED_LIMIT:
            _LISTED.pop(next(iter(_LISTED)))
        _LISTED[key] = None if files is None else tuple(files)
    return TableState(number, key[1], _LISTED[key])


def latest(spark: SparkSession, path: str) -> tuple[int, str]:
    """The table's latest committed version and its table id, from the log alone (no Spark job).

    The id changes when a table is deleted and created again at the same path, so the pair
    identifies one state of one table: a safe key for caching anything read from it.
    """
    snap = snapshot(spark, path)
    return int(snap.version()), str(snap.metadata().id())


def version(spark: SparkSession, path: str) -> int:
    """The table's latest committed version."""
    return latest(spark, path)[0]


def exists(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table exists at ``path`` (a log listing; no Spark job)."""
    return int(snapshot(spark, path).version()) >= 0


def summarize_snapshot(spark: SparkSession, snap, column: str, values: Sequence[int], end_column: str,
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


_SUMMARIES: dict[tuple, dict[int, PartitionSummary]] = {}
_SUMMARIES_LIMIT = 4096


def summarize_table(spark: SparkSession, path: str, column: str, values: Sequence[int], end_column: str,
                    stat: str, version: int | None = None) -> dict[int, PartitionSummary]:
    """``summarize`` of the table's files in these partitions at ``version`` (latest: None):
    from the checksum file's list, else one aggregate over the log's state. A version of a table
    never changes, so a summary is kept per (table id, version): asking again before the table
    changes costs a look at its log."""
    snap = snapshot(spark, path, version)
    key = (path, str(snap.metadata().id()), int(snap.version()), column, tuple(values), end_column, stat)
    found = _SUMMARIES.get(key)
    if found is not None:
        return found
    files = listed_files(spark, snap)
    found = summarize(files, column, values, end_column, stat) if files is not None else None
    if found is None:
        found = summarize_snapshot(spark, snap, column, values, end_column, stat)
    if len(_SUMMARIES) >= _SUMMARIES_LIMIT:
        _SUMMARIES.clear()
    _SUMMARIES[key] = found
    return found


def file_changes(spark: SparkSession, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
    """``(version, adds, removes)`` of each commit of the table at ``path`` in versions
    ``[start, end]``: the file actions as their log JSON (log reads; no Spark job)."""
    if end < start:
        return []
    changes = delta_log(spark, path).getChanges(int(start), int(end), none(spark.sparkContext._jvm), True)
    out = []
    while changes.hasNext():
        change = changes.next()
        adds, removes = [], []
        items = change._2()
        for i in range(items.size()):
            entry = json.loads(items.apply(i).json())
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


def table_property(spark: SparkSession, path: str, key: str) -> str | None:
    """A table property of the latest version (its metadata's configuration), or None."""
    found = snapshot(spark, path).metadata().configuration().get(key)
    return str(found.get()) if found.isDefined() else None
