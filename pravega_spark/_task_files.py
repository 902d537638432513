"""The data files of one write, written by its Spark tasks with pyarrow.

This is Pravega's segment store appending a write's bytes to a segment's chunks, done inside each
task of the write's one Spark job (``DataFrame.mapInArrow``): the task receives its rows (segment
id already routed in the JVM, routing key, payload) as Arrow batches, lays each segment's events
out from 0 in row order (Pravega's framing, ``8 + len`` bytes each), and appends them to one
Parquet file per segment it touched. It returns only each file's Delta add action (JSON): its
placeholder partition values (``base_offset = UNPLACED - task``), size and statistics. No row goes
back to the JVM, nothing is shuffled, and no file's contents depend on a segment's tail: the
commit fixes each file's base (``routing.place_files``).

Measured against the alternative that keeps the payloads in the JVM (a running-sum UDF over the
narrow columns, then Delta's own file writer): 1.3x a raw Delta append against 0.56x
(docs/ARCHITECTURE.md, "Layout v2"). It needs the tasks to reach the table's storage from Python,
so it is used for stores on a local or mounted file system (``local_table_dir``); any other store
is written through Delta's writer (``appender.Appender.write_with_spark``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlparse

from ._delta.files import arrow_type
from .schema import EVENTS_SCHEMA, HEADER_SIZE, MAX_EVENT_SIZE, RECORD_EVENT, UNPLACED

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
    """The local directory of a table at ``table_path`` (a qualified ``file:`` URI), or None for a
    store that Python tasks cannot open as plain files (``s3a://``, ``abfss://``, ``dbfs:/``...)."""
    parsed = urlparse(table_path)
    if parsed.scheme != "file":
        return None
    return parsed.path  # Hadoop's Path prints it decoded


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

    def __init__(self, table_dir: str, segment_id: int, task: int, schema, compression: str) -> None:
        import pyarrow.parquet as pq

        self.relative = (f"segment_id={segment_id}/base_offset={UNPLACED - task}/end_offset={UNPLACED}/"
                         f"part-{task:05d}-{uuid.uuid4()}.c000.{compression}.parquet")
        full = os.path.join(table_dir, self.relative)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        self.full = full
        self.segment_id = segment_id
        self.task = task
        self.first_end = 0  # the end of its first event, relative to the task's extent
        self.last_offset = 0  # the offset of its last event
        self.extent = 0  # the end of its last event: the task's extent in the segment
        self.count = 0
        self.pending: list = []  # tables not yet written
        self.pending_bytes = 0
        self._writer = pq.ParquetWriter(
            full, schema, compression=compression,
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
            os.remove(self.full)
        except OSError:
            pass

    def close(self, write_time_us: int) -> str:
        """Close the file; returns its add action (JSON entry, placeholder partition values)."""
        self.flush()
        self._writer.close()
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
            "size": os.path.getsize(self.full),
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


def write_task_files(batches, *, table_dir: str, writer_id: str, write_time_us: int, compression: str = "snappy"):
    """The ``mapInArrow`` function of a write: append this task's events to one file per segment.

    Args:
        batches: the task's rows as Arrow record batches with ``segment_id``, ``routing_key``,
            ``event`` (in the DataFrame's order: per key, the append order).
        table_dir: the events table's local directory.
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
                    seg = files[sid] = _SegmentFile(table_dir, sid, task, schema, compression)
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
