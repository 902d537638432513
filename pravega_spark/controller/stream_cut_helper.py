"""A stream's cuts as the controller sees them (Pravega's ``StreamCutHelper``): its head and
tail, its truncation record, ``"earliest"``/``"latest"`` resolution, checks of a user's cuts
against the stream, and the tail as of an events-table version.

Functions of the store and a stream's row (``StreamRecord``) and segments; they never change
anything. ``controller.Controller`` puts them behind one typed object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from ..errors import InvalidStreamCutError
from ..store import segment_ranges
from ..store.store import Store
from ..stream.cut_algorithms import (
    head_of_stream,
    stream_cut_equal_or_after,
    tail_cut,
    validate_stream_cut,
)
from ..stream.epochs import epoch_at
from ..stream.record import SEALED, StreamRecord
from ..stream.segments import SegmentRecord, epoch_members, predecessors
from ..stream.stream_cut import StreamCut
from ..stream.truncation import TruncationRecord, initial_truncation_record

CutOrName = StreamCut | str


def head(record: StreamRecord, records: Sequence[SegmentRecord]) -> StreamCut:
    """The stream's head: the truncation point, or the first epoch's segments at 0."""
    if record.head_stream_cut:
        return StreamCut.from_text(record.head_stream_cut)
    return head_of_stream(records, record.scoped_name)


def tail(store: Store, record: StreamRecord, records: Sequence[SegmentRecord],
         version: int | None = None) -> StreamCut:
    """The current epoch's segments at their lengths (as of events-table ``version``, default the
    latest); a sealed stream's at their sealed sizes."""
    current = epoch_members(records, record.current_epoch)
    if record.state == SEALED:
        return tail_cut(record.scoped_name, records, {s.segment_id: s.sealed_size or 0 for s in current})
    tails = store.segment_tails(record.scope, record.stream, [s.segment_id for s in current], version)
    return tail_cut(record.scoped_name, records, {sid: t.length for sid, t in tails.items()})


def truncation(record: StreamRecord, records: Sequence[SegmentRecord]) -> TruncationRecord:
    """The stream's truncation record (an untruncated stream's initial one)."""
    if record.truncation:
        return TruncationRecord.from_json(record.truncation)
    return initial_truncation_record(records, record.scoped_name)


def resolver(store: Store, record: StreamRecord, records: Sequence[SegmentRecord],
             version: int | None = None, tail_cut_: StreamCut | None = None) -> Callable[[CutOrName], StreamCut]:
    """A function mapping ``"earliest"`` / ``"latest"`` / a ``StreamCut`` to a ``StreamCut``
    (the tail is read lazily, once, at ``version``)."""
    cache = {"tail": tail_cut_}

    def latest() -> StreamCut:
        if cache["tail"] is None:
            cache["tail"] = tail(store, record, records, version)
        return cache["tail"]

    def resolve(cut: CutOrName, what: str = "a cut") -> StreamCut:
        if isinstance(cut, str):
            if cut == "earliest":
                return head(record, records)
            if cut == "latest":
                return latest()
            raise InvalidStreamCutError(f"{what} must be a StreamCut, 'earliest' or 'latest', got {cut!r}")
        if not isinstance(cut, StreamCut):
            raise InvalidStreamCutError(f"{what} must be a StreamCut, 'earliest' or 'latest', got "
                                        f"{type(cut).__name__}")
        return latest() if cut.is_unbounded else cut

    return resolve


def check_cuts(store: Store, record: StreamRecord, records: Sequence[SegmentRecord],
               cuts: Sequence[StreamCut], before_probe: Callable[[], None] | None = None) -> None:
    """Validate cuts against the stream: their structure, then ``before_probe()`` (if given),
    then one query checking that every offset is an event boundary (which also bounds it by the
    segment's length).

    Raises:
        InvalidStreamCutError: a cut is not a valid cut of the stream.
    """
    cuts = [c for c in cuts if not c.is_unbounded]
    for cut in cuts:
        if cut.stream != record.scoped_name:
            raise InvalidStreamCutError(f"cut of {cut.stream} used with stream {record.scoped_name}")
        validate_stream_cut(cut, records, None)
    if before_probe is not None:
        before_probe()
    if not cuts:
        return
    known = store.known_boundaries(record.scope, record.stream, record.creation_time)
    wanted = {pos for cut in cuts for pos in cut.positions.items()} - known
    # the events DataFrame only when a position needs the probe (building it costs ~50 ms)
    events = store.events(record.scope, record.stream) if any(o > 0 for _, o in wanted) else None
    boundary = segment_ranges.event_boundary_checker(events, wanted)
    for cut in cuts:
        validate_stream_cut(cut, records, None, is_event_boundary=lambda s, o: (s, o) in known or boundary(s, o))
    known.update(pos for cut in cuts for pos in cut.positions.items())


def cut_at_version(store: Store, record: StreamRecord, records: Sequence[SegmentRecord],
                   version: int) -> StreamCut:
    """The stream's tail as of events-table version ``version``, from the log: each segment that
    was open then (its predecessors sealed, itself not) at its length, and the sealed segments of
    a sealed stream at theirs; never before the head."""
    gone: set[int] = set()
    if record.truncation:
        done = TruncationRecord.from_json(record.truncation)
        gone = set(done.deleted_segments) | set(done.to_delete)
    tails = store.segment_tails(record.scope, record.stream,
                                [r.segment_id for r in records if r.segment_id not in gone], version)

    def closed(sid: int) -> bool:
        return sid in gone or tails[sid].sealed

    positions = {}
    for r in records:
        if r.segment_id in gone or not all(closed(p) for p in predecessors(records, r.segment_id)):
            continue
        if tails[r.segment_id].sealed and r.sealed_epoch is not None:
            continue
        positions[r.segment_id] = tails[r.segment_id].length
    return later_cut(records, StreamCut(record.scoped_name, positions), head(record, records))


def cut_at_time(store: Store, record: StreamRecord, records: Sequence[SegmentRecord], at: datetime) -> StreamCut:
    """The tail as it was at ``at``: the segments of the epoch active then, each at the end of
    its last event written at or before ``at``; never before the head."""
    ids = [s.segment_id for s in epoch_members(records, epoch_at(records, at))]
    found = segment_ranges.segment_ends_at(store.events(record.scope, record.stream), ids, at)
    cut = StreamCut(record.scoped_name, {sid: found.get(sid, 0) for sid in ids})
    return later_cut(records, cut, head(record, records))


def later_cut(records: Sequence[SegmentRecord], cut: StreamCut, other: StreamCut) -> StreamCut:
    """``cut`` unless it is before ``other``."""
    return cut if stream_cut_equal_or_after(cut, other, records) else other
