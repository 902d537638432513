"""Reading large events: what makes one complete, and the three ways it is read.

A large event is several chunk rows, contiguous in one segment (``store.schema``: ``CHUNK`` rows,
the last one ``CHUNK_END``; each carries its ``event_offset``). **The rule**, stated once here and
used by every read:

    an event is complete when its first chunk starts at ``event_offset``, exactly one chunk is its
    ``CHUNK_END`` and is the last, and each chunk starts where the one before it ends.

A read never returns part of an event. The rule has two forms, the same in both:

- ``is_complete`` over an event's chunk rows in Python (streaming's micro-batches, assembled in
  one task with ``mapInArrow``, and ``LargeEventReader``'s look-up);
- ``complete_events`` over a DataFrame of chunk rows, with window functions (``read_events``'
  ``assemble_large_events``: no Python in the tasks).

``LargeEventReader`` (``StreamManager.open_event``) streams one event chunk by chunk in bounded
memory; ``EventPointer`` names where an event is.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timezone

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .. import _delta
from ..controller.client import Controller
from ..errors import InvalidConfigError, NoSuchEventError, TruncatedDataError
from ..store.schema import (
    CHUNK_TYPES,
    EVENTS_PARTITION,
    HEADER_SIZE,
    MAX_EVENT_SIZE,
    RECORD_CHUNK_END,
    RECORD_EVENT,
)

# How many payload bytes a LargeEventReader fetches per Spark job by default (4 chunks of the
# writers' default size, 8 MiB); the Python process holds one such window (an Arrow table).
READ_WINDOW_BYTES = 4 * MAX_EVENT_SIZE

# The largest event ``read_events`` assembles into one row over Spark Connect, where the row
# crosses the server's driver and the wire whole (a 20 MiB event reads back on a 1 GiB server, a
# 64 MiB one ran it out of heap); a larger one fails the read with a message naming ``open_event``.
CONNECT_ROW_LIMIT = 4 * MAX_EVENT_SIZE


# ---- the rule ----------------------------------------------------------------------------------
def is_complete(chunks: Sequence[tuple[int, int, int]], event_offset: int) -> bool:
    """The rule over one event's chunk rows ``(offset, next_offset, record_type)``, sorted by offset."""
    return (bool(chunks) and chunks[0][0] == event_offset and chunks[-1][2] == RECORD_CHUNK_END
            and sum(1 for c in chunks if c[2] == RECORD_CHUNK_END) == 1
            and all(a[1] == b[0] for a, b in zip(chunks, chunks[1:], strict=False)))


def complete_events(chunks: DataFrame, keys: Sequence[str] = ("segment_id", "event_offset"),
                    spans: bool = False) -> DataFrame:
    """The rule over a DataFrame of chunk rows: the ``keys`` of each complete event (and, with
    ``spans``, its ``span``: the bytes from its first chunk's offset to its last chunk's end).

    On offsets only (no payload moves): the first chunk's offset is ``event_offset``, one
    ``CHUNK_END`` is there, and the chunks' lengths add up to the event's span (no gap, no
    overlap). The ``CHUNK_END`` is the last because its ``next_offset`` ends the span.
    """
    event = Window.partitionBy(*keys)
    ends_last: Column = F.max(F.when(F.col("record_type") == RECORD_CHUNK_END, F.col("next_offset"))).over(event)
    return (chunks.select(*keys, "offset", "next_offset", "record_type")
            .withColumn("__first", F.min("offset").over(event))
            .withColumn("__end", F.max("next_offset").over(event))
            .withColumn("__bytes", F.sum(F.col("next_offset") - F.col("offset")).over(event))
            .withColumn("__ends", F.sum((F.col("record_type") == RECORD_CHUNK_END).cast("int")).over(event))
            .withColumn("__last_end", ends_last)
            .where((F.col("offset") == F.col("event_offset")) & (F.col("__first") == F.col("event_offset"))
                   & (F.col("__ends") == 1) & (F.col("__last_end") == F.col("__end"))
                   & (F.col("__bytes") == F.col("__end") - F.col("__first")))
            .select(*keys, *([(F.col("__end") - F.col("__first")).alias("span")] if spans else [])))


def refuse_larger_than(complete: DataFrame, limit: int) -> DataFrame:
    """``complete_events``' rows with ``span``, failing the action on an event whose payload
    passes ``limit`` bytes: too large to return as one row here, read with ``open_event``."""
    payload = F.col("span") - F.lit(HEADER_SIZE)
    message = F.concat(
        F.lit("EventTooLarge: the large event at segment "), F.col("segment_id").cast("string"),
        F.lit(" offset "), F.col("event_offset").cast("string"), F.lit(" ("), payload.cast("string"),
        F.lit(f" bytes) is larger than read_events returns as one row over Spark Connect ({limit} bytes): "
              "read it chunk by chunk with StreamManager.open_event(EventPointer(...))"))
    return complete.where(F.when(payload > F.lit(limit), F.raise_error(message).cast("boolean")).otherwise(F.lit(True)))


# ---- batch reads -------------------------------------------------------------------------------
def assemble_large_events(events: DataFrame, limit: int | None = None) -> DataFrame:
    """One row per event: the chunk rows of each large event become one row.

    Rows that are not chunks pass through unchanged. Which large events are complete is the
    module's rule (``complete_events``), so a read never returns part of an event. The payloads of each complete event are then
    concatenated in offset order by one aggregate (``listagg ... WITHIN GROUP``: one copy of the
    bytes; a window frame over the payloads would copy the whole list into each of the event's
    rows). The event's row gets ``offset = event_offset``, the last chunk's ``next_offset`` and
    ``record_type = EVENT``; other columns (routing key, writer, write time, ...) are the event's.

    Assembling holds the whole event in one task's memory (about twice its size): stream events
    larger than that with ``StreamManager.open_event``. With ``limit``, a complete event whose
    span passes it fails the action before any payload is concatenated, with a message naming
    ``open_event`` (``refuse_larger_than``).
    """
    is_chunk = F.col("record_type").isin(*CHUNK_TYPES)
    chunks = events.where(is_chunk)
    keys = ["segment_id", "event_offset"]
    complete = complete_events(chunks, keys, spans=limit is not None)
    if limit is not None:
        complete = complete.transform(refuse_larger_than, limit).select(*keys)
    aggregates = {
        "offset": F.first("event_offset"),
        "next_offset": F.max("next_offset"),
        "record_type": F.lit(RECORD_EVENT),
        "event": F.expr("listagg(event) WITHIN GROUP (ORDER BY offset)"),
    }
    assembled = (chunks.join(F.broadcast(complete), keys, "left_semi")
                 .groupBy(*keys)
                 .agg(*[aggregates.get(c, F.first(c)).alias(c) for c in events.columns if c not in keys]))
    return events.where(~is_chunk).unionByName(assembled.select(*events.columns))


# ---- where an event is -------------------------------------------------------------------------
@dataclass(frozen=True)
class EventPointer:
    """Where one event is: its stream (``scope/stream``), segment and offset (Pravega's
    ``EventPointer``). ``read_events`` rows carry all three (``scope``, ``stream``,
    ``segment_id``, ``offset``): ``EventPointer.from_row(row)``."""

    stream: str
    segment_id: int
    offset: int

    @property
    def scope_and_stream(self) -> tuple[str, str]:
        scope, _, stream = self.stream.partition("/")
        return scope, stream

    def as_text(self) -> str:
        return f"{self.stream}:{self.segment_id}:{self.offset}"

    @classmethod
    def from_text(cls, text: str) -> EventPointer:
        try:
            stream, segment_id, offset = text.rsplit(":", 2)
            return cls(stream, int(segment_id), int(offset))
        except ValueError:
            raise InvalidConfigError(f"{text!r} is not an event pointer (scope/stream:segment:offset)") from None

    @classmethod
    def from_row(cls, row) -> EventPointer:
        """From a ``read_events`` row (or any mapping with scope, stream, segment_id, offset)."""
        values = row.asDict() if hasattr(row, "asDict") else dict(row)
        return cls(f"{values['scope']}/{values['stream']}", int(values["segment_id"]), int(values["offset"]))


# ---- reading one event in bounded memory -----------------------------------------------------------
class LargeEventReader(io.RawIOBase):
    """A readable binary file over one event, fetched a window of chunks at a time.

    Created by ``StreamManager.open_event``. Memory: one window of chunks (``READ_WINDOW_BYTES``,
    32 MiB, by default), fetched as an Arrow table, plus the chunk being returned. Reads the events table as of the version at which
    it was opened.

    Example:
        >>> with manager.open_event(row) as event:  # doctest: +SKIP
        ...     for chunk in event.iter_chunks():
        ...         digest.update(chunk)
    """

    def __init__(self, controller: Controller, pointer: EventPointer, window_chunks: int | None = None) -> None:
        super().__init__()
        scope, stream = pointer.scope_and_stream
        self.pointer = pointer
        head = controller.head_stream_cut(scope, stream).positions
        if pointer.offset < max(head.get(pointer.segment_id, 0), 0):
            raise TruncatedDataError(f"{pointer.as_text()} is before the stream's head")
        version = controller.store.events_version(scope, stream)
        self._events = controller.store.events(scope, stream, version).where(
            F.col(EVENTS_PARTITION) == F.lit(pointer.segment_id))
        self._chunks = self._locate()
        self.size = self._chunks[-1][1] - pointer.offset - HEADER_SIZE
        largest = max(end - start for start, end in self._chunks)
        self._window = max(1, int(window_chunks) if window_chunks else READ_WINDOW_BYTES // largest)
        self._iter: Iterator[bytes] | None = None
        self._current = memoryview(b"")

    @classmethod
    def open(cls, controller: Controller, pointer, window_chunks: int | None = None) -> LargeEventReader:
        """``StreamManager.open_event``: ``pointer`` as an ``EventPointer``, its text, or a
        ``read_events`` row; the stream's pending workflow is finished first."""
        if isinstance(pointer, str):
            pointer = EventPointer.from_text(pointer)
        elif not isinstance(pointer, EventPointer):
            pointer = EventPointer.from_row(pointer)
        scope, stream = pointer.scope_and_stream
        controller.settled(scope, stream)
        return cls(controller, pointer, window_chunks)

    def __repr__(self) -> str:
        return f"LargeEventReader({self.pointer.as_text()}, {self.size} bytes, {len(self._chunks)} chunks)"

    def _locate(self) -> list[tuple[int, int]]:
        """(offset, next_offset) of each of the event's rows, in order (no payload is read)."""
        o = F.lit(self.pointer.offset)
        rows = (self._events
                .where(((F.col("offset") == o) & (F.col("record_type") == RECORD_EVENT))
                       | ((F.col("event_offset") == o) & F.col("record_type").isin(*CHUNK_TYPES)))
                .select("offset", "next_offset", "record_type").collect())
        rows.sort(key=lambda r: r[0])
        if len(rows) == 1 and rows[0][2] == RECORD_EVENT:
            return [(rows[0][0], rows[0][1])]
        if not is_complete([tuple(r) for r in rows], self.pointer.offset):
            raise NoSuchEventError(f"no event starts at {self.pointer.as_text()}")
        return [(r[0], r[1]) for r in rows]

    def readable(self) -> bool:
        return True

    def iter_chunks(self) -> Iterator[bytes]:
        """The event's payload, chunk by chunk, in order (one Spark job per window of chunks)."""
        offsets = [start for start, _ in self._chunks]
        fetch = self._fetch_arrow if hasattr(DataFrame, "toArrow") else self._fetch_rows
        for first in range(0, len(offsets), self._window):
            window = offsets[first:first + self._window]
            expected = iter(window)
            for offset, payload in fetch(window):
                want = next(expected, None)
                if offset != want:
                    raise NoSuchEventError(f"{self.pointer.as_text()}: chunk at {want} is missing")
                yield payload
            missing = next(expected, None)
            if missing is not None:
                raise NoSuchEventError(f"{self.pointer.as_text()}: chunk at {missing} is missing")

    def _window_scan(self, window: list[int]) -> DataFrame:
        """The rows at ``window``'s offsets (pruned to their files by their partition values)."""
        return (self._events
                .where((F.col("base_offset") <= F.lit(window[-1])) & (F.col("end_offset") > F.lit(window[0])))
                .where((F.col("offset") >= F.lit(window[0])) & (F.col("offset") <= F.lit(window[-1])))
                .select("offset", "event"))

    def _fetch_arrow(self, window: list[int]) -> Iterator[tuple[int, bytes]]:
        """The window as one Arrow table (Python holds the window), in offset order."""
        import pyarrow.compute as pc

        table = self._window_scan(window).toArrow()
        offsets, events = table.column("offset"), table.column("event")
        for i in pc.sort_indices(offsets).to_pylist():
            yield offsets[i].as_py(), events[i].as_py()

    def _fetch_rows(self, window: list[int]) -> Iterator[tuple[int, bytes]]:
        """Row by row from the JVM (PySpark before 4.0: no ``toArrow``), in offset order."""
        rows = self._window_scan(window).coalesce(1).sortWithinPartitions("offset").toLocalIterator()
        for row in rows:
            yield row[0], row[1]

    def readinto(self, buffer) -> int:
        self._checkClosed()
        if self._iter is None:
            self._iter = self.iter_chunks()
        while not self._current:
            chunk = next(self._iter, None)
            if chunk is None:
                return 0
            self._current = memoryview(chunk)
        n = min(len(buffer), len(self._current))
        memoryview(buffer).cast("B")[:n] = self._current[:n]
        self._current = self._current[n:]
        return n


# ---- large events inside a streaming micro-batch (``streaming.read_stream``) ---------------------
def assemble_chunks(events: DataFrame) -> DataFrame:
    """Each large event as one row, in the micro-batch holding its first chunk.

    The chunk rows (only those: Parquet statistics skip the other files' row groups) are
    gathered into one task without a shuffle (``coalesce(1)``: a shuffle would make Spark read
    the batch before a ``foreachBatch`` function runs, so the function could not report a read
    error as its own) and each event's chunks are joined in Python (``mapInArrow``). That task
    holds the batch's large events in memory: bound it with ``max_bytes_per_trigger``. A rate
    limit can end a batch inside a large event's commit: the batch with the first chunk then
    reads the others from their files (committed with it, in the event's own directory), and
    chunks without their first one are dropped (already delivered).
    """
    is_chunk = F.col("record_type").isin(*CHUNK_TYPES)
    chunks = events.where(is_chunk).withColumn("__file", F.input_file_name())  # the scan's file: same stage
    assembled = chunks.coalesce(1).mapInArrow(_assemble_batches, chunks.schema).drop("__file")
    return events.where(~is_chunk).unionByName(assembled)


def _assemble_batches(batches: Iterator) -> Iterator:
    import pyarrow as pa

    rows: dict[tuple[int, int], list[dict]] = {}
    schema = None
    for batch in batches:
        schema = batch.schema
        for row in batch.to_pylist():
            rows.setdefault((row["segment_id"], row["event_offset"]), []).append(row)
    out = [e for e in (_assemble_event(chunks) for _, chunks in sorted(rows.items())) if e is not None]
    if out and schema is not None:
        yield pa.RecordBatch.from_pylist(out, schema=schema)


def _assemble_event(chunks: list[dict]) -> dict | None:
    """One event's row from its chunk rows (sorted here), or None if its first chunk is not
    among them. Missing later chunks are read from the first chunk's directory."""
    chunks = sorted(chunks, key=lambda r: r["offset"])
    first = chunks[0]
    if first["offset"] != first["event_offset"]:
        return None  # the first chunk was in an earlier batch, which delivered the event
    if not _complete(chunks, first["event_offset"]):
        chunks = _chunks_from_files(first)
    event = dict(first)
    event["event"] = b"".join(c["event"] for c in chunks)
    event["offset"] = first["event_offset"]
    event["next_offset"] = chunks[-1]["next_offset"]
    event["record_type"] = RECORD_EVENT
    return event


def _complete(chunks: list[dict], event_offset: int) -> bool:
    return is_complete([(c["offset"], c["next_offset"], c["record_type"]) for c in chunks], event_offset)


def _instant(t):
    """A timestamp as an aware datetime (Arrow hands them over with or without a zone)."""
    return t.replace(tzinfo=timezone.utc) if t is not None and t.tzinfo is None else t


def _chunks_from_files(first: dict) -> list[dict]:
    """All chunks of ``first``'s event, from the files in its directory: the event's place
    ``segment_id=S/base_offset=B/end_offset=E/`` (or, for an event committed before #47, its
    staging directory). Each chunk row knows its place in the event (``rel_offset -
    rel_event_offset``: the files share a base). Rows of another event's uncommitted attempt at
    the same place (a lost race for the same tail) are told apart by writer and start time."""
    beside = _delta.parquet_rows_beside(first["__file"])
    if beside is None:
        raise TruncatedDataError(f"a large event at segment {first['segment_id']} offset {first['event_offset']} "
                                 "was split by the rate limit and its chunks are on a store Python tasks cannot "
                                 "open: raise max_bytes_per_trigger above the largest event")
    found = {}
    same = (first["writer_id"], _instant(first["write_time"]))
    for r in (r for r in beside if (r["writer_id"], _instant(r["write_time"])) == same):
        start, end = r["rel_offset"] - r["rel_event_offset"], r["rel_next_offset"] - r["rel_event_offset"]
        found[start] = dict(first, offset=first["event_offset"] + start, next_offset=first["event_offset"] + end,
                            record_type=r["record_type"], event=r["event"])
    chunks = [found[k] for k in sorted(found)]
    if not _complete(chunks, first["event_offset"]):
        raise TruncatedDataError(f"the chunks of the large event at segment {first['segment_id']} offset "
                                 f"{first['event_offset']} are gone (vacuumed?): restart the query from a new "
                                 "checkpoint at manager.stream_info(...).head_stream_cut")
    return chunks
