"""Segments and epochs: ids, key ranges, epoch membership, successors (pure Python).

Mirrors Pravega's ``NameUtils.computeSegmentId``, ``StreamSegmentRecord`` and the controller's
epoch records. A stream's whole segment history is a list of :class:`SegmentRecord`; epochs are
derived from it: epoch ``e`` holds every segment with ``creation_epoch <= e`` that was not sealed
at or before ``e``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

MAX_EPOCH_OR_NUMBER = (1 << 31) - 1


def segment_id(segment_number: int, creation_epoch: int) -> int:
    """Pravega's segment id: ``creation_epoch << 32 | segment_number``.

    >>> segment_id(3, 1)
    4294967299
    """
    if not (0 <= segment_number <= MAX_EPOCH_OR_NUMBER and 0 <= creation_epoch <= MAX_EPOCH_OR_NUMBER):
        raise ValueError(f"segment number and epoch must be in [0, 2^31): {segment_number}, {creation_epoch}")
    return (creation_epoch << 32) | segment_number


def segment_number(segment_id_: int) -> int:
    """The segment number: the low 32 bits of the id."""
    return segment_id_ & 0xFFFFFFFF


def creation_epoch(segment_id_: int) -> int:
    """The creation epoch: the high 32 bits of the id."""
    return segment_id_ >> 32


def segment_name(scoped_stream: str, segment_id_: int) -> str:
    """Pravega's qualified segment name, e.g. ``iot/sensors/3.#epoch.1``."""
    return f"{scoped_stream}/{short_segment_name(segment_id_)}"


def short_segment_name(segment_id_: int) -> str:
    """``3.#epoch.1``: the segment part of Pravega's qualified segment name."""
    return f"{segment_number(segment_id_)}.#epoch.{creation_epoch(segment_id_)}"


@dataclass(frozen=True)
class SegmentRecord:
    """One segment of a stream's history (Pravega's ``StreamSegmentRecord`` plus seal facts).

    Attributes:
        segment_id: ``creation_epoch << 32 | segment_number``.
        key_start: inclusive lower bound of the key range.
        key_end: exclusive upper bound of the key range.
        creation_time: when the segment's epoch was created.
        sealed_epoch: the first epoch the segment is not part of; ``None`` while open.
        sealed_size: length in bytes when sealed; ``None`` while open.
    """

    segment_id: int
    key_start: float
    key_end: float
    creation_time: datetime | None = None
    sealed_epoch: int | None = None
    sealed_size: int | None = None

    @property
    def segment_number(self) -> int:
        return segment_number(self.segment_id)

    @property
    def creation_epoch(self) -> int:
        return creation_epoch(self.segment_id)

    @property
    def is_sealed(self) -> bool:
        return self.sealed_epoch is not None

    def overlaps(self, other: SegmentRecord | tuple[float, float]) -> bool:
        """Pravega's overlap rule on ``[start, end)`` ranges: ``a.start < b.end and a.end > b.start``."""
        start, end = (other.key_start, other.key_end) if isinstance(other, SegmentRecord) else other
        return self.key_start < end and self.key_end > start

    def in_epoch(self, epoch: int) -> bool:
        """Whether the segment is a member of ``epoch``."""
        return self.creation_epoch <= epoch and (self.sealed_epoch is None or self.sealed_epoch > epoch)

    def __repr__(self) -> str:
        state = f"sealed@{self.sealed_epoch} size={self.sealed_size}" if self.is_sealed else "open"
        return (f"SegmentRecord({self.segment_number}.#epoch.{self.creation_epoch} "
                f"[{self.key_start}, {self.key_end}) {state})")


def initial_segments(count: int, creation_time: datetime | None = None) -> list[SegmentRecord]:
    """Epoch 0: ``count`` segments numbered 0..count-1 over equal key ranges.

    Ranges are computed as Pravega does (``i * (1/n)``), including its floating-point quirk
    where the last ``key_end`` can be ``0.9999999999999999``; we pin the last end to 1.0 so the
    key space is always covered exactly.
    """
    if count < 1:
        raise ValueError(f"a stream needs at least one segment, got {count}")
    width = 1.0 / count
    out = []
    for i in range(count):
        end = 1.0 if i == count - 1 else (i + 1) * width
        out.append(SegmentRecord(segment_id(i, 0), i * width, end, creation_time))
    return out


def current_epoch(records: Iterable[SegmentRecord]) -> int:
    """The active epoch: the highest creation or sealed epoch seen."""
    epoch = 0
    for r in records:
        epoch = max(epoch, r.creation_epoch, r.sealed_epoch or 0)
    return epoch


def epoch_members(records: Iterable[SegmentRecord], epoch: int) -> list[SegmentRecord]:
    """The segments of ``epoch``, sorted by key range."""
    return sorted((r for r in records if r.in_epoch(epoch)), key=lambda r: r.key_start)


def active_segments(records: Iterable[SegmentRecord]) -> list[SegmentRecord]:
    """The open segments (those of the current epoch), sorted by key range."""
    return sorted((r for r in records if not r.is_sealed), key=lambda r: r.key_start)


def find_segment(records: Iterable[SegmentRecord], segment_id_: int) -> SegmentRecord | None:
    for r in records:
        if r.segment_id == segment_id_:
            return r
    return None


def successors_with_predecessors(records: Sequence[SegmentRecord], segment_id_: int) -> dict[int, list[int]]:
    """Pravega's ``getSuccessorsWithPredecessors``.

    The successors of a sealed segment are the segments of its sealed epoch that overlap it; each
    maps to its predecessors, the overlapping segments of the epoch before. An open segment (or any
    segment of a sealed stream, whose segments carry no sealed epoch) has no successors.
    """
    seg = find_segment(records, segment_id_)
    if seg is None or seg.sealed_epoch is None:
        return {}
    sealed_epoch = seg.sealed_epoch
    previous = epoch_members(records, sealed_epoch - 1)
    out: dict[int, list[int]] = {}
    for succ in epoch_members(records, sealed_epoch):
        if succ.overlaps(seg):
            out[succ.segment_id] = sorted(p.segment_id for p in previous if p.overlaps(succ))
    return out


def predecessors(records: Sequence[SegmentRecord], segment_id_: int) -> list[int]:
    """The segments of the epoch before ``segment_id``'s creation epoch that overlap it and were
    sealed when it was created (empty for epoch-0 segments)."""
    seg = find_segment(records, segment_id_)
    if seg is None or seg.creation_epoch == 0:
        return []
    epoch = seg.creation_epoch
    return sorted(
        r.segment_id for r in records
        if r.sealed_epoch == epoch and r.overlaps(seg)
    )
