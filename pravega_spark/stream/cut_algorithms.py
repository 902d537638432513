"""The controller's algorithms over stream cuts (Pravega's ``PersistentStreamBase``).

The functions are pure: they take a stream's segment history (a sequence of
:class:`~pravega_spark.stream.segments.SegmentRecord`, as stored in the segments table) and, where the
size of open segments matters, their current lengths. They mirror ``isStreamCutValid``,
``computeStreamCutSpan``, ``streamCutEqualOrAfter``, ``compareStreamCuts``,
``segmentsBetweenStreamCutSpans`` and ``sizeBetweenStreamCuts``. Each call indexes the history
once; comparisons only visit pairs of segments whose key ranges overlap, so histories with
hundreds of epochs and thousands of segments stay cheap. The value type is
:class:`~pravega_spark.stream.stream_cut.StreamCut`.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from pravega_spark.errors import InvalidStreamCutError
from pravega_spark.stream.segments import SegmentRecord, current_epoch, short_segment_name
from pravega_spark.stream.stream_cut import StreamCut

__all__ = [
    "CutComparison",
    "compare_stream_cuts",
    "covers",
    "cut_span",
    "head_of_stream",
    "segments_between",
    "size_between",
    "stream_cut_equal_or_after",
    "tail_cut",
    "validate_stream_cut",
]


# ---------------------------------------------------------------------------------------------


class CutComparison(enum.Enum):
    """How one cut relates to another (Pravega's ``StreamCutComparison``)."""

    BEFORE = "BEFORE"
    EQUAL_OR_AFTER = "EQUAL_OR_AFTER"
    OVERLAPS = "OVERLAPS"


def _segment_size(record: SegmentRecord, lengths: Mapping[int, int] | None) -> int | None:
    """Sealed size for a sealed segment, else ``lengths[id]``; ``None`` when unknown."""
    if record.sealed_size is not None:
        return record.sealed_size
    if lengths is not None:
        return lengths.get(record.segment_id)
    return None


def _last_member_epoch(record: SegmentRecord) -> int | None:
    """The last epoch the segment belongs to; ``None`` while open."""
    if record.sealed_epoch is None:
        return None
    return max(record.creation_epoch, record.sealed_epoch - 1)


def _member_of_some(record: SegmentRecord, first: int, last: int) -> bool:
    """Whether the segment belongs to at least one epoch of ``[first, last]`` (O(1))."""
    end = _last_member_epoch(record)
    return record.creation_epoch <= last and (end is None or end >= first)


def _resolve(cut: StreamCut, by_id: Mapping[int, SegmentRecord]) -> list[SegmentRecord]:
    unknown = [sid for sid in cut.positions if sid not in by_id]
    if unknown:
        names = ", ".join(short_segment_name(sid) for sid in unknown)
        raise InvalidStreamCutError(f"{cut.stream}: not segments of the stream: {names}")
    return [by_id[sid] for sid in cut.positions]


def _index(records: Sequence[SegmentRecord]) -> dict[int, SegmentRecord]:
    return {r.segment_id: r for r in records}


def _overlapping_pairs(
    left: Sequence[SegmentRecord], right: Sequence[SegmentRecord]
) -> Iterator[tuple[SegmentRecord, SegmentRecord]]:
    """Every ``(l, r)`` whose key ranges overlap (Pravega's ``overlaps``), by a sweep over starts.

    O((n + m) log(n + m) + pairs) instead of testing all n * m pairs.
    """
    sides = (left, right)
    events = sorted(
        [(r.key_start, 0, i) for i, r in enumerate(left)]
        + [(r.key_start, 1, i) for i, r in enumerate(right)]
    )
    active: tuple[list[tuple[float, int]], list[tuple[float, int]]] = ([], [])
    for start, side, idx in events:
        other = active[1 - side]
        while other and other[0][0] <= start:
            heapq.heappop(other)
        record = sides[side][idx]
        for _, other_idx in other:
            mate = sides[1 - side][other_idx]
            yield (record, mate) if side == 0 else (mate, record)
        if record.key_end > start:
            heapq.heappush(active[side], (record.key_end, idx))


def covers(intervals: list[tuple[float, float]], start: float, end: float) -> bool:
    """Whether the union of ``intervals`` covers ``[start, end)``."""
    reached = start
    for low, high in sorted(intervals):
        if low > reached:
            break
        reached = max(reached, high)
        if reached >= end:
            return True
    return reached >= end


def _uncovered(intervals: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The parts of ``[start, end)`` that the union of ``intervals`` leaves out."""
    gaps = []
    reached = start
    for low, high in sorted(intervals):
        if low > reached:
            gaps.append((reached, min(low, end)))
        reached = max(reached, high)
        if reached >= end:
            break
    if reached < end:
        gaps.append((reached, end))
    return [(a, b) for a, b in gaps if a < b]


def _span_of(records: Sequence[SegmentRecord]) -> dict[int, int]:
    if not records:
        return {}
    low = min(r.creation_epoch for r in records)
    high = max(r.creation_epoch for r in records)
    span = {}
    for r in records:
        end = _last_member_epoch(r)
        span[r.segment_id] = max(low, high if end is None else min(high, end))
    return span


def cut_span(cut: StreamCut, records: Sequence[SegmentRecord]) -> dict[int, int]:
    """Each segment's span epoch (Pravega's ``computeStreamCutSpan``).

    With ``[low, high]`` the creation epochs of the cut's oldest and newest segments, a segment's
    span epoch is the highest epoch in ``[low, high]`` that still has it as a member.

    Example:
        >>> cut_span(StreamCut("iot/sensors", {0: 5, (1 << 32) | 2: 0}), records)  # doctest: +SKIP
        {0: 1, 4294967298: 1}

    Raises:
        InvalidStreamCutError: a segment id is not in ``records``.
    """
    if not cut.positions:
        return {}
    return _span_of(_resolve(cut, _index(records)))


def _check_comparable(cut1: StreamCut, cut2: StreamCut) -> None:
    for cut in (cut1, cut2):
        if not cut.positions:
            raise InvalidStreamCutError(
                f"cannot compare {cut!r}: an unbounded or empty cut has no position to compare")
    if cut1.stream != cut2.stream:
        raise InvalidStreamCutError(f"cuts of different streams: {cut1.stream} and {cut2.stream}")


def _effective(cut: StreamCut, recs: Sequence[SegmentRecord]) -> list[SegmentRecord]:
    """The cut's segments, each restricted to the key ranges where it is the cut's position.

    A future entry (``-1``) may be listed beside one of its predecessors (a valid cut never lists
    a successor at a non-negative offset with its predecessor): where the predecessor covers the
    key range, the reader's position is in the predecessor, and the future entry only stands for
    the rest of its range. Comparing by full ranges would pair the future entry with the cut's own
    predecessor, so that a cut like ``{0: 10, 2: 10, 5#2: -1}`` (``5#2`` a successor of ``2``)
    would not even be equal-or-after itself.
    """
    present = [r for r in recs if cut.positions[r.segment_id] >= 0]
    out = list(present)
    for r in recs:
        if cut.positions[r.segment_id] >= 0:
            continue
        older = [(o.key_start, o.key_end) for o in recs if o.creation_epoch < r.creation_epoch
                 and o.key_start < r.key_end and r.key_start < o.key_end]
        out += [replace(r, key_start=lo, key_end=hi) for lo, hi in _uncovered(older, r.key_start, r.key_end)]
    return out


def _equal_or_after(
    cut1: StreamCut, recs1: Sequence[SegmentRecord], span1: Mapping[int, int],
    cut2: StreamCut, recs2: Sequence[SegmentRecord], span2: Mapping[int, int],
) -> bool:
    for s1, s2 in _overlapping_pairs(_effective(cut1, recs1), _effective(cut2, recs2)):
        if s1.segment_id == s2.segment_id and cut1.positions[s1.segment_id] < cut2.positions[s2.segment_id]:
            return False
        if span1[s1.segment_id] < span2[s2.segment_id]:
            return False
    return True


def stream_cut_equal_or_after(cut1: StreamCut, cut2: StreamCut, records: Sequence[SegmentRecord]) -> bool:
    """Whether ``cut1`` is at or after ``cut2`` everywhere (Pravega's ``streamCutEqualOrAfter``).

    False iff some segment ``s1`` of ``cut1`` and ``s2`` of ``cut2`` are the same segment with
    ``offset1 < offset2``, or overlap with ``span1(s1) < span2(s2)`` (see :func:`cut_span`).
    Offsets compare as plain integers, as Pravega does, so a future entry (``-1``) is before any
    non-negative offset in the same segment: ``{C: -1}`` is not equal-or-after ``{C: 0}``.
    Used for truncation (new head >= old head) and subscriber updates.

    Example:
        >>> stream_cut_equal_or_after(StreamCut("a/b", {0: 20, 1: 20}),
        ...                           StreamCut("a/b", {0: 10, 1: 10}), initial_segments(2))  # doctest: +SKIP
        True

    Raises:
        InvalidStreamCutError: unknown segment ids, different streams, or an unbounded/empty cut.
    """
    _check_comparable(cut1, cut2)
    by_id = _index(records)
    recs1, recs2 = _resolve(cut1, by_id), _resolve(cut2, by_id)
    return _equal_or_after(cut1, recs1, _span_of(recs1), cut2, recs2, _span_of(recs2))


def compare_stream_cuts(cut1: StreamCut, cut2: StreamCut, records: Sequence[SegmentRecord]) -> CutComparison:
    """Relate ``cut1`` to ``cut2`` (Pravega's ``compareStreamCuts``, used by retention).

    Each pair of overlapping segments is compared: the same segment by offset (``-1`` lowest),
    different segments by segment id (the newer segment is greater); pairs that do not overlap
    are skipped. Some greater and some less -> ``OVERLAPS``; only greater or equal ->
    ``EQUAL_OR_AFTER``; only less (or equal) -> ``BEFORE``; nothing compared -> ``EQUAL_OR_AFTER``.

    Example:
        >>> compare_stream_cuts(StreamCut("a/b", {0: 1, 1: 11}),
        ...                     StreamCut("a/b", {0: 10, 1: 10}), initial_segments(2))  # doctest: +SKIP
        <CutComparison.OVERLAPS: 'OVERLAPS'>

    Raises:
        InvalidStreamCutError: unknown segment ids, different streams, or an unbounded/empty cut.
    """
    _check_comparable(cut1, cut2)
    by_id = _index(records)
    found_greater = found_less = False
    for s1, s2 in _overlapping_pairs(_resolve(cut1, by_id), _resolve(cut2, by_id)):
        if s1.segment_id == s2.segment_id:
            a, b = cut1.positions[s1.segment_id], cut2.positions[s2.segment_id]
        else:
            a, b = s1.segment_id, s2.segment_id
        found_greater = found_greater or a > b
        found_less = found_less or a < b
        if found_greater and found_less:
            return CutComparison.OVERLAPS
    return CutComparison.BEFORE if found_less and not found_greater else CutComparison.EQUAL_OR_AFTER


def head_of_stream(records: Sequence[SegmentRecord], stream: str) -> StreamCut:
    """The head of a never-truncated stream: every epoch-0 segment at offset 0.

    Pravega's ``getSegmentsAtHead`` when there is no truncation record (otherwise the head is the
    truncation record's cut, which the caller stores).

    Example:
        >>> head_of_stream(initial_segments(2), "iot/sensors")  # doctest: +SKIP
        StreamCut(iot/sensors, {0.#epoch.0: 0, 1.#epoch.0: 0})
    """
    positions = {r.segment_id: 0 for r in records if r.creation_epoch == 0}
    if not positions:
        raise InvalidStreamCutError(f"{stream}: the segment history has no epoch-0 segments")
    return StreamCut(stream, positions)


def tail_cut(stream: str, records: Sequence[SegmentRecord], lengths: Mapping[int, int]) -> StreamCut:
    """The tail: every open segment at its current length (Pravega's ``fetchTailStreamCut``).

    ``lengths`` maps segment id to length in bytes; an open segment missing from it is empty
    (offset 0). If every segment is sealed (a sealed stream recorded with sealed epochs), the
    segments sealed last are used at their sealed sizes.

    Example:
        >>> tail_cut("iot/sensors", initial_segments(2), {0: 64, 1: 0})  # doctest: +SKIP
        StreamCut(iot/sensors, {0.#epoch.0: 64, 1.#epoch.0: 0})
    """
    last = [r for r in records if r.sealed_epoch is None]
    if not last and records:
        final = max(r.sealed_epoch for r in records if r.sealed_epoch is not None)
        last = [r for r in records if r.sealed_epoch == final]
    if not last:
        raise InvalidStreamCutError(f"{stream}: the segment history is empty")
    positions = {}
    for r in last:
        size = lengths.get(r.segment_id)
        positions[r.segment_id] = size if size is not None else (r.sealed_size or 0)
    return StreamCut(stream, positions)


def validate_stream_cut(
    cut: StreamCut,
    records: Sequence[SegmentRecord],
    lengths: Mapping[int, int] | None = None,
    is_event_boundary: Callable[[int, int], bool] | None = None,
) -> None:
    """Check that ``cut`` is a consistent position in the stream (Pravega's ``isStreamCutValid``).

    Checked in this order, each failure raising with the reason:

    1. the cut lists at least one segment, and every id is a segment of the stream;
    2. no offset is beyond its segment's length: the sealed size for a sealed segment, else
       ``lengths[id]`` when ``lengths`` is given (a missing id counts as an empty segment);
    3. the segments at non-negative offsets do not overlap each other;
    4. every future segment (``-1``) comes after (has a greater id than) each segment at a
       non-negative offset that it overlaps;
    5. every key range not held by a segment at a non-negative offset is covered by the union of
       the future segments (Pravega only asks for an overlapping future segment: we require the
       whole key space ``[0, 1)`` to be covered, as SPEC section 3 does);
    6. no segment is skipped or read twice: every segment created in the cut's epoch range that
       the cut does not list must be wholly before the cut or wholly after it. A segment is after
       the cut on the keys where an older listed segment overlaps it. This is Pravega's walk
       over missing ranges, generalised: it also refuses a segment listed together with any
       later descendant at a non-negative offset (``{A: 5, E: 3}`` where ``A`` was merged into
       ``C`` and ``C`` split into ``E``);
    7. when ``is_event_boundary(segment_id, offset)`` is given, every offset other than 0 and
       the segment's known length is on an event boundary.

    :attr:`StreamCut.UNBOUNDED` is not checked (the caller decides what it means).

    Example:
        >>> validate_stream_cut(StreamCut("a/b", {0: 0}), initial_segments(2))  # doctest: +SKIP
        Traceback (most recent call last):
        InvalidStreamCutError: a/b: key range [0.5, 1.0) is not covered ...

    Raises:
        InvalidStreamCutError: the cut is not valid for ``records``.
    """
    if cut.is_unbounded:
        return
    stream = cut.stream
    if not cut.positions:
        raise InvalidStreamCutError(f"{stream}: a stream cut must list at least one segment")
    listed = _resolve(cut, _index(records))

    # 2. offsets within the segments' lengths.
    sizes: dict[int, int | None] = {}
    for r in listed:
        size = _segment_size(r, lengths)
        if size is None and lengths is not None and r.sealed_epoch is None:
            size = 0
        sizes[r.segment_id] = size
        offset = cut.positions[r.segment_id]
        if size is not None and offset > size:
            raise InvalidStreamCutError(
                f"{stream}: offset {offset} of segment {short_segment_name(r.segment_id)} is beyond its "
                f"length {size}")

    present = sorted((r for r in listed if cut.positions[r.segment_id] >= 0), key=lambda r: r.key_start)
    future = [r for r in listed if cut.positions[r.segment_id] < 0]

    # 3. non-negative entries do not overlap.
    for prev, nxt in zip(present, present[1:], strict=False):
        if prev.key_end > nxt.key_start:
            raise InvalidStreamCutError(
                f"{stream}: segments {short_segment_name(prev.segment_id)} [{prev.key_start}, {prev.key_end}) "
                f"and {short_segment_name(nxt.segment_id)} [{nxt.key_start}, {nxt.key_end}) overlap; only a "
                f"future segment (offset -1) may overlap another segment of the cut")

    # 4. a future segment is after every non-negative segment it overlaps.
    for fut, cur in _overlapping_pairs(future, present):
        if cur.segment_id > fut.segment_id:
            raise InvalidStreamCutError(
                f"{stream}: future segment {short_segment_name(fut.segment_id)} (offset -1) comes before "
                f"segment {short_segment_name(cur.segment_id)} at offset {cut.positions[cur.segment_id]}, "
                f"which it overlaps; a future segment must follow the segments it overlaps")

    # 5. the key space is covered.
    held = [(r.key_start, r.key_end) for r in present]
    future_ranges = [(r.key_start, r.key_end) for r in future]
    for gap_start, gap_end in _uncovered(held, 0.0, 1.0):
        for hole in _uncovered(future_ranges, gap_start, gap_end):
            raise InvalidStreamCutError(
                f"{stream}: key range [{hole[0]}, {hole[1]}) is not covered: no segment of the cut "
                f"holds it at a non-negative offset and no future segment (offset -1) covers it")

    # 6. every unlisted segment of the cut's epochs is wholly before or wholly after the cut.
    low = min(r.creation_epoch for r in listed)
    high = max(r.creation_epoch for r in listed)
    listed_ids = set(cut.positions)
    between = [
        r for r in records
        if low <= r.creation_epoch <= high and r.segment_id not in listed_ids
    ]
    after_on: dict[int, list[tuple[float, float]]] = {}
    older: dict[int, list[int]] = {}
    for seg, lst in _overlapping_pairs(between, listed):
        if lst.segment_id < seg.segment_id:
            after_on.setdefault(seg.segment_id, []).append(
                (max(seg.key_start, lst.key_start), min(seg.key_end, lst.key_end)))
            older.setdefault(seg.segment_id, []).append(lst.segment_id)
    for seg in between:
        parts = after_on.get(seg.segment_id)
        if parts and not covers(parts, seg.key_start, seg.key_end):
            hole = _uncovered(parts, seg.key_start, seg.key_end)[0]
            names = ", ".join(short_segment_name(s) for s in sorted(older[seg.segment_id]))
            raise InvalidStreamCutError(
                f"{stream}: segment {short_segment_name(seg.segment_id)} [{seg.key_start}, {seg.key_end}) "
                f"is only partly after the cut: it follows {names} but not on [{hole[0]}, {hole[1]}), "
                f"so the cut would skip part of it; list it as a future segment (offset -1) or move "
                f"the cut")

    # 7. event boundaries.
    if is_event_boundary is not None:
        for r in present:
            offset = cut.positions[r.segment_id]
            if offset == 0 or offset == sizes[r.segment_id]:
                continue
            if not is_event_boundary(r.segment_id, offset):
                raise InvalidStreamCutError(
                    f"{stream}: offset {offset} of segment {short_segment_name(r.segment_id)} is not on an "
                    f"event boundary")


def _is_open_ended(cut: StreamCut) -> bool:
    return not cut.positions


def _segments_between(
    from_cut: StreamCut, to_cut: StreamCut, records: Sequence[SegmentRecord],
) -> list[SegmentRecord]:
    by_id = _index(records)
    from_empty, to_empty = _is_open_ended(from_cut), _is_open_ended(to_cut)
    if not from_empty and not to_empty and from_cut.stream != to_cut.stream:
        raise InvalidStreamCutError(f"cuts of different streams: {from_cut.stream} and {to_cut.stream}")
    if from_empty:
        recs_from = [r for r in records if r.creation_epoch == 0]
        span_from = {r.segment_id: 0 for r in recs_from}
    else:
        recs_from = _resolve(from_cut, by_id)
        span_from = _span_of(recs_from)
    if to_empty:
        active = current_epoch(records)
        recs_to = [r for r in records if r.in_epoch(active)]
        span_to = {r.segment_id: active for r in recs_to}
    else:
        recs_to = _resolve(to_cut, by_id)
        span_to = _span_of(recs_to)
    if not span_from or not span_to:
        return []
    if not from_empty and not to_empty and not _equal_or_after(
            to_cut, recs_to, span_to, from_cut, recs_from, span_from):
        raise InvalidStreamCutError(f"{to_cut!r} is not equal to or after {from_cut!r}")

    from_low, from_high = min(span_from.values()), max(span_from.values())
    to_low, to_high = min(span_to.values()), max(span_to.values())
    chosen: dict[int, SegmentRecord] = {}
    to_check = []
    for r in records:
        if from_high <= to_low and _member_of_some(r, from_high, to_low):
            chosen[r.segment_id] = r  # wholly between the two cuts' epochs
        elif _member_of_some(r, from_low, to_high):
            to_check.append(r)
    # Included iff no overlapping `to` segment is older and no overlapping `from` segment is
    # newer -- unless some overlapping `from` segment is the same or older: a future entry of
    # `from` (-1) overlapping a segment that `from` is still reading does not put that segment
    # before `from` (Pravega drops it; for cuts without future entries the rules agree).
    newer_in_from, reached_by_from = set(), set()
    for seg, f in _overlapping_pairs(to_check, recs_from):
        (newer_in_from if f.segment_id > seg.segment_id else reached_by_from).add(seg.segment_id)
    excluded = newer_in_from - reached_by_from
    for seg, t in _overlapping_pairs(to_check, recs_to):
        if t.segment_id < seg.segment_id:
            excluded.add(seg.segment_id)
    for r in to_check:
        if r.segment_id not in excluded:
            chosen[r.segment_id] = r
    return [chosen[sid] for sid in sorted(chosen)]


def segments_between(from_cut: StreamCut, to_cut: StreamCut, records: Sequence[SegmentRecord]) -> list[int]:
    """Ids of the segments holding data between two cuts (Pravega's ``segmentsBetweenStreamCutSpans``).

    Every segment of the epochs wholly between ``from``'s newest and ``to``'s oldest span epoch,
    plus every segment of the epochs ``[from low, to high]`` that no overlapping ``from`` segment
    is newer than and no overlapping ``to`` segment is older than. One deliberate difference:
    a segment that ``from`` lists (or that an older ``from`` segment overlaps) is kept even when
    a future entry (``-1``) of ``from`` overlaps it -- Pravega drops it, which undercounts the
    bytes still to read in it and never deletes it on truncation. An unbounded (or empty)
    ``from`` means epoch 0; an unbounded ``to`` means the active epoch. Used for truncation
    (segments to delete) and sizes.

    Example:
        >>> segments_between(StreamCut.UNBOUNDED, StreamCut.UNBOUNDED, initial_segments(2))  # doctest: +SKIP
        [0, 1]

    Raises:
        InvalidStreamCutError: unknown segment ids, different streams, or ``to`` not equal to or
            after ``from``.
    """
    return [r.segment_id for r in _segments_between(from_cut, to_cut, records)]


def size_between(
    from_cut: StreamCut,
    to_cut: StreamCut,
    records: Sequence[SegmentRecord],
    lengths: Mapping[int, int] | None = None,
) -> int:
    """Bytes between two cuts (Pravega's ``sizeBetweenStreamCuts``).

    Over :func:`segments_between`, with negative (future) offsets counted as 0: a segment in both
    cuts adds ``to - from``; only in ``to`` adds its ``to`` offset; only in ``from`` adds its size
    minus the ``from`` offset; in neither adds its size. A segment's size is its sealed size, or
    for an open segment ``lengths[id]``; a segment whose size is unknown adds 0. With
    ``to_cut=UNBOUNDED`` and ``lengths`` this is the size from ``from`` to the tail; with
    ``from_cut=UNBOUNDED`` it counts from the start of the stream (truncated bytes included, like
    Pravega's ``getSizeTillStreamCut`` without a reference record).

    Example:
        >>> size_between(StreamCut.UNBOUNDED, StreamCut("a/b", {0: 10, 1: 10}), initial_segments(2))  # doctest: +SKIP
        20

    Raises:
        InvalidStreamCutError: as :func:`segments_between`.
    """
    total = 0
    for r in _segments_between(from_cut, to_cut, records):
        sid = r.segment_id
        in_from, in_to = sid in from_cut.positions, sid in to_cut.positions
        if in_to:
            total += max(to_cut.positions[sid], 0) - (max(from_cut.positions[sid], 0) if in_from else 0)
            continue
        size = _segment_size(r, lengths)
        if size is None:
            continue
        total += max(size, 0) - (max(from_cut.positions[sid], 0) if in_from else 0)
    return total
