"""Reading between stream cuts: pure transformations over the events table.

``segment_ranges`` turns two cuts into per-segment offset ranges (Pravega's
``segmentsBetweenStreamCutSpans``); ``filter_segment_ranges`` keeps the events in them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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


# In a segment's partitions a control record (seal, truncation) is a file of its own, whose
# ``base_offset`` equals its ``end_offset`` (``segment_store.control_row``); every file with
# ``end_offset > base_offset`` holds only events and large events' chunks (the validation suite's
# ``records_in_their_files``). So a read picks its files by their partition values alone, reads no
# ``record_type``, and filters rows only where a file may straddle one of its bounds.
DATA_FILES = "end_offset > base_offset"
NO_END = 2**63 - 1  # past any offset

Extents = Mapping[int, Sequence[tuple[int, int]]]  # per segment, its data files' [base_offset, end_offset)


def straddled(r: SegmentRange, extents: Extents | None) -> bool:
    """Whether a data file of ``r``'s segment holds offsets on both sides of one of its bounds
    (True when the files are not known) (pure)."""
    if extents is None:
        return r.start > 0 or r.end is not None
    bounds = [b for b in (r.start, r.end) if b is not None and b > 0]
    return any(base < b < end for base, end in extents.get(r.segment_id, ()) for b in bounds)


def _lookup(bounds: Mapping[int, int]) -> str:
    """A segment's bound from a map literal: one small expression however many segments (an OR
    chain of per-segment conditions outgrows the 64 KB of code Spark compiles per stage)."""
    return f"try_element_at(map({', '.join(f'{k}L, {v}L' for k, v in sorted(bounds.items()))}), segment_id)"


def range_filters(ranges: Sequence[SegmentRange], extents: Extents | None = None) -> tuple[str, str]:
    """SQL conditions reading ``ranges``: on the files (partition values only: every data file
    that overlaps a range) and on the rows (``""`` when no file straddles a bound: the files
    hold only rows inside, and nothing is read or evaluated per row). ``extents``: each segment's
    data files at the version read, when known; unknown, every bounded range is filtered row by
    row (pure)."""
    ids = ", ".join(str(int(r.segment_id)) for r in sorted(ranges, key=lambda r: r.segment_id))
    files = f"segment_id IN ({ids})"
    bounded = [r for r in ranges if r.start > 0 or r.end is not None]
    if not bounded:
        return files, ""
    lows = {int(r.segment_id): max(int(r.start), 0) for r in ranges}
    highs = {int(r.segment_id): NO_END if r.end is None else int(r.end) for r in ranges}
    files += f" AND end_offset > {_lookup(lows)} AND base_offset < {_lookup(highs)}"
    cut = {int(r.segment_id) for r in bounded if straddled(r, extents)}
    if not cut:
        return files, ""
    rows = (f"offset >= {_lookup({k: v for k, v in lows.items() if k in cut})} AND "
            f"offset < {_lookup({k: v for k, v in highs.items() if k in cut})}")
    plain = sorted(set(lows) - cut)
    if plain:
        rows = f"segment_id IN ({', '.join(map(str, plain))}) OR ({rows})"
    return files, rows


def filter_segment_ranges(events: DataFrame, *, ranges: Sequence[SegmentRange],
                          extents: Extents | None = None) -> DataFrame:
    """Keeps the events and large-event chunks (not control records) inside ``ranges``.

    ``events`` has the events view's columns (``segment_store.events_view``). Its files are
    chosen by their partition values in the log (``[base_offset, end_offset)`` covers a file's
    rows); rows are filtered only in the segments where a file may straddle a bound (``extents``:
    each segment's data files at the version read, when known; see ``range_filters``)."""
    if not ranges:
        return events.where(F.lit(False))
    if len(ranges) <= MAX_RANGES_IN_FILTER:
        # Written as SQL text: one expression to parse instead of a py4j call per operator.
        files, rows = range_filters(ranges, extents)
        return events.where(F.expr(f"{DATA_FILES} AND ({files})" + (f" AND ({rows})" if rows else "")))
    spark = events.sparkSession
    bounds = spark.createDataFrame([(r.segment_id, r.start, r.end) for r in ranges],
                                   "__sid long, __lo long, __hi long")
    ids = f"segment_id IN ({', '.join(str(int(r.segment_id)) for r in ranges)})"
    return (events.where(F.expr(f"{DATA_FILES} AND {ids}"))
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
    values = {"scope": sql_string(scope), "stream": sql_string(stream)}
    return events.selectExpr(*(f"{values[c]} AS {c}" if c in values else c for c in READ_COLUMNS))


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal (one expression string: no py4j call per column)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
        # the positions as maps from segment to offset (a segment's second position in a second
        # map): only the files whose [base_offset, end_offset] holds one, then its rows
        ranks: list[dict[int, int]] = []
        for s, o in wanted:
            free = next((m for m in ranks if s not in m), None)
            if free is None:
                ranks.append(free := {})
            free[s] = o
        files = " OR ".join(f"(base_offset <= {_lookup(m)} AND end_offset >= {_lookup(m)})" for m in ranks)
        cond = " OR ".join(f"offset = {_lookup(m)} OR next_offset = {_lookup(m)}" for m in ranks)
        ids = ", ".join(str(int(s)) for s in sorted({s for s, _ in wanted}))
        rows = (events.where(f"segment_id IN ({ids}) AND ({files})").where(cond)
                .select("segment_id", "offset", "next_offset", "record_type", "event_offset").collect())
        for r in rows:
            if r[3] not in CHUNK_TYPES or r[1] == r[4]:  # a large event starts at its first chunk
                found.add((r[0], r[1]))
            if r[3] != RECORD_CHUNK:  # ... and ends at its last
                found.add((r[0], r[2]))
    return lambda segment, offset: offset <= 0 or (segment, offset) in found
