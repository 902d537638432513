"""Reader groups: Pravega's ``ReaderGroup`` and ``EventStreamReader`` over a state kept in Delta.

A group is one row of the store's ``reader_groups`` table (the coordinator): its configuration,
generation and :class:`~pravega_spark.readers.reader_group_state.ReaderGroupState` (JSON). Ownership
changes (a reader joining or leaving, acquiring, releasing or completing segments, answering a
checkpoint) are one commit each that reads the group's partition and replaces the row
(``Store.update_reader_group``): two processes changing the group at once conflict in Delta, and
the loser applies its small change again to the winner's state, as Pravega's state synchronizer
does. So any number of reader processes, on any machines, share a group through the store.

Positions live in the readers (Pravega's write rule). A ``read_next`` that changes no ownership
commits nothing: it reads the group's row and the events table's log (no Spark job), takes each
of its segments from its live position up to the segment's tail (at a pinned events version) or
the group's end offset, and returns those events. Every ``position_refresh_interval`` a reader
records its processed positions (where it was when called: the previous batch is processed) and
its liveness in its own row of the ``reader_group_members`` table, a partition of its own: readers'
refreshes never conflict. A reader silent past ``reader_silence_limit`` is taken offline by the
next reader that refreshes; its segments go back at its recorded offsets, or, when the group has
an exactly-once sink (``ReaderGroup.delta_sink``, ``reader_group_sink``), at the offsets the sink
holds, after fencing them there.

A segment read to its sealed end or end offset is completed one call later, as Pravega's reader
completes a segment on the read after its last event: the caller has processed the batch holding
the segment's last events before the segment leaves its hands. A successor becomes readable (at
offset 0) only once all its predecessors are completed. A batch is tagged with the group state's
``revision``: ordering every reader's batches by revision puts each routing key's events in
append order (a completion, which makes successors readable, raises the revision).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .. import _delta
from .._failpoints import failpoint
from ..controller import subscribers
from ..controller.client import Controller
from ..errors import (
    IllegalStateError,
    InvalidConfigError,
    ReaderGroupNotFoundError,
    ReaderNotInReaderGroupError,
)
from ..store import segment_ranges
from ..store.store import utc_now
from ..stream.names import validate_reader_group_name, validate_scope_name
from ..stream.segments import predecessors, short_segment_name, successors_with_predecessors
from ..stream.stream_cut import StreamCut
from .large_event_reader import assemble_large_events
from .reader_group_config import ReaderGroupConfig, StreamDataRetention
from .reader_group_sink import ReaderGroupSink
from .reader_group_state import ReaderGroupState, SegmentRef

log = logging.getLogger("pravega_spark")

Position = Mapping  # {segment_id: offset} for a one-stream group, else {(scoped stream, segment_id): offset}


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
    owners: dict = field(default_factory=dict, repr=False)  # {(stream, segment_id): owner token}

    def __repr__(self) -> str:
        return (f"ReadBatch(revision={self.revision}, segments={len(self.ranges)}, checkpoint={self.checkpoint!r}, "
                f"end_of_data={self.end_of_data}, position={dict(self.position)!r})")


class _OwnershipMoved(Exception):
    """A reader being taken offline acquired or released segments after its segments were read."""


@dataclass
class _Survey:
    """What a ``read_next`` found before committing: events versions and tails of the owned
    segments, the segments it completes (-> their successors) and the ones truncated away."""

    versions: dict = field(default_factory=dict)
    tails: dict = field(default_factory=dict)
    completions: dict = field(default_factory=dict)
    truncated: set = field(default_factory=set)


def _owner_change(before: ReaderGroupState, after: ReaderGroupState) -> bool:
    """Whether a transition changes more than the reader's liveness and recorded positions
    (those alone wait for the refresh interval: Pravega's write rule)."""
    return replace(after, last_seen=before.last_seen, positions=before.positions) != before


def _offsets_json(positions: Mapping[SegmentRef, int]) -> str:
    return json.dumps({str(ref): int(off) for ref, off in sorted(positions.items())})


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
        return self.create_readers([reader_id])[0]

    def create_readers(self, reader_ids: list[str]) -> list[EventStreamReader]:
        """Readers joining the group online, with fair shares of the unassigned segments, in one
        commit (Flink's enumerator assigns splits eagerly the same way): their first
        ``read_next`` reads without acquiring.

        Raises:
            IllegalStateError: one of the ids is online in the group (nothing is changed).
            InvalidConfigError: an id is not a non-empty str, or an id is listed twice.
        """
        ids = list(reader_ids) if not isinstance(reader_ids, str) else [reader_ids]
        if not ids or any(not isinstance(r, str) or not r for r in ids) or len(set(ids)) != len(ids):
            raise InvalidConfigError(f"reader ids are distinct non-empty strs, got {reader_ids!r}")
        self._complete_take_overs(ids)
        incarnations = {r: uuid.uuid4().hex[:16] for r in ids}
        now = self._clock()

        def transition(state: ReaderGroupState) -> ReaderGroupState:
            for r in ids:
                state = state.add_reader(r, now, incarnations[r])
            if len(ids) > 1:
                for r in ids:
                    state = state.acquire(r)[0]
            return state

        state = self._update(transition, f"add readers {ids}")
        readers = [EventStreamReader(self, r, incarnations[r], now) for r in ids]
        for joined in readers:
            joined._sync(state)
        log.info("%r: readers %s joined", self, ids)
        return readers

    def _complete_take_overs(self, reader_ids: list[str]) -> None:
        """A reader joining again while its take-over is half done (the sink fenced its
        segments, the group still lists it online: the remover died or is between its two
        commits) completes that take-over first, at the sink's offsets, so the README's "join
        again" is always safe. An id online and not fenced stays online (``add_reader`` refuses)."""
        state = self._state()
        online = {r: state.incarnations.get(r, "") for r in reader_ids if r in state.assigned}
        if not online or state.sink is None:
            return
        sink = self._sink_at(state.sink)
        fenced = {r: inc for r, inc in online.items() if sink.taken_over(r, inc)}
        if fenced and self._offline(fenced, None, fence=True, what=f"take-over of {sorted(fenced)} completed on rejoin"):
            log.warning("%r: readers %s rejoined during their take-over: completed it at the sink's offsets",
                        self, sorted(fenced))

    def online_readers(self) -> list[str]:
        """The ids of the readers online in the group."""
        return self._state().online_readers

    def reader_offline(self, reader_id: str, last_position: Position | None = None) -> None:
        """Take a reader offline (Pravega's ``readerOffline``): its segments go back to
        unassigned at ``last_position``, or, when None, at the offsets last recorded for it: the
        later of its acquisition, last checkpoint or last position refresh and, when the group has
        a sink (``delta_sink``), the offsets the sink holds (exactly-once; without a sink, events
        after the refresh are read again: at-least-once). With a sink, the reader's segments are
        fenced there first: if it is still running, it can no longer write them."""
        refs = _refs(last_position, self.config.scoped_streams)
        state = self._state()
        if reader_id in state.assigned:
            self._offline({reader_id: state.incarnations.get(reader_id, "")},
                          None if refs is None else {reader_id: refs}, fence=True, what=f"reader {reader_id} offline")
        log.info("%r: reader %s offline at %s", self, reader_id, "its recorded offsets" if refs is None else refs)

    def offline_silent_readers(self, silence: timedelta, now: datetime | None = None) -> list[str]:
        """Take offline every reader that has not joined, committed or refreshed for
        ``silence`` (a crashed process, a notebook left idle): its segments go back to unassigned
        at the offsets recorded for it (see ``reader_offline``), so the other readers take them
        over. Readers do this themselves when they refresh, with the group's
        ``reader_silence_limit``; the ``jobs/reader_groups.py`` job does it for every group.

        Args:
            silence: how long a reader may stay silent (at least twice the refresh interval).
            now: the time to measure from (default: now).

        Returns:
            The ids of the readers taken offline.
        """
        refresh = self.config.position_refresh_interval
        if not isinstance(silence, timedelta) or silence < 2 * refresh:
            raise InvalidConfigError(f"silence must be a timedelta of at least {2 * refresh} (a reader's "
                                     f"positions are refreshed every {refresh} at most), got {silence!r}")
        at = self._clock() if now is None else int(now.timestamp() * 1000)
        return self._offline_silent(at, _ms(silence))

    def _offline_silent(self, at: int, silence_ms: int, exclude: str | None = None) -> list[str]:
        state = self._state()
        refreshed = {r: last for r, (_, last) in self._members(state).items()}
        silent = {r: state.incarnations.get(r, "") for r in state.silent_readers(at, silence_ms, refreshed) if r != exclude}
        if not silent:
            return []
        gone = self._offline(silent, None, fence=True, what=f"offline silent readers {sorted(silent)}")
        if gone:
            log.warning("%r: readers %s silent for %.0f s or more: taken offline at their recorded offsets",
                        self, gone, silence_ms / 1000)
        return gone

    def _members(self, state: ReaderGroupState) -> dict[str, tuple[dict[SegmentRef, int], int]]:
        """Online readers' member rows of their current join: (positions, last refresh ms)."""
        out = {}
        for row in self._store.member_rows(self.scope, self.name):
            reader_id = row["reader"]
            if reader_id in state.assigned and state.incarnations.get(reader_id, "") == row["incarnation"]:
                positions = {SegmentRef.parse(k): int(v) for k, v in json.loads(row["positions"]).items()}
                out[reader_id] = (positions, int(row["last_seen"]))
        return out

    def _offline(self, joins: Mapping[str, str], positions: Mapping[str, Mapping[SegmentRef, int]] | None,
                 fence: bool, what: str) -> list[str]:
        """Take the ``joins`` (reader id -> incarnation) offline in one commit of the group's
        state: their segments go back at ``positions`` (per reader), else at the later of their
        recorded offsets (state, member rows) and the sink's. With ``fence`` and a sink, their
        segments are fenced in the sink first (recording the joins taken over). A reader that
        has left or joined again meanwhile (another incarnation) is left alone. Returns the
        readers taken offline."""
        def current(state: ReaderGroupState) -> list[str]:
            return [r for r, inc in joins.items() if r in state.assigned and state.incarnations.get(r, "") == inc]

        while True:
            state = self._state()
            online = current(state)
            if not online:
                return []
            owned = {r: dict(state.assigned[r]) for r in online}
            members = self._members(state)
            offsets = {}
            for r in online:
                recorded = {ref: max(off, state.positions[r].get(ref, off), members.get(r, ({}, 0))[0].get(ref, off))
                            for ref, off in owned[r].items()}
                offsets[r] = {**recorded, **(positions or {}).get(r, {})}
            if fence and state.sink is not None:
                sink = self._sink_at(state.sink)
                sunk = sink.fence([ref for r in online for ref in owned[r]], state.revision + 1,
                                  taken={r: joins[r] for r in online})
                failpoint("offline:after_fence")
                if positions is None:
                    offsets = {r: {ref: max(off, sunk.get(ref, off)) for ref, off in o.items()} for r, o in offsets.items()}

            taken: list[str] = []

            def transition(latest: ReaderGroupState, owned=owned, offsets=offsets, taken=taken) -> ReaderGroupState:
                taken.clear()
                for r in current(latest):
                    if r not in owned or dict(latest.assigned[r]).keys() != owned[r].keys():
                        raise _OwnershipMoved(r)
                    latest = latest.remove_reader(r, offsets[r])
                    taken.append(r)
                return latest

            try:
                self._update(transition, f"{what}")
                return list(taken)
            except _OwnershipMoved:
                continue  # a reader acquired or gave up segments meanwhile: fence and read again

    def delta_sink(self, path: str, schema: StructType | None = None) -> ReaderGroupSink:
        """The group's exactly-once Delta sink at ``path`` (see ``reader_group_sink``): its table
        is created now unless it exists, and it is recorded in the group (one commit, the first
        time) so that a dead reader's segments go back at the offsets the sink holds.

        Args:
            path: the sink table's location.
            schema: the rows' schema, when ``sink.write`` is given rows of its own (default: a
                batch's events with its ``revision``, what ``sink.write(batch)`` writes).

        Example:
            >>> sink = group.delta_sink("/lake/sensors_copy")  # doctest: +SKIP
            >>> sink.write(reader.read_next())  # doctest: +SKIP
        """
        qualified = _delta.backend_for(self._store.spark).qualify(path)
        sink = self._sink_at(qualified)
        sink.create(schema if schema is not None else self.batch_schema())
        if self._state().sink != qualified:
            self._update(lambda state: replace(state, sink=qualified), f"sink {qualified}")
        return sink

    def batch_schema(self) -> StructType:
        """The schema of what ``ReaderGroupSink.write(batch)`` writes: a batch's events and its
        ``revision``."""
        return self._empty_events().withColumn("revision", F.lit(0)).schema

    def _empty_events(self) -> DataFrame:
        """An empty batch's events (the schema of every batch of this group)."""
        scope, name = self.config.scoped_streams[0].split("/")
        events = self._store.events(scope, name, None).transform(segment_ranges.filter_segment_ranges, ranges=[])
        empty = events.transform(segment_ranges.select_read_columns, scope=scope, stream=name)
        return self._store.spark.createDataFrame([], empty.schema)

    def _sink_at(self, path: str) -> ReaderGroupSink:
        return ReaderGroupSink(self._store.spark, path, f"{self.scoped_name}@{self.generation}")

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

    def latest_checkpoint(self) -> tuple[str, dict[str, StreamCut]] | None:
        """The newest completed checkpoint: its name and stream cuts (None if none is kept)."""
        done = [c for c in self._state().checkpoints if c.complete]
        return (done[-1].name, self._cuts(done[-1].positions)) if done else None

    def get_stream_cuts(self) -> dict[str, StreamCut]:
        """Each stream's cut at the readers' recorded positions and the unassigned segments'
        offsets. Readers record their positions when they commit and at least every
        ``position_refresh_interval`` while reading, so between checkpoints the cut may lag the
        readers by up to that interval (Pravega's lag until the next checkpoint)."""
        state = self._state()
        positions = state.stream_positions()
        for member_positions, _ in self._members(state).values():
            positions.update({ref: max(off, positions[ref]) for ref, off in member_positions.items() if ref in positions})
        return self._cuts(positions)

    def unread_bytes(self) -> int:
        """Bytes between the group's positions and its streams' tails (or end cuts)."""
        total = 0
        for stream, cut in self.get_stream_cuts().items():
            scope, name = stream.split("/")
            end = self.config.end_of(stream) or self._controller.tail_stream_cut(scope, name)
            if cut.positions:
                total += self._controller.size_between(scope, name, cut, end)
        return total

    def segment_lag(self) -> list[dict]:
        """Each segment the group reads: ``reader`` (``unassigned`` if no reader holds it),
        ``stream``, ``segment`` (its short name), ``position`` and ``unread`` bytes (to its
        sealed size, or to the stream's tail)."""
        state = self._state()
        members = self._members(state)
        ends: dict[str, dict[int, int]] = {}
        for stream in self.config.scoped_streams:
            scope, name = stream.split("/")
            lengths = dict(self._controller.tail_stream_cut(scope, name).positions)
            for r in self._controller.segment_records(scope, name):
                if r.sealed_size is not None:
                    lengths[r.segment_id] = r.sealed_size
            ends[stream] = lengths
        rows = []
        held = [(owner, ref, max(off, members.get(owner, ({}, 0))[0].get(ref, off)))
                for owner, refs in state.assigned.items() for ref, off in refs.items()]
        held += [("unassigned", ref, off) for ref, off in state.unassigned.items()]
        for owner, ref, position in held:
            end = ends.get(ref.stream, {}).get(ref.segment_id, position)
            rows.append({"reader": owner, "stream": ref.stream, "segment": short_segment_name(ref.segment_id),
                         "position": int(position), "unread": max(0, int(end) - int(position))})
        return sorted(rows, key=lambda r: (r["reader"], r["stream"], r["segment"]))

    def plot(self, path: str | None = None):
        """A picture of the group's segments per reader, each bar stacked by segment with its
        unread bytes (a matplotlib ``Figure``; a PNG at ``path`` if given)."""
        from .. import plots

        return plots.save(plots.reader_group_figure(self.scoped_name, self.segment_lag()), path)

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
        state = replace(state, sink=ReaderGroupState.from_json(old["state"]).sink)  # app ids carry the generation
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
    """One reader of a group (Pravega's ``EventStreamReader``), reading a batch at a time.

    Its positions live in the reader (Pravega's write rule): a ``read_next`` commits the group's
    state only to acquire, release or complete segments, to answer a checkpoint, or (in its member
    row, every ``position_refresh_interval``) to record its processed positions and liveness.
    """

    def __init__(self, group: ReaderGroup, reader_id: str, incarnation: str, now: int) -> None:
        self._group = group
        self.reader_id = reader_id
        self._incarnation = incarnation
        self._streams = group.config.scoped_streams
        self._positions: dict[SegmentRef, int] = {}  # live positions: after the latest batch returned
        self._owners: dict[SegmentRef, int] = {}  # each owned segment's owner token (see reader_group_sink)
        self._persisted = now  # when this reader last committed (the group's row or its member row)
        self._acquire_after = 0  # no acquiring before this (ms): after a release, others get the segment first
        self._empty: DataFrame | None = None  # the empty batch, built once

    def __repr__(self) -> str:
        return f"EventStreamReader({self.reader_id!r}, group={self._group.scoped_name})"

    def read_next(self) -> ReadBatch:
        """The next batch: the events of this reader's segments from its position up to their
        tails as of this call (or the group's end cuts), or a checkpoint batch with no events
        when a checkpoint waits for this reader. Calling it means the previous batch is
        processed: that is the position a checkpoint or a refresh records.

        Commits only when ownership changes, a checkpoint is answered, or the refresh interval
        has passed (then one commit of this reader's member row, which never conflicts with other
        readers); otherwise it reads the group's state and the events' log, with no commit.

        Raises:
            ReaderNotInReaderGroupError: this reader is offline (closed, or taken offline).
            IllegalStateError: the group was reset.
        """
        group = self._group
        config = group.config
        now = group._clock()
        stored = group._state()
        self._sync(stored)
        processed = dict(self._positions)  # the caller has processed every batch returned so far
        refresh_due = now - self._persisted >= _ms(config.position_refresh_interval)
        if refresh_due and config.reader_silence_limit is not None:
            if group._offline_silent(now, _ms(config.reader_silence_limit), exclude=self.reader_id):
                stored = group._state()
                self._sync(stored)
        survey = self._survey(stored, processed)
        interval = None if config.automatic_checkpoint_interval is None else _ms(config.automatic_checkpoint_interval)
        plan: dict = {}

        def transition(state: ReaderGroupState) -> ReaderGroupState:
            plan.clear()
            self._check_online(state)
            me = self.reader_id
            state = state.seen(me, now).record_read(me, processed)
            if state.automatic_checkpoint_due(now, interval):
                state, _ = state.initiate_automatic_checkpoint(now, config.max_outstanding_checkpoints)
            name = state.pending_checkpoint_for(me)
            if name is not None:
                plan["checkpoint"] = name
                return state.checkpoint_reader(me, name)
            for ref, successors in survey.completions.items():
                if ref in state.assigned[me]:
                    state = state.complete_segment(me, ref, successors)
            extra = state.segment_to_release(me)
            if extra is not None:
                plan["released"] = True
                return state.release(me, extra, processed.get(extra, state.positions[me][extra]))
            return state.acquire(me)[0] if now >= self._acquire_after else state

        if _owner_change(stored, transition(stored)):
            state = group._update(transition, f"read_next of {self.reader_id}")
            self._persisted = now
            if plan.get("released"):  # Pravega's acquire timer: the segment is for the others now
                self._acquire_after = now + _ms(config.position_refresh_interval)
        else:
            state = stored
            if refresh_due:
                self._refresh(processed, now)
        self._sync(state)
        single = len(self._streams) == 1
        if "checkpoint" in plan:
            log.info("%r: checkpoint %s", self, plan["checkpoint"])
            return ReadBatch(self._events({}, {}), _position(processed, single), plan["checkpoint"],
                             state.end_of_data, state.revision)
        ranges, versions = self._ranges(state, survey)
        self._positions.update({SegmentRef(stream, sid): hi for (stream, sid), (_, hi) in ranges.items()})
        position = _position(self._positions, single)
        owners = {key: self._owners[SegmentRef(*key)] for key in ranges}
        batch = ReadBatch(self._events(ranges, versions), position, None, state.end_of_data, state.revision,
                          ranges, owners)
        log.log(logging.INFO if batch.ranges else logging.DEBUG, "%r read %d segment ranges; position %s",
                self, len(batch.ranges), position)
        return batch

    def position(self) -> Position:
        """This reader's segments and offsets: after the latest batch it returned."""
        try:
            self._sync(self._group._state())
        except ReaderNotInReaderGroupError:
            pass  # offline: where it stopped
        return _position(self._positions, len(self._streams) == 1)

    def close(self) -> None:
        """Go offline at the current position (Pravega's ``close``): the caller has processed
        every batch returned."""
        state = self._group._state()
        if self.reader_id in state.assigned and state.incarnations.get(self.reader_id, "") == self._incarnation:
            self._sync(state)
            self._group._offline({self.reader_id: self._incarnation}, {self.reader_id: dict(self._positions)},
                                 fence=False, what=f"reader {self.reader_id} closed")

    # ---- internals ---------------------------------------------------------------------------
    def _check_online(self, state: ReaderGroupState) -> None:
        if self.reader_id not in state.assigned or state.incarnations.get(self.reader_id, "") != self._incarnation:
            raise ReaderNotInReaderGroupError(f"{self!r} is offline (closed, or taken offline): create a reader "
                                              "to join again")

    def _sync(self, state: ReaderGroupState) -> None:
        """Make the live positions follow the group's ownership: segments acquired start at
        their recorded offsets (owner token: the state's revision), released or completed ones go."""
        self._check_online(state)
        mine = state.assigned[self.reader_id]
        for ref in [ref for ref in self._positions if ref not in mine]:
            del self._positions[ref]
            self._owners.pop(ref, None)
        for ref, off in mine.items():
            if ref not in self._positions:
                self._positions[ref] = max(off, state.positions[self.reader_id].get(ref, off))
                self._owners[ref] = state.revision

    def _refresh(self, processed: Mapping[SegmentRef, int], now: int) -> None:
        """Record the processed positions and liveness in this reader's member row."""
        group = self._group

        def change(row):
            return {"scope": group.scope, "reader_group": group.name, "reader": self.reader_id,
                    "incarnation": self._incarnation, "positions": _offsets_json(processed),
                    "last_seen": now, "update_time": utc_now()}

        group._store.update_member(group.scope, group.name, self.reader_id, change,
                                   f"refresh of {self.reader_id} in {group.scoped_name}")
        self._persisted = now
        log.debug("%r refreshed its positions %s", self, processed)

    def _survey(self, state: ReaderGroupState, processed: Mapping[SegmentRef, int]) -> _Survey:
        """Each owned stream's events version and segment tails, and the owned segments this
        reader has finished (read to their sealed end or end offset, or truncated away) with
        their successors: what this call completes."""
        store, controller = self._group._store, self._group._controller
        survey = _Survey()
        for stream in sorted({ref.stream for ref in processed}):
            scope, name = stream.split("/")
            # the version first: a scale records its new segments before it seals the old ones,
            # so records read after it know the successors of every seal it shows
            survey.versions[stream] = store.events_version(scope, name)
            mine = {ref: off for ref, off in processed.items() if ref.stream == stream}
            tails = store.segment_tails(scope, name, [ref.segment_id for ref in mine], survey.versions[stream])
            records: dict = {}  # read only when a segment completes
            deleted: set[int] | None = None  # read only when a segment has no data left
            allowed = None
            for ref, start in sorted(mine.items()):
                tail = survey.tails[ref] = tails[ref.segment_id]
                end = state.end_offsets.get(ref)
                truncated = False
                if not tail.sealed and (tail.length == 0 or tail.length < start):  # empty, or deleted?
                    if deleted is None:
                        truncation = controller.truncation_record(scope, name)
                        deleted = {*truncation.deleted_segments, *truncation.to_delete}
                    truncated = ref.segment_id in deleted
                if truncated:  # Pravega's TruncatedDataException: the reader moves on past the head
                    survey.truncated.add(ref)
                    log.warning("%r: segment %d of %s was truncated away at offset %d: its successors "
                                "are read from the head", self, ref.segment_id, stream, start)
                if not (truncated or (tail.sealed and start >= tail.length) or (end is not None and start >= end)):
                    continue
                if not records:
                    controller.settled(scope, name)  # a scale a crash left half-done is finished first
                    records = {r.segment_id: r for r in store.segment_records(scope, name)}
                    allowed = _within_end(list(records.values()), self._group.config.end_of(stream))
                record = records.get(ref.segment_id)
                if (end is None and not truncated and record is not None and record.sealed_epoch is None
                        and record.sealed_size is None):
                    continue  # sealed, its record not yet: completed by a later call
                survey.completions[ref] = {} if end is not None else {
                    s: p for s, p in successors_with_predecessors(list(records.values()), ref.segment_id).items()
                    if allowed is None or s in allowed}
        return survey

    def _ranges(self, state: ReaderGroupState, survey: _Survey):
        """The ranges this batch reads: each owned segment from its live position up to its
        tail or end offset, at the surveyed events versions (a segment acquired by this call is
        read at its stream's surveyed version, or the latest)."""
        store = self._group._store
        owned = {ref: off for ref, off in self._positions.items() if ref not in survey.truncated}
        versions = dict(survey.versions)
        missing = [ref for ref in owned if ref not in survey.tails]
        for stream in sorted({ref.stream for ref in missing}):
            scope, name = stream.split("/")
            version = versions.setdefault(stream, store.events_version(scope, name))
            ids = [ref.segment_id for ref in missing if ref.stream == stream]
            survey.tails.update({SegmentRef(stream, sid): tail for sid, tail in
                                 store.segment_tails(scope, name, ids, version).items()})
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        for ref, start in sorted(owned.items()):
            tail = survey.tails[ref]
            end = state.end_offsets.get(ref)
            to = tail.length if end is None else min(tail.length, end)
            if to > start:  # its completion, if this reaches the end, waits for the next call
                ranges[(ref.stream, ref.segment_id)] = (start, to)
        return ranges, {s: v for s, v in versions.items() if any(key[0] == s for key in ranges)}

    def _events(self, ranges: Mapping, versions: Mapping[str, int]) -> DataFrame:
        if not ranges:
            if self._empty is None:
                self._empty = self._group._empty_events()
            return self._empty
        store = self._group._store
        parts = []
        for stream in sorted(versions):
            scope, name = stream.split("/")
            mine = [segment_ranges.SegmentRange(sid, lo, hi) for (s, sid), (lo, hi) in sorted(ranges.items()) if s == stream]
            version = versions.get(stream)
            events = store.events(scope, name, version).transform(segment_ranges.filter_segment_ranges, ranges=mine)
            if mine and store.may_hold_chunks(scope, name, [r.segment_id for r in mine], version):
                events = events.transform(assemble_large_events)
            parts.append(events.transform(segment_ranges.select_read_columns, scope=scope, stream=name))
        out = parts[0]
        for part in parts[1:]:
            out = out.unionByName(part)
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


def open_reader_group(controller: Controller, scope: str, group: str) -> ReaderGroup:
    """A handle on reader group ``group`` of ``scope``; raises ``ReaderGroupNotFoundError``."""
    scope, group = validate_scope_name(scope), validate_reader_group_name(group)
    row = controller.store.reader_group_row(scope, group)
    if row is None:
        raise ReaderGroupNotFoundError(f"reader group {scope}/{group} does not exist")
    return ReaderGroup(controller, scope, group, row)
