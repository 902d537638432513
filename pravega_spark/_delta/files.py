"""The plain values the Delta seam hands out and takes back: no JVM object in any of them.

A table's data files are :class:`FileEntry` values (what Delta's log says of a file); a commit is
a list of them plus :class:`Removal` and :class:`AppVersion` values. Both backends of the seam
speak these; the classic one turns them into Delta's actions at commit (``actions.py``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class FileEntry:
    """One data file of a table as its log records it (Delta's ``AddFile``).

    Attributes:
        path: the file's path, relative to the table's root (or absolute).
        partition_values: partition column -> value, as strings (Delta's log form).
        size: the file's size in bytes.
        modification_time: ms since the epoch (Delta's streaming source orders a snapshot by it).
        data_change: False for a file that changes no data (compaction, re-placement).
        stats: ``numRecords``, ``minValues``, ``maxValues``, ``nullCount`` (empty: none).
        tags: Delta's file tags, if any.
    """

    path: str
    partition_values: Mapping[str, str]
    size: int
    modification_time: int
    data_change: bool = True
    stats: Mapping = field(default_factory=dict)
    tags: Mapping[str, str] | None = None

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        parts = ",".join(f"{k}={v}" for k, v in self.partition_values.items())
        return f"FileEntry({self.path!r}, [{parts}], {self.size} bytes, {self.num_records} rows)"

    def partition(self, column: str) -> str | None:
        """The file's value of partition column ``column`` (None: not partitioned by it)."""
        return self.partition_values.get(column)

    def int_partition(self, column: str) -> int:
        """The file's value of an integer partition column."""
        return int(self.partition_values[column])

    @property
    def num_records(self) -> int:
        return int(self.stats.get("numRecords", 0))

    @property
    def min_values(self) -> dict:
        return self.stats.get("minValues") or {}

    @property
    def max_values(self) -> dict:
        return self.stats.get("maxValues") or {}

    def placed(self, values: Mapping[str, int | str] | None = None, *, data_change: bool | None = None,
               modification_time: int | None = None) -> FileEntry:
        """This file with these partition values set (Delta reads partition values from the log,
        never from the path: a file's base offset is fixed this way, at commit, without touching
        its bytes), and optionally another ``data_change`` or ``modification_time`` (ms)."""
        return replace(self,
                       partition_values={**self.partition_values, **{k: str(v) for k, v in (values or {}).items()}},
                       data_change=self.data_change if data_change is None else data_change,
                       modification_time=self.modification_time if modification_time is None else int(modification_time))

    def to_log(self) -> dict:
        """The file as the body of its log entry (``{"add": ...}``)."""
        entry = {"path": self.path, "partitionValues": dict(self.partition_values), "size": int(self.size),
                 "modificationTime": int(self.modification_time), "dataChange": bool(self.data_change)}
        if self.stats:
            entry["stats"] = json.dumps(self.stats)
        if self.tags:
            entry["tags"] = dict(self.tags)
        return entry

    @staticmethod
    def from_log(entry: Mapping) -> FileEntry:
        """The file of a log entry's body (an add action as JSON, parsed)."""
        stats = entry.get("stats")
        return FileEntry(str(entry["path"]), dict(entry.get("partitionValues") or {}), int(entry.get("size", 0)),
                         int(entry.get("modificationTime", 0)), bool(entry.get("dataChange", True)),
                         json.loads(stats) if isinstance(stats, str) else dict(stats or {}), entry.get("tags") or None)

    def to_json(self) -> str:
        """The file as a JSON string (``from_json`` takes it back): to carry it in a row."""
        return json.dumps(self.to_log())

    @staticmethod
    def from_json(text: str) -> FileEntry:
        return FileEntry.from_log(json.loads(text))


# Partition values that name a directory as they are (no escaping needed): every value our
# tables' partition columns take (integers, ids).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def partition_dir(values: Mapping[str, str], columns: Sequence[str]) -> str | None:
    """The Hive-style directory ``c1=v1/c2=v2/`` of these partition values, in ``columns``' order,
    or None if a value would need escaping (never one of ours)."""
    if any(values.get(c) is None or not set(str(values[c])) <= _PLAIN for c in columns):
        return None
    return "".join(f"{c}={values[c]}/" for c in columns)


def misplaced(entry: FileEntry, columns: Sequence[str]) -> bool:
    """Whether ``entry``'s file sits under a directory whose ``c=v`` names differ from its
    partition values in the log. Delta reads partition values from the log, but engines that
    take them from the path (Polars) would read other values (pure)."""
    if not columns or "://" in entry.path or entry.path.startswith("/"):
        return False
    wanted = partition_dir(entry.partition_values, columns)
    return wanted is not None and entry.path[:entry.path.rfind("/") + 1] != wanted


def in_partition_dir(entry: FileEntry, columns: Sequence[str]) -> FileEntry:
    """``entry`` with its path under its partition values' directory, same file name (pure)."""
    return replace(entry, path=partition_dir(entry.partition_values, columns) + entry.path.rsplit("/", 1)[-1])


@dataclass(frozen=True)
class Removal:
    """A logical delete of a committed file (VACUUM removes the bytes later). ``data_change``
    False marks one that changes no data (clean-up, compaction): Delta's streaming source skips
    it."""

    entry: FileEntry
    data_change: bool = True
    deletion_time: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_log(self) -> dict:
        body = {"path": self.entry.path, "deletionTimestamp": int(self.deletion_time),
                "dataChange": bool(self.data_change), "extendedFileMetadata": True,
                "partitionValues": dict(self.entry.partition_values), "size": int(self.entry.size)}
        if self.entry.stats:
            body["stats"] = json.dumps(self.entry.stats)
        if self.entry.tags:
            body["tags"] = dict(self.entry.tags)
        return body


def removals(files: Sequence[FileEntry], data_change: bool = True) -> list[Removal]:
    """Removals of ``files``, all with one deletion time."""
    now = int(time.time() * 1000)
    return [Removal(f, data_change, now) for f in files]


@dataclass(frozen=True)
class AppVersion:
    """An application version recorded in the log (Delta's ``SetTransaction``): an exactly-once
    marker. ``last_updated`` in ms."""

    app_id: str
    version: int
    last_updated: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_log(self) -> dict:
        return {"appId": self.app_id, "version": int(self.version), "lastUpdated": int(self.last_updated)}


@dataclass(frozen=True)
class PartitionSummary:
    """What the log says about one partition's files: the largest value of an integer partition
    column (``end``), and the smallest and largest of one statistic over the files."""

    end: int
    low: int | None
    high: int | None


def summarize(files: Sequence[FileEntry], column: str, values: Sequence[int], end_column: str,
              stat: str) -> dict[int, PartitionSummary] | None:
    """Per value of ``column`` in ``values``: the largest ``end_column`` partition value and the
    extrema of ``stat`` over ``files`` (from the log: no data read). Partitions without files are
    absent. None if a file lacks statistics for ``stat``."""
    wanted = {int(v) for v in values}
    out: dict[int, PartitionSummary] = {}
    for f in files:
        part = f.partition(column)
        if part is None or int(part) not in wanted:
            continue
        low, high = f.min_values.get(stat), f.max_values.get(stat)
        if (low is None or high is None) and f.stats.get("numRecords", 1) != 0:
            return None
        end = f.int_partition(end_column)
        seen = out.get(int(part))
        if seen is not None:
            end = max(end, seen.end)
            low = seen.low if low is None else low if seen.low is None else min(low, seen.low)
            high = seen.high if high is None else high if seen.high is None else max(high, seen.high)
        out[int(part)] = PartitionSummary(end, low, high)
    return out


@dataclass(frozen=True)
class TableState:
    """One version of a table, from its log: the version (-1: no commit), the table's id (a table
    deleted and created again gets a new one) and its files when the log lists them without a
    Spark job (the checksum file; None otherwise)."""

    version: int
    table_id: str | None
    files: tuple[FileEntry, ...] | None


@dataclass(frozen=True)
class CommitMetrics:
    """A commit's version and Delta's operation metrics (``DESCRIBE HISTORY``), as ints."""

    version: int | None
    metrics: dict[str, int]

    def get(self, name: str) -> int:
        return self.metrics.get(name, 0)


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


def arrow_table(rows: Sequence[tuple], fields: Sequence):
    """``rows`` (tuples in ``fields``' order; Spark ``StructField``s) as a pyarrow table of the
    types Spark reads back as the fields' (``arrow_type``)."""
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in fields]
    arrow_schema = pa.schema([pa.field(f.name, arrow_type(f.dataType)) for f in fields])
    return pa.table([pa.array(list(c), type=t.type) for c, t in zip(columns, arrow_schema, strict=True)],
                    schema=arrow_schema)


def parquet_bytes(rows: Sequence[tuple], fields: Sequence, stats_columns: Sequence[str] = ()) -> tuple[memoryview, dict]:
    """``rows`` (tuples in ``fields``' order; Spark ``StructField``s) encoded as one Parquet file
    with pyarrow, and its statistics in Delta's form (record count; min, max and null count of
    ``stats_columns``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = arrow_table(rows, fields)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    del table
    stats = {"numRecords": len(rows), "minValues": {}, "maxValues": {}, "nullCount": {}}
    for i, f in enumerate(fields):
        if f.name not in stats_columns:
            continue
        values = [r[i] for r in rows if r[i] is not None]
        stats["nullCount"][f.name] = len(rows) - len(values)
        if values:
            stats["minValues"][f.name], stats["maxValues"][f.name] = min(values), max(values)
    return memoryview(sink.getvalue()), stats  # no copy


# The clock of data files' modification times (seconds). Tests and demos that need traffic at
# chosen times (auto-scaling's rates) replace it with ``set_clock``; nothing public does.
_clock = time.time


def parquet_rows_beside(file_url: str) -> list[dict] | None:
    """The rows of every Parquet file in ``file_url``'s folder, as dicts, in file-name order; None
    when the folder is not on the local file system (a task's Python cannot open the others).

    For a task that holds one file's name (``input_file_name()``) and needs its neighbours.
    """
    import pyarrow.parquet as pq

    url = urlparse(file_url)
    if url.scheme not in ("", "file"):
        return None
    folder = os.path.dirname(unquote(url.path))
    return [row for name in sorted(os.listdir(folder)) if name.endswith(".parquet")
            for row in pq.read_table(os.path.join(folder, name)).to_pylist()]


def clock() -> float:
    """The store's clock, in seconds since the epoch."""
    return _clock()


def set_clock(now=None):
    """Replace the store's clock by ``now()`` (seconds; None: the real one); returns the one it
    replaced. For tests and simulations of traffic at chosen times."""
    global _clock
    previous, _clock = _clock, (now or time.time)
    return previous


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
