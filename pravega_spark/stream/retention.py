"""Retention policies: the retention set and the choice of a truncation point (pure Python).

Pravega's ``StreamMetadataTasks`` retention (``getTruncationStreamCutByTimeLimit/BySizeLimit``,
``getBoundStreamCuts``, ``truncateAtLowerBoundOrMax``) and ``RetentionSet``. A retention record is
a tail cut taken by a retention run, with when it was taken and how many bytes the stream held
from its very start up to it (truncated bytes included), so sizes can be compared by subtraction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .config import RetentionPolicy, RetentionType
from .cut_algorithms import (
    CutComparison,
    compare_stream_cuts,
    size_between,
    stream_cut_equal_or_after,
)
from .segments import SegmentRecord
from .stream_cut import StreamCut


@dataclass(frozen=True)
class RetentionRecord:
    """One entry of a stream's retention set (Pravega's ``StreamCutRecord``).

    Attributes:
        recording_time: when the cut was taken (UTC).
        recording_size: bytes from the stream's start up to the cut, truncated bytes included.
        stream_cut: the tail cut taken.
    """

    recording_time: datetime
    recording_size: int
    stream_cut: StreamCut

    def __repr__(self) -> str:
        return (f"RetentionRecord({self.recording_time.isoformat()}, size={self.recording_size}, "
                f"cut={self.stream_cut!r})")


def reference_record(cut: StreamCut, retention_set: Sequence[RetentionRecord],
                     segments: Sequence[SegmentRecord]) -> RetentionRecord | None:
    """The newest record whose cut ``cut`` is equal to or after (Pravega's
    ``findStreamCutReferenceRecordBefore``), or None."""
    for record in reversed(retention_set):
        if stream_cut_equal_or_after(cut, record.stream_cut, segments):
            return record
    return None


def size_till(cut: StreamCut, retention_set: Sequence[RetentionRecord], segments: Sequence[SegmentRecord],
              lengths: Mapping[int, int] | None = None) -> int:
    """Bytes from the stream's start up to ``cut`` (Pravega's ``getSizeTillStreamCut``): the
    reference record's size plus the bytes from it to ``cut``, or the bytes from the start."""
    ref = reference_record(cut, retention_set, segments)
    if ref is None:
        return size_between(StreamCut.UNBOUNDED, cut, segments, lengths)
    return ref.recording_size + size_between(ref.stream_cut, cut, segments, lengths)


def record_due(retention_set: Sequence[RetentionRecord], now: datetime, frequency: timedelta) -> bool:
    """Whether a run at ``now`` records a new cut: no record yet, or the newest one is strictly
    older than ``frequency`` (Pravega's ``generateStreamCutIfRequired``)."""
    return not retention_set or now - retention_set[-1].recording_time > frequency


def new_retention_record(tail: StreamCut, retention_set: Sequence[RetentionRecord],
                         segments: Sequence[SegmentRecord], now: datetime,
                         lengths: Mapping[int, int] | None = None) -> RetentionRecord:
    """The record a run at ``now`` adds for the stream's ``tail``."""
    return RetentionRecord(now, size_till(tail, retention_set, segments, lengths), tail)


def _retained(policy: RetentionPolicy, retention_set: Sequence[RetentionRecord], now: datetime):
    """Per record, what truncating there would keep: bytes (SIZE) or age (TIME)."""
    if policy.retention_type is RetentionType.SIZE:
        latest = retention_set[-1].recording_size
        return [latest - r.recording_size for r in retention_set]
    return [now - r.recording_time for r in retention_set]


def bound_records(policy: RetentionPolicy, retention_set: Sequence[RetentionRecord],
                  now: datetime) -> tuple[RetentionRecord | None, RetentionRecord | None]:
    """``(min, max)`` truncation records (Pravega's ``getBoundStreamCuts``).

    ``min`` is the most recent record that keeps at least ``retention_param`` (smallest retained
    amount >= param); ``max`` the record keeping the most while staying within
    ``[retention_param, retention_max]`` (max None = unbounded); ``max`` falls back to ``min``.
    Ties keep the older record.
    """
    if not retention_set:
        return None, None
    retained = _retained(policy, retention_set, now)
    param, top = policy.retention_param, policy.retention_max
    lower = upper = None
    for record, kept in zip(retention_set, retained, strict=True):
        if kept >= param and (lower is None or kept < lower[1]):
            lower = (record, kept)
        if kept >= param and (top is None or kept <= top) and (upper is None or kept > upper[1]):
            upper = (record, kept)
    low = lower[0] if lower else None
    return low, (upper[0] if upper else low)


def record_before(lower_bound: StreamCut, retention_set: Sequence[RetentionRecord],
                  segments: Sequence[SegmentRecord]) -> RetentionRecord | None:
    """The newest record at or before the lower bound (Pravega's ``getStreamcutBeforeLowerbound``)."""
    return reference_record(lower_bound, retention_set, segments)


def truncation_point(policy: RetentionPolicy, retention_set: Sequence[RetentionRecord],
                     lower_bound: StreamCut | None, now: datetime, segments: Sequence[SegmentRecord],
                     lengths: Mapping[int, int] | None = None) -> StreamCut | None:
    """Where a retention run truncates, or None (Pravega's ``StreamMetadataTasks.retention``).

    Without subscribers (no lower bound): at the ``min`` record. With a lower bound, by the
    policy's type as ``getTruncationStreamCutBySizeLimit`` / ``ByTimeLimit`` decide: the lower
    bound, clamped from below by the ``min`` limit (keep at least) and from above by the ``max``
    limit (keep at most).
    """
    if not retention_set:
        return None
    low, high = bound_records(policy, retention_set, now)
    if lower_bound is None or not lower_bound.positions:
        return low.stream_cut if low else None
    if policy.retention_type is RetentionType.SIZE:
        return _size_limited(policy, retention_set, lower_bound, low, high, segments, lengths)
    return _time_limited(policy, retention_set, lower_bound, low, high, now, segments)


def _size_limited(policy, retention_set, lower_bound, low, high, segments, lengths) -> StreamCut | None:
    latest = retention_set[-1].recording_size
    retained_at_bound = latest - size_till(lower_bound, retention_set, segments, lengths)
    if retained_at_bound < policy.retention_param:
        # the lower bound keeps too little: truncate only at a record that keeps the minimum
        # (Pravega maps a missing min record to no truncation)
        if low is None:
            return None
        if compare_stream_cuts(low.stream_cut, lower_bound, segments) is CutComparison.BEFORE:
            return low.stream_cut
        before = record_before(lower_bound, retention_set, segments)
        return before.stream_cut if before else None
    if policy.retention_max is None or retained_at_bound < policy.retention_max:
        return lower_bound
    if high is not None and latest - high.recording_size < retained_at_bound:
        return high.stream_cut
    return lower_bound


def _time_limited(policy, retention_set, lower_bound, low, high, now, segments) -> StreamCut | None:
    if low is None:
        return None
    relation = compare_stream_cuts(low.stream_cut, lower_bound, segments)
    if relation is CutComparison.BEFORE:
        return low.stream_cut
    if relation is CutComparison.OVERLAPS:
        before = record_before(lower_bound, retention_set, segments)
        return before.stream_cut if before else None
    max_bound = None
    if policy.retention_max is not None:
        old_enough = [r for r in retention_set if now - r.recording_time >= policy.retention_max]
        max_bound = old_enough[-1] if old_enough else None
    if max_bound is None:
        return lower_bound
    relation = compare_stream_cuts(lower_bound, max_bound.stream_cut, segments)
    if relation is CutComparison.EQUAL_OR_AFTER:
        return lower_bound
    if relation is CutComparison.BEFORE:
        return high.stream_cut if high else max_bound.stream_cut
    return max_bound.stream_cut


def records_after_truncation(retention_set: Sequence[RetentionRecord], truncation_cut: StreamCut,
                             segments: Sequence[SegmentRecord]) -> list[RetentionRecord]:
    """The retention set after truncating at ``truncation_cut``: every record up to and including
    the newest one the cut is equal to or after is dropped (Pravega's ``deleteStreamCutBefore``)."""
    ref = reference_record(truncation_cut, retention_set, segments)
    if ref is None:
        return list(retention_set)
    return list(retention_set[retention_set.index(ref) + 1:])
