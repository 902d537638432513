"""Reader groups: Pravega's ``ReaderGroup`` and ``EventStreamReader`` over a state kept in Delta.

A group is one row of the store's ``reader_groups`` table: its configuration, generation and
:class:`~pravega_spark.reader_group_state.ReaderGroupState` (JSON). Every change (a reader
joining, a ``read_next``, a reader going offline, a checkpoint) is one commit that reads the
group's partition and replaces the row (``Store.update_reader_group``): two processes changing
the group at once conflict in Delta, and the loser applies its change again to the winner's
state, as Pravega's state synchronizer does. So any number of reader processes, on any machines,
share a group through the store.

A ``read_next`` is one such commit: the reader releases a segment or acquires unassigned ones
(Pravega's counts), then takes each of its segments from its position up to the segment's tail
(read from the events table's log at a pinned version) or the group's end offset, and records
those ends as its position. A segment it had already read to its sealed end or end offset is
completed then, one call later, as Pravega's reader completes a segment on the read after its
last event: the caller has processed the batch holding the segment's last events before the
segment leaves its hands, so a reader that dies with a batch in hand loses nothing (its segments
go back at its recorded offsets). A successor becomes readable (at offset 0) only once all its
predecessors are completed. The batch is the events of those ranges, read at the pinned
versions: an ordinary DataFrame, tagged with the group state's ``revision``: ordering every
reader's batches by revision puts each routing key's events in append order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from pyspark.sql import DataFrame

from . import _delta, reader, subscribers
from ._store import utc_now
from .controller import Controller
from .errors import IllegalStateError, InvalidConfigError, ReaderGroupNotFoundError
from .large_events import assemble_large_events
from .reader_group_config import ReaderGroupConfig, StreamDataRetention
from .reader_group_state import ReaderGroupState, SegmentRef
from .segments import predecessors, successors_with_predecessors
from .stream_cut import StreamCut

log = logging.getLogger("pravega_spark")

Position = Mapping  # {segment_id: offset} for a one-stream group, else {(scoped stream, segment_id): offset}


SEEN_REFRESH = timedelta(seconds=10)  # how stale a reader's last-seen time may get before a read records it


def now_ms() -> int:
    """The process clock in ms since the epoch (the group's times: readers seen, checkpoints)."""
    return int(time.time() * 1000)


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


@dataclass(frozen=True)
class ReadBatch:
    """What one ``read_next`` returned (Pravega's ``EventRead``, a batch at a time).

    Attributes:
        events: the events read (``read_events``' columns); empty for a checkpoint batch.
        position: the reader's segments and offsets after the batch.
        checkpoint: the name of the checkpoint this batch acknowledges, else None.
        end_of_data: every stream is read to its end cut, or sealed and fully read.
        revision: the group state's revision this batch was committed at. Across all readers
            of the group, a routing key's events in a batch of a lower revision were appended
            before its events in a batch of a higher one: sort merged outputs by
            ``(revision, segment_id, offset)`` to get each key's append order.
    """

    events: DataFrame
    position: Position
    checkpoint: str | None = None
    end_of_data: bool = False
    revision: int = 0
    ranges: dict = field(default_factory=dict, repr=False)  # {(stream, segment_id): (start, end)}

    def __repr__(self) -> str:
        return (f"ReadBatch(revision={self.revision}, segments={len(self.ranges)}, checkpoint={self.checkpoint!r}, "
                f"end_of_data={self.end_of_data}, position={dict(self.position)!r})")


def _position(state_positions: Mapping[SegmentRef, int], single: bool) -> dict:
    if single:
        return {ref.segment_id: off for ref, off in state_positions.items()}
    return {(ref.stream, ref.segment_id): off for ref, off in state_positions.items()}


def _refs(position: Mapping | None, streams: list[str]) -> dict[SegmentRef, int] | None:
    """A user's position (either form of ``Position``) as segment refs."""
    if position is None:
        return None
    out = {}
    for key, off in position.items():
        if isinstance(key, tuple):
            out[SegmentRef(key[0], int(key[1]))] = int(off)
        elif len(streams) == 1:
            out[SegmentRef(streams[0], int(key))] = int(off)
        else:
            raise InvalidConfigError("a position of a group of several streams is keyed by (scoped stream, segment id)")
    return out


class ReaderGroup:
    """A named group of readers sharing the segments of its streams (Pravega's ``ReaderGroup``).

    Created by ``StreamManager.create_reader_group``; fetched by ``StreamManager.reader_group``.

    Example:
        >>> group = manager.reader_group("iot", "analytics")  # doctest: +SKIP
        >>> reader = group.create_reader("reader-1")  # doctest: +SKIP
        >>> batch = reader.read_next(); batch.events.count()  # doctest: +SKIP
    """

    def __init__(self, controller: Controller, scope: str, name: str, row: Mapping) -> None:
        self._controller = controller
        self._store = controller.store
        self.scope = scope
        self.name = name
        self.config = ReaderGroupConfig.from_json(row["configuration"])
        self.generation = int(row["generation"])
        self._clock = now_ms  # ms since the epoch; tests set another clock

    def __repr__(self) -> str:
        return f"ReaderGroup({self.scope}/{self.name}, generation={self.generation}, streams={self.config.scoped_streams})"

    @property
    def scoped_name(self) -> str:
        return f"{self.scope}/{self.name}"

    # ---- readers -----------------------------------------------------------------------------
    def create_reader(self, reader_id: str) -> EventStreamReader:
        """A reader joining the group online (Pravega's ``createReader``).

        Raises:
            IllegalStateError: a reader with that id is online in the group.
        """
        if not isinstance(reader_id, str) or not reader_id:
            raise InvalidConfigError(f"a reader id is a non-empty str, got {reader_id!r}")
        self._update(lambda state: state.add_reader(reader_id, self._clock()), f"add reader {reader_id}")
        log.info("%r: reader %s joined", self, reader_id)
        return EventStreamReader(self, reader_id)

    def online_readers(self) -> list[str]:
        """The ids of the readers online in the group."""
        return self._state().online_readers

    def reader_offline(self, reader_id: str, last_position: Position | None = None) -> None:
        """Take a reader offline (Pravega's ``readerOffline``): its segments go back to
        unassigned at ``last_position``, or, when None, at the offsets last recorded for it (its
        acquisition or last checkpoint: events after them may be read again, at-least-once)."""
        refs = _refs(last_position, self.config.scoped_streams)
        self._update(lambda state: state.remove_reader(reader_id, refs), f"reader {reader_id} offline")
        log.info("%r: reader %s offline at %s", self, reader_id, "its recorded offsets" if refs is None else refs)

    def offline_silent_readers(self, silence: timedelta, now: datetime | None = None) -> list[str]:
        """Take offline every reader that has not joined or called ``read_next`` for ``silence``
        (a crashed process, a notebook left idle): its segments go back to unassigned at the
        offsets recorded for it (at-least-once), so the other readers take them over. As in
        Pravega, a reader that stops calling stays online until someone does this; the
        ``jobs/reader_groups.py`` job does it for every group on a schedule.

        Args:
            silence: how long a reader may stay silent (at least a few of its batch times).
            now: the time to measure from (default: now).

        Returns:
            The ids of the readers taken offline (in one commit).
        """
        if not isinstance(silence, timedelta) or silence < 2 * SEEN_REFRESH:
            raise InvalidConfigError(f"silence must be a timedelta of at least {2 * SEEN_REFRESH} (a reader's "
                                     f"calls are recorded every {SEEN_REFRESH} at most), got {silence!r}")
        at = self._clock() if now is None else int(now.timestamp() * 1000)
        gone: list[str] = []

        def transition(state: ReaderGroupState) -> ReaderGroupState:
            gone[:] = state.silent_readers(at, _ms(silence))
            for reader_id in gone:
                state = state.remove_reader(reader_id)
            return state

        if self._state().silent_readers(at, _ms(silence)):  # no commit when every reader is live
            self._update(transition, "offline silent readers")
        if gone:
            log.warning("%r: readers %s silent for %s or more: taken offline at their recorded offsets",
                        self, gone, silence)
        return list(gone)

    # ---- checkpoints and cuts ----------------------------------------------------------------
    def initiate_checkpoint(self, name: str) -> None:
        """Start checkpoint ``name``: each online reader's next ``read_next`` returns a batch with
        no events that acknowledges it (Pravega's ``initiateCheckpoint``).

        Raises:
            MaxNumberOfCheckpointsExceededError: ``max_outstanding_checkpoints`` are pending.
        """
        limit = self.config.max_outstanding_checkpoints
        self._update(lambda state: state.initiate_checkpoint(name, limit, self._clock()), f"checkpoint {name}")

    def get_checkpoint(self, name: str) -> dict[str, StreamCut] | None:
        """The stream cuts of checkpoint ``name`` once every online reader reached it, else None."""
        done = self._state().completed_checkpoint(name)
        return None if done is None else self._cuts(done.positions)

    def get_stream_cuts(self) -> dict[str, StreamCut]:
        """Each stream's cut at the readers' positions and the unassigned segments' offsets."""
        return self._cuts(self._state().stream_positions())

    def unread_bytes(self) -> int:
        """Bytes between the group's positions and its streams' tails (or end cuts)."""
        total = 0
        for stream, cut in self.get_stream_cuts().items():
            scope, name = stream.split("/")
            end = self.config.end_of(stream) or self._controller.tail_stream_cut(scope, name)
            if cut.positions:
                total += self._controller.size_between(scope, name, cut, end)
        return total

    def update_retention_stream_cut(self, cuts: Mapping[str, StreamCut]) -> None:
        """Publish how far the group has consumed, for retention (Pravega's
        ``updateRetentionStreamCut``; only for ``MANUAL_RELEASE_AT_USER_STREAMCUT``).

        Raises:
            InvalidConfigError: the group's retention type is another one, or a stream is not
                the group's.
            InvalidStreamCutError / StreamCutBehindError: a cut is invalid, or behind the last one.
        """
        if self.config.retention_type is not StreamDataRetention.MANUAL_RELEASE_AT_USER_STREAMCUT:
            raise InvalidConfigError(f"{self!r} has retention type {self.config.retention_type.value}: "
                                     "only MANUAL_RELEASE_AT_USER_STREAMCUT groups publish cuts themselves")
        unknown = sorted(set(cuts) - set(self.config.scoped_streams))
        if unknown:
            raise InvalidConfigError(f"{unknown} are not streams of {self!r}")
        self._publish(cuts)

    def _publish(self, cuts: Mapping[str, StreamCut]) -> None:
        subscribe(self._controller, self.scope, self.name, self.config, self.generation)  # after a crash at creation
        for stream, cut in sorted(cuts.items()):
            subscribers.update_subscriber_stream_cut(self._controller, *stream.split("/"), self.scoped_name,
                                                     self.generation, cut)
        log.info("%r published its subscriber cuts %s", self, cuts)

    def _published_checkpoint(self, before: ReaderGroupState, after: ReaderGroupState) -> None:
        """Publish a checkpoint that the last transition completed (AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT).

        The publication is a commit after the state's: a process that dies between the two
        leaves the checkpoint unpublished, so starting the next checkpoint publishes the latest
        completed one again (publishing the same cut twice is accepted)."""
        if self.config.retention_type is not StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT:
            return
        was_done = {c.name for c in before.checkpoints if c.complete}
        done = [c for c in after.checkpoints if c.complete]
        started = {c.name for c in after.checkpoints} - {c.name for c in before.checkpoints}
        if done and (done[-1].name not in was_done or started):
            self._publish(self._cuts(done[-1].positions))

    def reset_reader_group(self, config: ReaderGroupConfig | None = None) -> None:
        """Start the group over with a new generation (Pravega's ``resetReaderGroup``): every
        reader must join again. With ``config``, from its start cuts; without, from the last
        completed checkpoint. Subscriptions follow the (new) config's retention type."""
        if config is not None and not isinstance(config, ReaderGroupConfig):
            raise InvalidConfigError(f"config must be a ReaderGroupConfig, got {type(config).__name__}")
        old = self._row()
        old_config = ReaderGroupConfig.from_json(old["configuration"])
        new_config = config or old_config
        if config is not None:
            state = initial_state(self._controller, new_config, self._clock())
        else:
            last = [c for c in ReaderGroupState.from_json(old["state"]).checkpoints if c.complete]
            if not last:
                raise IllegalStateError(f"{self!r} has no completed checkpoint to reset to")
            state = ReaderGroupState.initial(dict(last[-1].positions), ReaderGroupState.from_json(old["state"]).end_offsets,
                                             now_ms=self._clock())
        generation = int(old["generation"]) + 1

        def change(row):
            if row is None or int(row["generation"]) != int(old["generation"]):
                raise IllegalStateError(f"{self!r} changed generation meanwhile")
            return {**row, "configuration": new_config.to_json(), "generation": generation,
                    "state": state.to_json(), "update_time": utc_now()}

        self._store.update_reader_group(self.scope, self.name, change, f"reset {self.scoped_name}")
        unsubscribe(self._controller, self.scope, self.name, old_config, int(old["generation"]))
        self.config, self.generation = new_config, generation
        subscribe(self._controller, self.scope, self.name, new_config, generation)
        log.info("%r reset to generation %d", self, generation)

    def _cuts(self, positions: Mapping[SegmentRef, int]) -> dict[str, StreamCut]:
        by_stream: dict[str, dict[int, int]] = {s: {} for s in self.config.scoped_streams}
        for ref, off in positions.items():
            by_stream.setdefault(ref.stream, {})[ref.segment_id] = off
        return {s: StreamCut(s, p) for s, p in by_stream.items()}

    # ---- the stored state --------------------------------------------------------------------
    def _row(self) -> Mapping:
        row = self._store.reader_group_row(self.scope, self.name)
        if row is None:
            raise ReaderGroupNotFoundError(f"reader group {self.scoped_name} does not exist")
        return row

    def _state(self) -> ReaderGroupState:
        return ReaderGroupState.from_json(self._row()["state"])

    def _update(self, transition, what: str) -> ReaderGroupState:
        """Apply ``transition(state) -> state`` in one commit (retried on a concurrent change); a
        transition that changes nothing commits nothing."""
        out: list[ReaderGroupState] = []

        def change(row):
            if row is None:
                raise ReaderGroupNotFoundError(f"reader group {self.scoped_name} does not exist")
            if int(row["generation"]) != self.generation:
                raise IllegalStateError(f"reader group {self.scoped_name} was reset (generation "
                                        f"{row['generation']}, this handle {self.generation}): join again")
            before = ReaderGroupState.from_json(row["state"])
            state = transition(before)
            if state == before:
                out[:] = [before, before]
                return None
            state = replace(state, revision=before.revision + 1)
            out[:] = [before, state]
            return {**row, "state": state.to_json(), "update_time": utc_now()}

        self._store.update_reader_group(self.scope, self.name, change, f"{what} in {self.scoped_name}")
        self._published_checkpoint(*out)
        return out[1]


class EventStreamReader:
    """One reader of a group (Pravega's ``EventStreamReader``), reading a batch at a time."""

    def __init__(self, group: ReaderGroup, reader_id: str) -> None:
        self._group = group
        self.reader_id = reader_id
        self._streams = group.config.scoped_streams
        self._empty: DataFrame | None = None  # the empty batch, built once

    def __repr__(self) -> str:
        return f"EventStreamReader({self.reader_id!r}, group={self._group.scoped_name})"

    def read_next(self) -> ReadBatch:
        """The next batch: the events of this reader's segments from its position up to their
        tails as of this call (or the group's end cuts), or a checkpoint batch with no events
        when a checkpoint waits for this reader. One commit of the group's state.

        Raises:
            IllegalStateError: this reader is offline, or the group was reset.
        """
        plan: dict = {}
        config = self._group.config
        interval = None if config.automatic_checkpoint_interval is None else _ms(config.automatic_checkpoint_interval)

        def transition(state: ReaderGroupState) -> ReaderGroupState:
            plan.clear()
            if self.reader_id not in state.assigned:
                raise IllegalStateError(f"{self!r} is offline: create a reader to join again")
            at = self._group._clock()
            if at - state.last_seen.get(self.reader_id, 0) >= _ms(SEEN_REFRESH):
                state = state.seen(self.reader_id, at)
            if state.automatic_checkpoint_due(at, interval):
                state, _ = state.initiate_automatic_checkpoint(at, config.max_outstanding_checkpoints)
            name = state.pending_checkpoint_for(self.reader_id)
            if name is not None:
                plan["checkpoint"] = name
                return state.checkpoint_reader(self.reader_id, name)
            extra = state.segment_to_release(self.reader_id)
            if extra is not None:
                state = state.release(self.reader_id, extra, state.positions[self.reader_id][extra])
            else:
                state, _ = state.acquire(self.reader_id)
            state, plan["ranges"], plan["versions"] = self._advance(state)
            return state

        # optimistic: apply the read to the state as last stored; a read that changes nothing (no
        # new events, segments or checkpoint) ends there, without a transaction or a commit
        stored = self._group._state()
        if transition(stored) == stored:
            state = stored
        else:
            state = self._group._update(transition, f"read_next of {self.reader_id}")
        single = len(self._streams) == 1
        position = _position(state.positions[self.reader_id], single)
        if "checkpoint" in plan:
            log.info("%r: checkpoint %s", self, plan["checkpoint"])
            return ReadBatch(self._events({}, {}), position, plan["checkpoint"], state.end_of_data, state.revision)
        batch = ReadBatch(self._events(plan["ranges"], plan["versions"]), position, None, state.end_of_data,
                          state.revision, dict(plan["ranges"]))
        log.log(logging.INFO if batch.ranges else logging.DEBUG, "%r read %d segment ranges; position %s",
                self, len(batch.ranges), position)
        return batch

    def position(self) -> Position:
        """This reader's segments and offsets, as stored in the group."""
        state = self._group._state()
        return _position(state.positions.get(self.reader_id, {}), len(self._streams) == 1)

    def close(self) -> None:
        """Go offline at the current position (Pravega's ``close``)."""
        state = self._group._state()
        if self.reader_id in state.assigned:
            self._group.reader_offline(self.reader_id, _position(state.positions[self.reader_id], False))

    # ---- internals ---------------------------------------------------------------------------
    def _advance(self, state: ReaderGroupState):
        """Read every owned segment up to its tail or end offset: the ranges to read, the
        events versions they are pinned to, and the state with positions and completions (of
        the segments an earlier batch read to their end)."""
        store, controller = self._group._store, self._group._controller
        owned = dict(state.positions[self.reader_id])
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        versions: dict[str, int] = {}
        for stream in sorted({ref.stream for ref in owned}):
            scope, name = stream.split("/")
            # the version first: a scale records its new segments before it seals the old ones,
            # so records read after it know the successors of every seal it shows
            versions[stream] = store.events_version(scope, name)
            mine = {ref: off for ref, off in owned.items() if ref.stream == stream}
            tails = store.segment_tails(scope, name, [ref.segment_id for ref in mine], versions[stream])
            records: dict = {}  # read only when a segment completes
            deleted: set[int] | None = None  # read only when a segment has no data left
            for ref, start in sorted(mine.items()):
                tail = tails[ref.segment_id]
                end = state.end_offsets.get(ref)
                to = tail.length if end is None else min(tail.length, end)
                truncated = False
                if not tail.sealed and (tail.length == 0 or tail.length < start):  # empty, or deleted?
                    if deleted is None:
                        truncation = controller.truncation_record(scope, name)
                        deleted = {*truncation.deleted_segments, *truncation.to_delete}
                    truncated = ref.segment_id in deleted
                if truncated:  # Pravega's TruncatedDataException: the reader moves on past the head
                    log.warning("%r: segment %d of %s was truncated away at offset %d: its successors "
                                "are read from the head", self, ref.segment_id, stream, start)
                if to > start and not truncated:  # its completion, if this reaches the end, waits for the next call
                    ranges[(stream, ref.segment_id)] = (start, to)
                    state = state.record_read(self.reader_id, {ref: to})
                elif truncated or (tail.sealed and start >= tail.length) or (end is not None and start >= end):
                    if not records:
                        controller.settled(scope, name)  # a scale a crash left half-done is finished first
                        records = {r.segment_id: r for r in store.segment_records(scope, name)}
                        allowed = _within_end(list(records.values()), self._group.config.end_of(stream))
                    record = records.get(ref.segment_id)
                    if (end is None and not truncated and record is not None and record.sealed_epoch is None
                            and record.sealed_size is None):
                        raise _delta.Retry(f"{stream}: segment {ref.segment_id} sealed, its record not yet")
                    successors = {} if end is not None else {
                        s: p for s, p in successors_with_predecessors(list(records.values()), ref.segment_id).items()
                        if allowed is None or s in allowed}
                    state = state.complete_segment(self.reader_id, ref, successors)
        return state, ranges, versions

    def _events(self, ranges: Mapping, versions: Mapping[str, int]) -> DataFrame:
        if not ranges and self._empty is not None:
            return self._empty
        store = self._group._store
        parts = []
        for stream in self._streams if not ranges else sorted(versions):
            scope, name = stream.split("/")
            mine = [reader.SegmentRange(sid, lo, hi) for (s, sid), (lo, hi) in sorted(ranges.items()) if s == stream]
            version = versions.get(stream)
            events = store.events(scope, name, version).transform(reader.filter_segment_ranges, ranges=mine)
            if mine and store.may_hold_chunks(scope, name, [r.segment_id for r in mine], version):
                events = events.transform(assemble_large_events)
            parts.append(events.transform(reader.select_read_columns, scope=scope, stream=name))
            if not ranges:
                break  # an empty batch: one empty read is enough for the schema
        out = parts[0]
        for part in parts[1:]:
            out = out.unionByName(part)
        if not ranges:
            self._empty = store.spark.createDataFrame([], out.schema)
            return self._empty
        return out


def _within_end(records, end: StreamCut | None) -> set[int] | None:
    """The segments a group with this end cut may read: the end cut's segments and all their
    predecessors, transitively (None: no end cut, every successor)."""
    if end is None:
        return None
    todo, seen = list(end.positions), set()
    while todo:
        sid = todo.pop()
        if sid in seen:
            continue
        seen.add(sid)
        todo.extend(predecessors(records, sid))
    return seen


def initial_state(controller: Controller, config: ReaderGroupConfig, now: int | None = None) -> ReaderGroupState:
    """The state of a new group: each stream's start cut (``"earliest"``: the head now,
    ``"latest"``: the tail now) as unassigned segments (a ``-1`` entry waits in ``future`` for
    its predecessors in the cut), and its end cut's offsets."""
    start: dict[SegmentRef, int] = {}
    future: dict[SegmentRef, set[int]] = {}
    ends: dict[SegmentRef, int] = {}
    for stream in config.scoped_streams:
        scope, name = stream.split("/")
        begin = config.start_of(stream)
        cut = (controller.head_stream_cut(scope, name) if begin == "earliest"
               else controller.tail_stream_cut(scope, name) if begin == "latest" else begin)
        records = controller.segment_records(scope, name)
        for sid, off in cut.positions.items():
            if off >= 0:
                start[SegmentRef(stream, sid)] = off
            else:
                future[SegmentRef(stream, sid)] = set(predecessors(records, sid)) & set(cut.positions)
        end = config.end_of(stream)
        if end is not None:
            ends.update({SegmentRef(stream, sid): off for sid, off in end.positions.items() if off >= 0})
    return ReaderGroupState.initial(start, ends, future, now_ms() if now is None else now)


def subscribe(controller: Controller, scope: str, group: str, config: ReaderGroupConfig, generation: int) -> None:
    """Subscribe the group to each of its streams with ``generation`` (if its retention type is
    not NONE): the subscriber id is the group's scoped name. Idempotent."""
    if config.is_subscriber:
        for stream in config.scoped_streams:
            subscribers.add_subscriber(controller, *stream.split("/"), f"{scope}/{group}", generation)


def unsubscribe(controller: Controller, scope: str, group: str, config: ReaderGroupConfig, generation: int) -> None:
    """Remove the group's subscriptions of ``generation`` (if it is a subscriber). Idempotent."""
    if config.is_subscriber:
        for stream in config.scoped_streams:
            subscribers.remove_subscriber(controller, *stream.split("/"), f"{scope}/{group}", generation)


def group_row(scope: str, name: str, config: ReaderGroupConfig, state: ReaderGroupState, generation: int,
              now: datetime) -> dict:
    return {"scope": scope, "reader_group": name, "configuration": config.to_json(), "generation": generation,
            "state": state.to_json(), "creation_time": now, "update_time": now}
