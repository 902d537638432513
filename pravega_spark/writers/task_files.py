"""The data files of one write, written by its Spark tasks with pyarrow.

This is Pravega's segment store appending a write's bytes to a segment's chunks, done inside each
task of the write's one Spark job (``DataFrame.mapInArrow``): the task receives its rows (segment
id already routed in the JVM, routing key, payload) as Arrow batches, lays each segment's events
out from 0 in row order (Pravega's framing, ``8 + len`` bytes each), and appends them to one
Parquet file per segment it touched. It returns only each file's Delta add action (JSON): its
placeholder partition values (``base_offset = UNPLACED - task``), size and statistics. No row goes
back to the JVM, nothing is shuffled, and no file's contents depend on a segment's tail: the
commit fixes each file's base (``routing.place_files``) and names the file under the directory of
its values (``_delta.DeltaTransaction.commit``: a hard link locally, a server-side copy on S3).

Measured against the alternative that keeps the payloads in the JVM (a running-sum UDF over the
narrow columns, then Delta's own file writer): 1.3x a raw Delta append against 0.56x
(docs/ARCHITECTURE.md, "Layout v2"). It needs the tasks to reach the table's storage from Python
(``TaskStorage``): a local or mounted file system (``file:``, Databricks' ``dbfs:/Volumes/...``), or
S3 through pyarrow's own S3 file system with the session's S3A endpoint and keys. Any other store
(``abfss://``, ``dbfs:/``) is written through Delta's writer (``appender.Appender.write_with_spark``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import unquote, urlparse

from .._delta.files import arrow_type
from ..store.schema import EVENTS_SCHEMA, HEADER_SIZE, MAX_EVENT_SIZE, RECORD_EVENT, UNPLACED

# The Arrow schema of a data file: the events table's columns that are not partition values.
DATA_COLUMNS = ("rel_offset", "rel_next_offset", "record_type", "routing_key", "event", "writer_id",
                "write_time", "rel_event_offset")
# The output of each task: one add action (JSON) per file it wrote.
TASK_OUTPUT_DDL = "add string"
# Rows are buffered per segment and written as one Parquet row group once a segment holds this
# many bytes (readers prefer few big row groups), or the task's biggest buffer is written once
# all of them together hold TASK_BUFFER_BYTES: a task holds at most that much.
ROW_GROUP_BYTES = 32 << 20
TASK_BUFFER_BYTES = 64 << 20


def local_table_dir(table_path: str) -> str | None:
    """The local directory of a table at ``table_path`` (a qualified URI), or None for a store that
    Python tasks cannot open as plain files (``s3a://``, ``abfss://``, ``dbfs:/``...). Databricks'
    ``dbfs:/Volumes/...`` is its local mount ``/Volumes/...`` when that is mounted."""
    parsed = urlparse(table_path)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme == "dbfs" and parsed.path.startswith("/Volumes/") and os.path.isdir("/Volumes"):
        return unquote(parsed.path)
    return None


_FILESYSTEMS: dict = {}  # per Python worker: one pyarrow file system per storage


@dataclass(frozen=True)
class TaskStorage:
    """Where a write's tasks put their files: a local directory, or a folder of an S3 bucket.

    Attributes:
        base: the table's local directory, or ``bucket/key`` on S3.
        s3: ``pyarrow.fs.S3FileSystem`` keyword arguments (as sorted items), None for local.
    """

    base: str
    s3: tuple | None = None

    def __repr__(self) -> str:  # never the keys
        return f"TaskStorage({'s3://' if self.s3 is not None else ''}{self.base})"

    def path(self, relative: str) -> str:
        return os.path.join(self.base, relative) if self.s3 is None else f"{self.base}/{relative}"

    def filesystem(self):
        import pyarrow.fs as pafs

        fs = _FILESYSTEMS.get(self.s3)
        if fs is None:
            fs = _FILESYSTEMS[self.s3] = pafs.LocalFileSystem() if self.s3 is None else pafs.S3FileSystem(**dict(self.s3))
        return fs


def task_storage(table_path: str, s3_options: dict | None) -> TaskStorage | None:
    """The storage a write's tasks can reach for the table at ``table_path``: its local directory,
    or its S3 folder with ``s3_options`` (``DeltaBackend.pyarrow_s3_options``); None otherwise."""
    local = local_table_dir(table_path)
    if local is not None:
        return TaskStorage(local)
    if s3_options is None:
        return None
    parsed = urlparse(table_path)
    return TaskStorage(f"{parsed.netloc}{unquote(parsed.path)}".rstrip("/"), tuple(sorted(s3_options.items())))


def write_time_of(now: datetime) -> datetime:
    """The ``write_time`` a write stamps on its events: ``now`` in UTC, to the millisecond (the
    precision of Delta's statistics, so the file's min and max times are exact)."""
    now = now.astimezone(timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _stats_time(ts_us: int) -> str:
    """A timestamp as Delta writes it in file statistics (UTC, milliseconds)."""
    ts = datetime.fromtimestamp(ts_us / 1_000_000, tz=timezone.utc)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def _arrow_schema():
    import pyarrow as pa

    fields = {f.name: f for f in EVENTS_SCHEMA.fields}
    types = {c: arrow_type(fields[c].dataType) for c in DATA_COLUMNS}
    # one writer id per write: a one-entry dictionary (Parquet stores it as a dictionary-encoded
    # string, which Spark reads as the table's string column) instead of a string per row
    types["writer_id"] = pa.dictionary(pa.int32(), pa.string())
    return pa.schema([pa.field(c, types[c], fields[c].nullable) for c in DATA_COLUMNS])


class _SegmentFile:
    """One open Parquet file of a task: the events it appended to one segment."""

    def __init__(self, storage: TaskStorage, segment_id: int, task: int, schema, compression: str) -> None:
        import pyarrow.parquet as pq

        self.relative = (f"segment_id={segment_id}/base_offset={UNPLACED - task}/end_offset={UNPLACED}/"
                         f"part-{task:05d}-{uuid.uuid4()}.c000.{compression}.parquet")
        self.full = storage.path(self.relative)
        if storage.s3 is None:
            os.makedirs(os.path.dirname(self.full), exist_ok=True)
        self._fs = storage.filesystem()
        self._sink = self._fs.open_output_stream(self.full)
        self.segment_id = segment_id
        self.task = task
        self.first_end = 0  # the end of its first event, relative to the task's extent
        self.last_offset = 0  # the offset of its last event
        self.extent = 0  # the end of its last event: the task's extent in the segment
        self.count = 0
        self.pending: list = []  # tables not yet written
        self.pending_bytes = 0
        self._writer = pq.ParquetWriter(
            self._sink, schema, compression=compression,
            use_dictionary=["routing_key", "writer_id"],
            write_statistics=["rel_offset", "rel_next_offset", "record_type", "write_time"])

    def append(self, table, last_offset: int, extent: int) -> None:
        self.pending.append(table)
        self.pending_bytes += table.nbytes
        self.count += table.num_rows
        self.last_offset, self.extent = last_offset, extent

    def flush(self) -> None:
        """Write the buffered rows as one row group."""
        import pyarrow as pa

        if self.pending:
            table = pa.concat_tables(self.pending)
            self._writer.write_table(table, row_group_size=table.num_rows)
            self.pending, self.pending_bytes = [], 0

    def discard(self) -> None:
        try:
            self._writer.close()
            self._sink.close()
            self._fs.delete_file(self.full)
        except OSError:
            pass

    def close(self, write_time_us: int) -> str:
        """Close the file; returns its add action (JSON entry, placeholder partition values)."""
        self.flush()
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()  # on S3: the upload completes here
        stamp = _stats_time(write_time_us)
        stats = {"numRecords": self.count,
                 "minValues": {"rel_offset": 0, "rel_next_offset": self.first_end, "record_type": RECORD_EVENT,
                               "write_time": stamp},
                 "maxValues": {"rel_offset": self.last_offset, "rel_next_offset": self.extent,
                               "record_type": RECORD_EVENT, "write_time": stamp},
                 "nullCount": {"rel_offset": 0, "rel_next_offset": 0, "record_type": 0, "write_time": 0,
                               "rel_event_offset": self.count}}
        return json.dumps({
            "path": self.relative,
            "partitionValues": {"segment_id": str(self.segment_id), "base_offset": str(UNPLACED - self.task),
                                "end_offset": str(UNPLACED)},
            "size": size,
            "modificationTime": int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps(stats, separators=(",", ":")),
        })


NULL_EVENT, TOO_LARGE = "NullEvent", "EventTooLarge"


def frame_batch(batch, extents: dict[int, int]):
    """Per segment of an Arrow batch ``(segment_id, routing_key, event)``: the segment id, the row
    mask, and the rows' relative offsets and ends (numpy), continuing ``extents`` (updated).

    Raises:
        ValueError: a null or oversized payload (text starting ``NullEvent:`` / ``EventTooLarge:``,
            as ``routing.with_event_checks``; the write fails and nothing is committed).
    """
    import numpy as np
    import pyarrow.compute as pc

    events = batch.column("event")
    # (the markers are not literals here: a task's traceback quotes the raising line before the
    # message, and the writer maps the first marker it finds)
    if events.null_count:
        raise ValueError(f"{NULL_EVENT}: an event payload is null")
    lengths = pc.binary_length(events).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(lengths) and lengths.max() > MAX_EVENT_SIZE:
        raise ValueError(f"{TOO_LARGE}: an event of {int(lengths.max())} bytes exceeds the "
                         f"{MAX_EVENT_SIZE}-byte limit")
    sizes = lengths + HEADER_SIZE
    segments = batch.column("segment_id").to_numpy(zero_copy_only=False)
    out = []
    for sid in np.unique(segments):
        mask = segments == sid
        ends = np.cumsum(sizes[mask]) + extents.get(int(sid), 0)
        extents[int(sid)] = int(ends[-1])
        out.append((int(sid), mask, ends - sizes[mask], ends))
    return out


def write_task_files(batches, *, storage: TaskStorage, writer_id: str, write_time_us: int, compression: str = "snappy"):
    """The ``mapInArrow`` function of a write: append this task's events to one file per segment.

    Args:
        batches: the task's rows as Arrow record batches with ``segment_id``, ``routing_key``,
            ``event`` (in the DataFrame's order: per key, the append order).
        storage: where the events table's files go.
        writer_id: stamped on every event.
        write_time_us: the write's time (epoch microseconds, whole milliseconds).
        compression: Parquet codec.

    Yields:
        One Arrow batch of ``add`` strings: the add actions of the files written.
    """
    import numpy as np
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    schema = _arrow_schema()
    writer_ids = pa.array([writer_id], pa.string())
    files: dict[int, _SegmentFile] = {}
    extents: dict[int, int] = {}
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            for sid, mask, offsets, ends in frame_batch(batch, extents):
                rows = batch.filter(pa.array(mask))
                n = rows.num_rows
                table = pa.Table.from_arrays([
                    pa.array(offsets, pa.int64()), pa.array(ends, pa.int64()),
                    pa.array(np.full(n, RECORD_EVENT, dtype=np.int32)),
                    rows.column("routing_key"), rows.column("event"),
                    pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), writer_ids),
                    pa.array(np.full(n, write_time_us, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
                    pa.nulls(n, pa.int64())], schema=schema)
                seg = files.get(sid)
                if seg is None:
                    seg = files[sid] = _SegmentFile(storage, sid, task, schema, compression)
                    seg.first_end = int(ends[0])
                seg.append(table, int(offsets[-1]), int(ends[-1]))
                if seg.pending_bytes >= ROW_GROUP_BYTES:
                    seg.flush()
            while sum(f.pending_bytes for f in files.values()) > TASK_BUFFER_BYTES:
                max(files.values(), key=lambda f: f.pending_bytes).flush()
    except BaseException:
        for seg in files.values():  # nothing will reference them: leave no file behind
            seg.discard()
        raise
    adds = [files[sid].close(write_time_us) for sid in sorted(files)]
    yield pa.RecordBatch.from_arrays([pa.array(adds, pa.string())], names=["add"])
