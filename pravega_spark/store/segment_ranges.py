"""Reading between stream cuts: pure transformations over the events table.

``segment_ranges`` turns two cuts into per-segment offset ranges (Pravega's
``segmentsBetweenStreamCutSpans``); ``filter_segment_ranges`` keeps the events in them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..errors import InvalidStreamCutError, TruncatedDataError
from ..stream.cut_algorithms import segments_between, stream_cut_equal_or_after
from ..stream.segments import SegmentRecord
from ..stream.stream_cut import StreamCut
from .schema import CHUNK_TYPES, READ_COLUMNS, RECORD_CHUNK, RECORD_CHUNK_END, RECORD_EVENT

# Above this many segment ranges the filter becomes a broadcast join instead of an OR chain.
MAX_RANGES_IN_FILTER = 200


def open_ended_at_tail(ranges: Sequence[SegmentRange], tail: StreamCut) -> list[SegmentRange]:
    """``ranges`` with every end that is its segment's ``tail`` offset made open: for a read
    pinned at the table version the tail was taken from, nothing lies beyond it anyway, and a
    bound the scan need not evaluate per row is cheaper."""
    return [SegmentRange(r.segment_id, r.start, None) if r.end is not None and tail.positions.get(r.segment_id) == r.end
            else r for r in ranges]


@dataclass(frozen=True)
class SegmentRange:
    """Offsets ``[start, end)`` of one segment to read; ``end=None`` reads to the segment's end."""

    segment_id: int
    start: int
    end: int | None


def check_read_bounds(start: StreamCut, end: StreamCut, head: StreamCut,
                      records: Sequence[SegmentRecord]) -> None:
    """Refuse a start below the head and an end before the start."""
    if not stream_cut_equal_or_after(start, head, records):
        raise TruncatedDataError(f"start {start!r} is before the stream's head {head!r}")
    if not stream_cut_equal_or_after(end, start, records):
        raise InvalidStreamCutError(f"end {end!r} is before start {start!r}")


def segment_ranges(start: StreamCut, end: StreamCut,
                   records: Sequence[SegmentRecord]) -> list[SegmentRange]:
    """The offset range to read in each segment between ``start`` and ``end``."""
    out = []
    for sid in segments_between(start, end, records):
        lo = max(start.positions.get(sid, 0), 0)
        hi = end.positions.get(sid)
        if hi is not None and hi < 0:
            continue  # a future segment of the end cut: not reached yet
        if hi is not None and hi <= lo:
            continue
        out.append(SegmentRange(sid, lo, hi))
    return out


def filter_segment_ranges(events: DataFrame, *, ranges: Sequence[SegmentRange]) -> DataFrame:
    """Keeps the events and large-event chunks (not control records) inside ``ranges``.

    ``events`` has the events view's columns (``segment_store.events_view``): its files are
    pruned by their partition values, its rows by their absolute offsets."""
    readable = f"record_type IN ({', '.join(str(t) for t in (RECORD_EVENT, *CHUNK_TYPES))})"
    if not ranges:
        return events.where(F.expr(readable) & F.lit(False))
    ids = f"segment_id IN ({', '.join(str(int(r.segment_id)) for r in ranges)})"
    if len(ranges) <= MAX_RANGES_IN_FILTER:
        # files are pruned by their partition values ([base_offset, end_offset) covers a file's
        # rows: the log alone says which files a range needs), rows by their absolute offset.
        # Written as SQL text: one expression to parse instead of a py4j call per operator.
        files, rows = [], []
        for r in ranges:
            f = c = [f"segment_id = {int(r.segment_id)}"]
            if r.start > 0:
                f = f + [f"end_offset > {int(r.start)}"]
                c = c + [f"offset >= {int(r.start)}"]
            if r.end is not None:
                f = f + [f"base_offset < {int(r.end)}"]
                c = c + [f"offset < {int(r.end)}"]
            files.append("(" + " AND ".join(f) + ")")
            rows.append("(" + " AND ".join(c) + ")")
        return events.where(F.expr(f"{readable} AND {ids} AND ({' OR '.join(files)}) AND ({' OR '.join(rows)})"))
    spark = events.sparkSession
    bounds = spark.createDataFrame([(r.segment_id, r.start, r.end) for r in ranges],
                                   "__sid long, __lo long, __hi long")
    return (events.where(F.expr(f"{readable} AND {ids}"))
            .join(F.broadcast(bounds), F.col("segment_id") == F.col("__sid"))
            .where((F.col("offset") >= F.col("__lo"))
                   & (F.col("__hi").isNull() | (F.col("offset") < F.col("__hi"))))
            .drop("__sid", "__lo", "__hi"))


def segment_ends_at(events: DataFrame, segment_ids: Sequence[int], at: datetime) -> dict[int, int]:
    """The end of each segment's last event written at or before ``at`` (segments with none are
    absent): one aggregation over the events table."""
    rows = (events.where(F.col("segment_id").isin(list(segment_ids)))
            .where(F.col("write_time") <= F.lit(at))
            .where(F.col("record_type").isin(RECORD_EVENT, RECORD_CHUNK_END))
            .groupBy("segment_id").agg(F.max("next_offset").alias("tail")).collect())
    return {int(r["segment_id"]): int(r["tail"]) for r in rows}


def select_read_columns(events: DataFrame, *, scope: str, stream: str) -> DataFrame:
    """The read schema: ``scope, stream, segment_id, offset, event, routing_key, writer_id, write_time``."""
    values = {"scope": F.lit(scope), "stream": F.lit(stream)}
    return events.select(*(values.get(c, F.col(c)).alias(c) for c in READ_COLUMNS))


def event_boundary_checker(events: DataFrame | None,
                           positions: Iterable[tuple[int, int]]) -> Callable[[int, int], bool]:
    """A predicate telling whether each ``(segment, offset)`` of ``positions`` is an event boundary
    (``events`` may be None when no position is past 0: nothing is queried then).

    One query: an offset is a boundary if it is 0, an event starts there, or an event (or the
    seal record, at the sealed size) ends there. So a boundary is never beyond the segment's end.
    Inside a large event only its first chunk's offset and its last chunk's end are boundaries.
    """
    wanted = sorted((s, o) for s, o in positions if o > 0)
    found: set[tuple[int, int]] = set()
    if wanted:
        cond, files = None, None
        for s, o in wanted:
            # only the files whose [base_offset, end_offset] holds o
            f = (F.col("segment_id") == F.lit(s)) & (F.col("base_offset") <= F.lit(o)) & (F.col("end_offset") >= F.lit(o))
            c = (F.col("segment_id") == F.lit(s)) & ((F.col("offset") == F.lit(o)) | (F.col("next_offset") == F.lit(o)))
            cond = c if cond is None else cond | c
            files = f if files is None else files | f
        rows = (events.where(F.col("segment_id").isin([s for s, _ in wanted]) & files).where(cond)
                .select("segment_id", "offset", "next_offset", "record_type", "event_offset").collect())
        for r in rows:
            if r[3] not in CHUNK_TYPES or r[1] == r[4]:  # a large event starts at its first chunk
                found.add((r[0], r[1]))
            if r[3] != RECORD_CHUNK:  # ... and ends at its last
                found.add((r[0], r[2]))
    return lambda segment, offset: offset <= 0 or (segment, offset) in found
