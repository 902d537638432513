"""A reader group's shared state and its transitions (Pravega's ``ReaderGroupState`` and the rules
of ``ReaderGroupStateManager``), as pure functions on a frozen value.

Every transition takes a state and returns a new one; the class that stores the state (in Delta,
by compare-and-set) applies one transition per commit, so concurrent readers in any process see
each other's updates as Pravega's state synchronizer does.

Segments are ``(scoped stream, segment id)`` pairs (:class:`SegmentRef`). The state holds:

- ``assigned``: reader -> its segments -> the offset recorded for it (at acquisition and at each
  checkpoint: where ``reader_offline`` without a position resumes, at-least-once);
- ``positions``: reader -> its segments -> the offset it had processed at its latest commit of the
  group's state (the reader keeps its live positions in memory and refreshes them in its member
  row: see ``reader_group``);
- ``unassigned``: readable segments nobody owns -> offset to resume at;
- ``future``: successors -> the predecessors still to complete (a successor becomes unassigned at
  offset 0 only when all its predecessors are completed: Pravega's ordering rule);
- ``end_offsets``: the group's end cuts, per segment;
- ``checkpoints``: pending and completed checkpoints, oldest first (the latest
  ``KEPT_CHECKPOINTS`` completed ones are kept);
- ``last_seen``: reader -> when it last committed the group's state (ms since the epoch; its
  member row holds its later refreshes), so silent readers can be taken offline;
- ``incarnations``: reader -> the id of its current join (member rows of an earlier join of the
  same reader id are ignored);
- ``sink``: the path of the group's exactly-once Delta sink (``ReaderGroup.delta_sink``), if any:
  where a dead reader's processed positions are read;
- ``last_checkpoint_ms``: when the latest checkpoint started (or the group was created), for
  automatic checkpoints: one starts when the interval has passed and none is pending (Pravega).

Balancing follows Pravega with lag left out (every reader's lag counts the same, so a reader's
relative size is its number of segments): a reader acquires
``max(max(unassigned // readers, min(unassigned, round(segments / readers) - owned)), 1)``
unassigned segments when there are any, and releases one segment (its highest by a hash seeded
with its id) when it owns more than one and more than ``min size + max(1, unassigned)``, never
while a checkpoint waits for it.

Example:
    >>> s = ReaderGroupState.initial({SegmentRef("iot/s", 0): 0, SegmentRef("iot/s", 1): 0})
    >>> s = s.add_reader("r1").add_reader("r2")
    >>> s, got = s.acquire("r1")
    >>> [ref.segment_id for ref in got]
    [0]
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ..errors import IllegalStateError, MaxNumberOfCheckpointsExceededError

__all__ = ["Checkpoint", "MaxNumberOfCheckpointsExceededError", "ReaderGroupState", "SegmentRef"]

KEPT_CHECKPOINTS = 10  # completed checkpoints kept for get_checkpoint (older ones are dropped)
AUTOMATIC_PREFIX = "auto-"  # names of automatic checkpoints: the prefix and the start time in ms


@dataclass(frozen=True, order=True)
class SegmentRef:
    """One segment of one of the group's streams."""

    stream: str
    segment_id: int

    def __str__(self) -> str:
        return f"{self.stream}#{self.segment_id}"

    @classmethod
    def parse(cls, text: str) -> SegmentRef:
        stream, sid = text.rsplit("#", 1)
        return cls(stream, int(sid))


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(sorted(mapping.items())))


def release_rank(reader_id: str, segment: SegmentRef) -> float:
    """Which segment a reader releases first: the highest of a hash seeded with its id (Pravega:
    ``HashHelper.seededWith(readerId).hashToRange(segment)``; the hash differs, the rule not)."""
    digest = hashlib.sha1(f"{reader_id}\0{segment}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / float(1 << 64)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint: the readers it still waits for and the positions collected so far."""

    name: str
    waiting: frozenset[str]
    positions: Mapping[SegmentRef, int]

    @property
    def complete(self) -> bool:
        return not self.waiting


@dataclass(frozen=True)
class ReaderGroupState:
    """The group's state; every method returns a new state (see the module docstring)."""

    assigned: Mapping[str, Mapping[SegmentRef, int]] = field(default_factory=lambda: _frozen({}))
    positions: Mapping[str, Mapping[SegmentRef, int]] = field(default_factory=lambda: _frozen({}))
    unassigned: Mapping[SegmentRef, int] = field(default_factory=lambda: _frozen({}))
    future: Mapping[SegmentRef, frozenset[int]] = field(default_factory=lambda: _frozen({}))
    end_offsets: Mapping[SegmentRef, int] = field(default_factory=lambda: _frozen({}))
    checkpoints: tuple[Checkpoint, ...] = ()
    last_seen: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    last_checkpoint_ms: int = 0
    revision: int = 0  # one more at every stored change (the state synchronizer's revision)
    incarnations: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    sink: str | None = None

    @classmethod
    def initial(cls, start: Mapping[SegmentRef, int], end_offsets: Mapping[SegmentRef, int] | None = None,
                future: Mapping[SegmentRef, Iterable[int]] | None = None, now_ms: int = 0) -> ReaderGroupState:
        """A new group: the start cuts' segments unassigned at their offsets (``future`` holds
        segments of a start cut at -1, with the predecessors they wait for); ``now_ms`` starts
        the automatic checkpoint interval."""
        return cls(unassigned=_frozen(start), end_offsets=_frozen(end_offsets or {}),
                   future=_frozen({ref: frozenset(p) for ref, p in (future or {}).items()}),
                   last_checkpoint_ms=now_ms)

    # ---- storage form -------------------------------------------------------------------------
    def to_json(self) -> str:
        """The state as JSON (segments as ``"scope/stream#id"``)."""
        def offsets(m: Mapping[SegmentRef, int]) -> dict[str, int]:
            return {str(ref): off for ref, off in m.items()}

        return json.dumps({
            "assigned": {r: offsets(s) for r, s in self.assigned.items()},
            "positions": {r: offsets(s) for r, s in self.positions.items()},
            "unassigned": offsets(self.unassigned),
            "future": {str(ref): sorted(w) for ref, w in self.future.items()},
            "end_offsets": offsets(self.end_offsets),
            "checkpoints": [{"name": c.name, "waiting": sorted(c.waiting), "positions": offsets(c.positions)}
                            for c in self.checkpoints],
            "last_seen": dict(self.last_seen),
            "last_checkpoint_ms": self.last_checkpoint_ms,
            "revision": self.revision,
            "incarnations": dict(self.incarnations),
            "sink": self.sink,
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ReaderGroupState:
        data = json.loads(text)

        def offsets(m: Mapping[str, int]) -> Mapping[SegmentRef, int]:
            return _frozen({SegmentRef.parse(k): int(v) for k, v in m.items()})

        return cls(assigned=_frozen({r: offsets(s) for r, s in data["assigned"].items()}),
                   positions=_frozen({r: offsets(s) for r, s in data["positions"].items()}),
                   unassigned=offsets(data["unassigned"]),
                   future=_frozen({SegmentRef.parse(k): frozenset(v) for k, v in data["future"].items()}),
                   end_offsets=offsets(data["end_offsets"]),
                   checkpoints=tuple(Checkpoint(c["name"], frozenset(c["waiting"]), offsets(c["positions"]))
                                     for c in data["checkpoints"]),
                   last_seen=_frozen({r: int(t) for r, t in data.get("last_seen", {}).items()}),
                   last_checkpoint_ms=int(data.get("last_checkpoint_ms", 0)),
                   revision=int(data.get("revision", 0)),
                   incarnations=_frozen(data.get("incarnations", {})),
                   sink=data.get("sink"))

    # ---- queries ------------------------------------------------------------------------------
    @property
    def online_readers(self) -> list[str]:
        return sorted(self.assigned)

    def segments_of(self, reader_id: str) -> dict[SegmentRef, int]:
        """The reader's segments at the offsets after its latest read."""
        return dict(self.positions.get(reader_id, {}))

    def stream_positions(self) -> dict[SegmentRef, int]:
        """Assigned segments at their readers' positions, and unassigned ones (Pravega's
        ``getStreamCuts``: future segments are not included)."""
        out = dict(self.unassigned)
        for segments in self.positions.values():
            out.update(segments)
        return dict(sorted(out.items()))

    @property
    def end_of_data(self) -> bool:
        """No future, unassigned or assigned segment is left (Pravega's ``isEndOfData``)."""
        return not self.future and not self.unassigned and not any(self.assigned.values())

    def pending_checkpoint_for(self, reader_id: str) -> str | None:
        """The oldest checkpoint waiting for this reader, if any."""
        return next((c.name for c in self.checkpoints if reader_id in c.waiting), None)

    def completed_checkpoint(self, name: str) -> Checkpoint | None:
        return next((c for c in self.checkpoints if c.name == name and c.complete), None)

    def silent_readers(self, now_ms: int, silence_ms: int, refreshed: Mapping[str, int] | None = None) -> list[str]:
        """Online readers that have not joined, committed or (``refreshed``: reader -> ms of its
        latest member-row refresh) refreshed for at least ``silence_ms``."""
        refreshed = refreshed or {}
        return [r for r in self.online_readers
                if now_ms - max(self.last_seen.get(r, 0), refreshed.get(r, 0)) >= silence_ms]

    def automatic_checkpoint_due(self, now_ms: int, interval_ms: int | None) -> bool:
        """Pravega's rule: the interval has passed since the latest checkpoint started, and no
        checkpoint is pending (``None``: automatic checkpoints are disabled)."""
        return (interval_ms is not None and bool(self.assigned)
                and not any(not c.complete for c in self.checkpoints)
                and now_ms - self.last_checkpoint_ms >= interval_ms)

    # ---- readers joining and leaving -------------------------------------------------------
    def add_reader(self, reader_id: str, now_ms: int = 0, incarnation: str = "") -> ReaderGroupState:
        """A reader joins online with no segments (Pravega's ``AddReader``), seen at ``now_ms``;
        ``incarnation`` identifies this join (see ``incarnations``).

        Raises:
            IllegalStateError: the reader is already online.
        """
        if reader_id in self.assigned:
            raise IllegalStateError(f"reader {reader_id!r} is already online in the group")
        return replace(self, assigned=_frozen({**self.assigned, reader_id: _frozen({})}),
                       positions=_frozen({**self.positions, reader_id: _frozen({})}),
                       last_seen=_frozen({**self.last_seen, reader_id: now_ms}),
                       incarnations=_frozen({**self.incarnations, reader_id: incarnation}))

    def seen(self, reader_id: str, now_ms: int) -> ReaderGroupState:
        """The reader called the group at ``now_ms`` (it is not silent)."""
        return replace(self, last_seen=_frozen({**self.last_seen, reader_id: now_ms}))

    def remove_reader(self, reader_id: str, position: Mapping[SegmentRef, int] | None = None) -> ReaderGroupState:
        """A reader goes offline (Pravega's ``RemoveReader``): its segments return to
        unassigned at ``position``'s offsets, or, when None, at the offsets recorded for it at
        acquisition or its last checkpoint (at-least-once). It counts as checkpointed, with those
        offsets, for every checkpoint waiting for it. A reader not online: no change."""
        if reader_id not in self.assigned:
            return self
        owned = self.assigned[reader_id]
        offsets = {ref: (position[ref] if position is not None and ref in position else off)
                   for ref, off in owned.items()}
        assigned = {r: s for r, s in self.assigned.items() if r != reader_id}
        positions = {r: s for r, s in self.positions.items() if r != reader_id}
        state = replace(self, assigned=_frozen(assigned), positions=_frozen(positions),
                        unassigned=_frozen({**self.unassigned, **offsets}),
                        last_seen=_frozen({r: t for r, t in self.last_seen.items() if r != reader_id}),
                        incarnations=_frozen({r: i for r, i in self.incarnations.items() if r != reader_id}))
        return state._checkpointed(reader_id, offsets)

    # ---- balancing -------------------------------------------------------------------------
    def acquire_count(self, reader_id: str) -> int:
        """How many unassigned segments the reader takes now (0 when none is unassigned)."""
        unassigned = len(self.unassigned)
        if not unassigned or reader_id not in self.assigned:
            return 0
        readers = len(self.assigned)
        total = unassigned + sum(len(s) for s in self.assigned.values())
        owned = len(self.assigned[reader_id])
        fair = int(round(total / readers)) - owned
        return max(max(unassigned // readers, min(unassigned, fair)), 1)

    def acquire(self, reader_id: str) -> tuple[ReaderGroupState, list[SegmentRef]]:
        """The reader takes ``acquire_count`` unassigned segments (lowest first), recording
        their offsets as its resume points."""
        count = self.acquire_count(reader_id)
        if count == 0:
            return self, []
        taken = sorted(self.unassigned)[:count]
        got = {ref: self.unassigned[ref] for ref in taken}
        return replace(
            self,
            unassigned=_frozen({ref: off for ref, off in self.unassigned.items() if ref not in got}),
            assigned=_frozen({**self.assigned, reader_id: _frozen({**self.assigned[reader_id], **got})}),
            positions=_frozen({**self.positions, reader_id: _frozen({**self.positions[reader_id], **got})}),
        ), taken

    def segment_to_release(self, reader_id: str) -> SegmentRef | None:
        """The segment the reader should release now, if any (Pravega's ``shouldReleaseSegment``
        and ``findSegmentToRelease``, with every reader's lag counted the same)."""
        owned = self.assigned.get(reader_id, {})
        if len(owned) <= 1 or self.pending_checkpoint_for(reader_id) is not None:
            return None
        min_size = min(len(s) for s in self.assigned.values())
        if len(owned) <= min_size + max(1, len(self.unassigned)):
            return None
        return max(owned, key=lambda ref: release_rank(reader_id, ref))

    def release(self, reader_id: str, segment: SegmentRef, offset: int) -> ReaderGroupState:
        """The reader gives ``segment`` back, unassigned at ``offset`` (where it stopped)."""
        owned = dict(self.assigned[reader_id])
        if segment not in owned:
            raise IllegalStateError(f"reader {reader_id!r} does not own {segment}")
        del owned[segment]
        positions = {ref: off for ref, off in self.positions[reader_id].items() if ref != segment}
        return replace(self, assigned=_frozen({**self.assigned, reader_id: _frozen(owned)}),
                       positions=_frozen({**self.positions, reader_id: _frozen(positions)}),
                       unassigned=_frozen({**self.unassigned, segment: offset}))

    # ---- reading ---------------------------------------------------------------------------
    def record_read(self, reader_id: str, position: Mapping[SegmentRef, int]) -> ReaderGroupState:
        """The offsets a reader reached in its segments (its batch's position)."""
        owned = self.positions.get(reader_id)
        if owned is None:
            raise IllegalStateError(f"reader {reader_id!r} is not online in the group")
        update = {ref: off for ref, off in position.items() if ref in owned}
        return replace(self, positions=_frozen({**self.positions, reader_id: _frozen({**owned, **update})}))

    def complete_segment(self, reader_id: str, segment: SegmentRef,
                         successors: Mapping[int, Iterable[int]]) -> ReaderGroupState:
        """The reader read ``segment`` to its end (Pravega's ``SegmentCompleted``): it leaves the
        state; each successor (id -> its predecessor ids) joins ``future`` unless already there;
        the completed id is struck from every future entry; entries with no predecessor left
        become unassigned at offset 0."""
        assigned = {ref: off for ref, off in self.assigned[reader_id].items() if ref != segment}
        positions = {ref: off for ref, off in self.positions[reader_id].items() if ref != segment}
        future = dict(self.future)
        for succ, preds in successors.items():
            ref = SegmentRef(segment.stream, succ)
            if ref not in future and not self._known(ref):
                future[ref] = frozenset(preds)
        future = {ref: (waiting - {segment.segment_id} if ref.stream == segment.stream else waiting)
                  for ref, waiting in future.items()}
        ready = {ref: 0 for ref, waiting in future.items() if not waiting}
        return replace(self, assigned=_frozen({**self.assigned, reader_id: _frozen(assigned)}),
                       positions=_frozen({**self.positions, reader_id: _frozen(positions)}),
                       future=_frozen({ref: w for ref, w in future.items() if w}),
                       unassigned=_frozen({**self.unassigned, **ready}))

    def _known(self, ref: SegmentRef) -> bool:
        return ref in self.unassigned or any(ref in s for s in self.assigned.values())

    # ---- checkpoints -----------------------------------------------------------------------
    def initiate_checkpoint(self, name: str, max_outstanding: int, now_ms: int | None = None) -> ReaderGroupState:
        """Start a checkpoint waiting for every online reader; its positions start with the
        unassigned segments' offsets (Pravega's ``CreateCheckpoint``). ``now_ms`` restarts the
        automatic checkpoint interval.

        Raises:
            MaxNumberOfCheckpointsExceededError: ``max_outstanding`` checkpoints are pending.
            IllegalStateError: a checkpoint of that name exists.
        """
        if any(c.name == name for c in self.checkpoints):
            raise IllegalStateError(f"a checkpoint named {name!r} exists already")
        pending = sum(1 for c in self.checkpoints if not c.complete)
        if pending >= max_outstanding:
            raise MaxNumberOfCheckpointsExceededError(
                f"{pending} checkpoints are pending; the group allows at most {max_outstanding}")
        checkpoint = Checkpoint(name, frozenset(self.assigned), _frozen(dict(self.unassigned)))
        started = self.last_checkpoint_ms if now_ms is None else now_ms
        return replace(self, checkpoints=(*self.checkpoints, checkpoint), last_checkpoint_ms=started)._pruned()

    def initiate_automatic_checkpoint(self, now_ms: int, max_outstanding: int) -> tuple[ReaderGroupState, str]:
        """Start an automatic checkpoint named after ``now_ms`` (call it when
        ``automatic_checkpoint_due``)."""
        name = f"{AUTOMATIC_PREFIX}{now_ms}"
        while any(c.name == name for c in self.checkpoints):
            now_ms += 1
            name = f"{AUTOMATIC_PREFIX}{now_ms}"
        return self.initiate_checkpoint(name, max_outstanding, now_ms), name

    def checkpoint_reader(self, reader_id: str, name: str) -> ReaderGroupState:
        """The reader reached checkpoint ``name``: its current positions join the checkpoint's
        and become the offsets it resumes at if it goes offline without a position."""
        own = dict(self.positions.get(reader_id, {}))
        state = replace(self, assigned=_frozen({**self.assigned, reader_id: _frozen(own)}))
        return state._checkpointed(reader_id, own, only=name)

    def _checkpointed(self, reader_id: str, offsets: Mapping[SegmentRef, int],
                      only: str | None = None) -> ReaderGroupState:
        out = []
        for c in self.checkpoints:
            if reader_id in c.waiting and (only is None or c.name == only):
                c = Checkpoint(c.name, c.waiting - {reader_id}, _frozen({**c.positions, **offsets}))
            out.append(c)
        return replace(self, checkpoints=tuple(out))._pruned()

    def _pruned(self) -> ReaderGroupState:
        """Only the latest ``KEPT_CHECKPOINTS`` completed checkpoints are kept (pending ones all)."""
        done = [c.name for c in self.checkpoints if c.complete]
        dropped = set(done[:-KEPT_CHECKPOINTS])
        if not dropped:
            return self
        return replace(self, checkpoints=tuple(c for c in self.checkpoints if c.name not in dropped))

    def clear_checkpoints_before(self, name: str) -> ReaderGroupState:
        """Drop the checkpoints older than ``name`` (Pravega's ``ClearCheckpointsBefore``)."""
        names = [c.name for c in self.checkpoints]
        if name not in names:
            return self
        return replace(self, checkpoints=self.checkpoints[names.index(name):])
