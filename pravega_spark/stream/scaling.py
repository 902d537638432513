"""Scale planning: validate a manual scale and compute the epoch transition (pure Python).

Mirrors Pravega's controller: ``PersistentStreamBase.submitScale`` validation (``canScaleFor``,
``validateInputRange``, the ``minNumSegments`` check, in that order),
``RecordHelper.computeEpochTransition`` (new segment numbering) and the equal splits of
``AutoScaleTask``. Nothing here touches storage: :func:`plan_scale` returns a frozen
:class:`EpochTransition` (Pravega's ``EpochTransitionRecord``) that the stream manager records
first, then applies with :func:`apply_transition` once the sealed segments' sizes are known.

Example:
    >>> from datetime import datetime, timezone
    >>> from pravega_spark.stream.segments import initial_segments
    >>> history = initial_segments(2)
    >>> t = plan_scale(history, [1], [(0.5, 0.75), (0.75, 1.0)], min_num_segments=1,
    ...                scale_time=datetime(2024, 1, 1, tzinfo=timezone.utc))
    >>> [s.segment_number for s in t.new_segments], t.new_epoch
    ([2, 3], 1)
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from pravega_spark.errors import InvalidConfigError, InvalidScaleError, ScalePreconditionError
from pravega_spark.stream.segments import SegmentRecord, current_epoch, epoch_members, segment_id

__all__ = [
    "EpochTransition",
    "apply_transition",
    "merge_key_ranges",
    "plan_scale",
    "split_ranges",
]

KeyRange = tuple[float, float]

_EPOCH_TIME_STEP = timedelta(microseconds=1)
"""Pravega makes each epoch at least 1 ms younger than the previous; our clock unit is 1 µs."""


def _utc(value: object, what: str) -> datetime:
    """A timezone-aware UTC datetime (naive ones are taken as UTC)."""
    if not isinstance(value, datetime):
        raise InvalidScaleError(f"{what} must be a datetime, got {type(value).__name__} {value!r}")
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _segment_ids(values: Iterable[object], what: str) -> tuple[int, ...]:
    """Sorted, de-duplicated segment ids (ints, not bools)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidScaleError(f"{what} must be an iterable of segment ids, got {values!r}")
    ids = set()
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidScaleError(
                f"{what} must hold int segment ids, got {type(value).__name__} {value!r}"
            )
        ids.add(int(value))
    return tuple(sorted(ids))


def _key_ranges(values: Iterable[object]) -> list[KeyRange]:
    """``(low, high)`` float pairs in the given order (shape and types checked, not values)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidScaleError(
            f"new_key_ranges must be an iterable of (low, high), got {values!r}"
        )
    out = []
    for value in values:
        try:
            low, high = value  # type: ignore[misc]
        except (TypeError, ValueError):
            raise InvalidScaleError(
                f"each new key range must be a (low, high) pair, got {value!r}"
            ) from None
        for bound in (low, high):
            if isinstance(bound, bool) or not isinstance(bound, numbers.Real):
                raise InvalidScaleError(
                    f"key range bounds must be numbers, got {type(bound).__name__} {bound!r} "
                    f"in {value!r}"
                )
        out.append((float(low), float(high)))
    return out


def _check_bounds(ranges: Iterable[KeyRange]) -> None:
    """Pravega's ``low < high`` check, plus ``0 <= low`` and ``high <= 1`` (finite)."""
    for low, high in ranges:
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low < high <= 1.0):
            raise InvalidScaleError(
                f"new key range ({low}, {high}) is invalid: need 0.0 <= low < high <= 1.0"
            )


def merge_key_ranges(ranges: Iterable[KeyRange]) -> list[KeyRange]:
    """Sort ``[low, high)`` ranges and merge each contiguous run into one range.

    Ranges merge only when one starts exactly where the previous ended (exact float equality);
    overlapping ranges are kept apart, so an overlap never looks like a valid cover. Mirrors the
    ``reduce`` step of Pravega's ``RecordHelper.validateInputRange``.

    Example:
        >>> merge_key_ranges([(0.5, 1.0), (0.0, 0.25), (0.25, 0.5)])
        [(0.0, 1.0)]
        >>> merge_key_ranges([(0.0, 0.2), (0.3, 0.4)])
        [(0.0, 0.2), (0.3, 0.4)]
    """
    merged: list[KeyRange] = []
    for low, high in sorted(ranges):
        if merged and merged[-1][1] == low:
            merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def _first_overlap(ranges: Iterable[KeyRange]) -> tuple[KeyRange, KeyRange] | None:
    ordered = sorted(ranges)
    for previous, current in zip(ordered, ordered[1:], strict=False):
        if current[0] < previous[1]:
            return previous, current
    return None


@dataclass(frozen=True)
class EpochTransition:
    """A planned scale: which segments to seal and which to create (Pravega's
    ``EpochTransitionRecord``).

    Attributes:
        active_epoch: the epoch the scale was planned against.
        new_epoch: ``active_epoch + 1``.
        sealed_segments: ids of the segments to seal, sorted.
        new_segments: the new segments, numbered in the order their ranges were given, each with
            ``creation_time == scale_time``.
        scale_time: the new epoch's creation time (UTC).

    Example:
        >>> from pravega_spark.stream.segments import initial_segments
        >>> t = plan_scale(initial_segments(1), [0], [(0.0, 0.5), (0.5, 1.0)], 1,
        ...                datetime(2024, 1, 1))
        >>> EpochTransition.from_json(t.to_json()) == t
        True
    """

    active_epoch: int
    new_epoch: int
    sealed_segments: tuple[int, ...]
    new_segments: tuple[SegmentRecord, ...]
    scale_time: datetime

    def __post_init__(self) -> None:
        for what, value in (("active_epoch", self.active_epoch), ("new_epoch", self.new_epoch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidScaleError(f"{what} must be an int >= 0, got {value!r}")
        if self.new_epoch != self.active_epoch + 1:
            raise InvalidScaleError(
                f"new_epoch must be active_epoch + 1 = {self.active_epoch + 1}, got {self.new_epoch}"
            )
        object.__setattr__(
            self, "sealed_segments", _segment_ids(self.sealed_segments, "sealed_segments")
        )
        object.__setattr__(self, "new_segments", tuple(self.new_segments))
        object.__setattr__(self, "scale_time", _utc(self.scale_time, "scale_time"))

    @property
    def new_segment_ids(self) -> tuple[int, ...]:
        """Ids of the new segments, in creation order."""
        return tuple(s.segment_id for s in self.new_segments)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO 8601 with offset); :meth:`from_dict` reverses it."""
        return {
            "active_epoch": self.active_epoch,
            "new_epoch": self.new_epoch,
            "sealed_segments": list(self.sealed_segments),
            "new_segments": [
                {
                    "segment_id": s.segment_id,
                    "key_start": s.key_start,
                    "key_end": s.key_end,
                    "creation_time": None
                    if s.creation_time is None
                    else _utc(s.creation_time, "creation_time").isoformat(),
                }
                for s in self.new_segments
            ],
            "scale_time": self.scale_time.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpochTransition:
        """Rebuild a transition from :meth:`to_dict` output."""
        try:
            new_segments = tuple(
                SegmentRecord(
                    int(s["segment_id"]),
                    float(s["key_start"]),
                    float(s["key_end"]),
                    None
                    if s["creation_time"] is None
                    else datetime.fromisoformat(s["creation_time"]),
                )
                for s in data["new_segments"]
            )
            return cls(
                data["active_epoch"],
                data["new_epoch"],
                tuple(data["sealed_segments"]),
                new_segments,
                datetime.fromisoformat(data["scale_time"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidScaleError):
                raise
            raise InvalidScaleError(f"not a valid epoch transition record: {exc!r}") from None

    def to_json(self) -> str:
        """Compact, key-sorted JSON; ``EpochTransition.from_json(t.to_json()) == t``."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> EpochTransition:
        """Parse :meth:`to_json` output."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InvalidScaleError(f"epoch transition is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def __repr__(self) -> str:
        new = ", ".join(
            f"{s.segment_number}.#epoch.{s.creation_epoch} [{s.key_start}, {s.key_end})"
            for s in self.new_segments
        )
        return (
            f"EpochTransition(epoch {self.active_epoch} -> {self.new_epoch} at "
            f"{self.scale_time.isoformat()}: seal {list(self.sealed_segments)}, create [{new}])"
        )


def plan_scale(
    records: Sequence[SegmentRecord],
    sealed_segments: Iterable[int],
    new_key_ranges: Iterable[tuple[float, float]],
    min_num_segments: int,
    scale_time: datetime,
    previous_epoch_time: datetime | None = None,
) -> EpochTransition:
    """Validate a manual scale against the stream's history and compute its epoch transition.

    Checks, in the order of Pravega's ``submitScale``:

    1. every sealed segment is in the current epoch (``ScalePreconditionError``); at least one
       segment to seal and one new range (``InvalidScaleError``); duplicate ids collapse;
    2. each new range has ``0 <= low < high <= 1``, new ranges do not overlap, and the sorted,
       merged new ranges equal the merged ranges of the sealed segments, compared exactly
       (``InvalidScaleError``); several disjoint splits/merges in one call are fine;
    3. ``current - sealed + new >= min_num_segments`` (``ScalePreconditionError``).

    New segments get epoch ``current + 1`` and numbers from ``max(number in current epoch) + 1``,
    in the order ``new_key_ranges`` was given. The new epoch's time is
    ``max(scale_time, previous_epoch_time + 1 µs)`` (Pravega: ``max(scaleTs, prev + 1 ms)``);
    when ``previous_epoch_time`` is None it is taken from the current epoch's segments'
    ``creation_time`` if they have one. Naive datetimes are taken as UTC.

    Example:
        >>> from pravega_spark.stream.segments import initial_segments
        >>> t = plan_scale(initial_segments(3), [0, 1], [(0.0, 2 / 3)], 1, datetime(2024, 1, 1))
        >>> t.sealed_segments, t.new_segment_ids
        ((0, 1), (4294967299,))

    Raises:
        ScalePreconditionError: a sealed segment is not in the current epoch, or too few segments
            would remain.
        InvalidScaleError: malformed input, or the new ranges do not exactly replace the sealed
            segments' ranges.
        InvalidConfigError: ``min_num_segments`` is not an int >= 1.
    """
    history = list(records)
    if isinstance(min_num_segments, bool) or not isinstance(min_num_segments, int):
        raise InvalidConfigError(
            f"min_num_segments must be an int >= 1, got {type(min_num_segments).__name__} "
            f"{min_num_segments!r}"
        )
    if min_num_segments < 1:
        raise InvalidConfigError(f"min_num_segments must be >= 1, got {min_num_segments}")
    when = _utc(scale_time, "scale_time")
    sealed = _segment_ids(sealed_segments, "sealed_segments")
    ranges = _key_ranges(new_key_ranges)

    active = current_epoch(history)
    members = epoch_members(history, active)
    member_ids = {m.segment_id for m in members}
    outside = [s for s in sealed if s not in member_ids]
    if outside:
        raise ScalePreconditionError(
            f"segments {outside} are not in the current epoch {active}, whose segments are "
            f"{sorted(member_ids)}"
        )
    if not sealed:
        raise InvalidScaleError("sealed_segments is empty: a scale must seal at least one segment")
    if not ranges:
        raise InvalidScaleError("new_key_ranges is empty: a scale must create at least one segment")

    _check_bounds(ranges)
    overlap = _first_overlap(ranges)
    if overlap is not None:
        raise InvalidScaleError(f"new key ranges {overlap[0]} and {overlap[1]} overlap")
    sealed_set = set(sealed)
    sealed_merged = merge_key_ranges(
        (m.key_start, m.key_end) for m in members if m.segment_id in sealed_set
    )
    new_merged = merge_key_ranges(ranges)
    if sealed_merged != new_merged:
        raise InvalidScaleError(
            f"new key ranges must exactly cover the sealed segments' ranges: sealed segments "
            f"{list(sealed)} cover {sealed_merged}, new ranges cover {new_merged}"
        )

    remaining = len(members) - len(sealed) + len(ranges)
    if remaining < min_num_segments:
        raise ScalePreconditionError(
            f"the scale would leave {remaining} segments ({len(members)} - {len(sealed)} sealed "
            f"+ {len(ranges)} new), at least min_num_segments={min_num_segments} required"
        )

    if previous_epoch_time is None:
        times = [
            _utc(r.creation_time, "creation_time")
            for r in history
            if r.creation_epoch == active and r.creation_time is not None
        ]
        previous = max(times) if times else None
    else:
        previous = _utc(previous_epoch_time, "previous_epoch_time")
    if previous is not None:
        when = max(when, previous + _EPOCH_TIME_STEP)

    new_epoch = active + 1
    next_number = max(m.segment_number for m in members) + 1
    new_segments = tuple(
        SegmentRecord(segment_id(next_number + i, new_epoch), low, high, when)
        for i, (low, high) in enumerate(ranges)
    )
    return EpochTransition(active, new_epoch, sealed, new_segments, when)


def apply_transition(
    records: Sequence[SegmentRecord],
    transition: EpochTransition,
    sealed_sizes: Mapping[int, int],
) -> list[SegmentRecord]:
    """The stream's history after ``transition``: sealed segments marked, new ones appended.

    Each sealed segment gets ``sealed_epoch = transition.new_epoch`` and its size from
    ``sealed_sizes`` (extra entries are ignored); the new segments are appended in creation
    order; everything else keeps its place. Applying a transition that is already applied
    returns the history unchanged, so a crashed scale can be finished by re-applying it.

    Example:
        >>> from pravega_spark.stream.segments import initial_segments
        >>> history = initial_segments(1)
        >>> t = plan_scale(history, [0], [(0.0, 0.5), (0.5, 1.0)], 1, datetime(2024, 1, 1))
        >>> [r.sealed_epoch for r in apply_transition(history, t, {0: 42})]
        [1, None, None]

    Raises:
        ScalePreconditionError: the history is not at ``transition.active_epoch`` (another scale
            happened), a segment to seal is not open, or the transition is half-applied.
        InvalidScaleError: a sealed segment's size is missing or not an int >= 0.
    """
    history = list(records)
    sealed = set(transition.sealed_segments)
    by_id = {r.segment_id: r for r in history}
    present = [s in by_id for s in transition.new_segment_ids]
    if all(present) and all(
        s in by_id and by_id[s].sealed_epoch == transition.new_epoch for s in sealed
    ):
        return history
    if any(present):
        raise ScalePreconditionError(
            f"{transition!r} is partly applied: some of its new segments already exist"
        )
    active = current_epoch(history)
    if active != transition.active_epoch:
        raise ScalePreconditionError(
            f"the transition was planned on epoch {transition.active_epoch} but the stream is at "
            f"epoch {active}"
        )
    open_ids = {r.segment_id for r in epoch_members(history, active)}
    not_open = sorted(sealed - open_ids)
    if not_open:
        raise ScalePreconditionError(
            f"segments {not_open} are not in the current epoch {active}, whose segments are "
            f"{sorted(open_ids)}"
        )
    missing = sorted(s for s in sealed if s not in sealed_sizes)
    if missing:
        raise InvalidScaleError(f"sealed_sizes has no size for sealed segments {missing}")
    for s in sorted(sealed):
        size = sealed_sizes[s]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidScaleError(f"sealed size of segment {s} must be an int >= 0, got {size!r}")
    out = [
        replace(r, sealed_epoch=transition.new_epoch, sealed_size=sealed_sizes[r.segment_id])
        if r.segment_id in sealed
        else r
        for r in history
    ]
    out.extend(transition.new_segments)
    return out


def split_ranges(key_start: float, key_end: float, parts: int) -> list[tuple[float, float]]:
    """Split ``[key_start, key_end)`` into ``parts`` equal ranges, the last ending at ``key_end``.

    Mirrors the split computed by Pravega's ``AutoScaleTask`` for a scale-up request.

    Example:
        >>> split_ranges(0.0, 0.5, 2)
        [(0.0, 0.25), (0.25, 0.5)]
        >>> split_ranges(0.0, 1.0, 3)[-1]
        (0.6666666666666666, 1.0)
    """
    [(start, end)] = _key_ranges([(key_start, key_end)])
    _check_bounds([(start, end)])
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise InvalidScaleError(f"parts must be an int >= 1, got {parts!r}")
    width = (end - start) / parts
    bounds = [start + i * width for i in range(parts)] + [end]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def scale_up_to(segments: Sequence[SegmentRecord], min_num_segments: int) -> tuple[list[int], list[tuple[float, float]]]:
    """The scale that brings the open ``segments`` up to ``min_num_segments`` (an update that
    raises the minimum, as Pravega's ``UpdateStreamTask`` does): ``(sealed ids, new ranges)``,
    both empty when there are enough segments already.

    The parts go one at a time to the segment whose parts would be widest, so the new segments
    are as even as the current key ranges allow; each split segment is cut into equal parts.

    Example:
        >>> from pravega_spark.stream.segments import initial_segments
        >>> scale_up_to(initial_segments(2), 4)
        ([0, 1], [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)])
    """
    parts = {s.segment_id: 1 for s in segments}
    width = {s.segment_id: s.key_end - s.key_start for s in segments}
    for _ in range(max(0, min_num_segments - len(segments))):
        widest = max(sorted(parts), key=lambda sid: width[sid] / parts[sid])
        parts[widest] += 1
    sealed = sorted(sid for sid, n in parts.items() if n > 1)
    by_id = {s.segment_id: s for s in segments}
    ranges = [r for sid in sorted(sealed, key=lambda i: by_id[i].key_start)
              for r in split_ranges(by_id[sid].key_start, by_id[sid].key_end, parts[sid])]
    return sealed, ranges
