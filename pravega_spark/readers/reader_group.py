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
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .._failpoints import failpoint
from ..controller import subscribers
from ..controller.client import Controller
from ..errors import (
    IllegalStateError,
    InvalidConfigError,
    ReaderGroupNotFoundError,
)
from ..store import segment_ranges
from ..store.clock import duration_ms, now_ms, utc_now
from ..stream.names import validate_reader_group_name, validate_scope_name
from ..stream.segments import predecessors, short_segment_name
from ..stream.stream_cut import StreamCut
from .event_reader import EventStreamReader
from .reader_group_config import ReaderGroupConfig, StreamDataRetention
from .reader_group_sink import ReaderGroupSink
from .reader_group_state import ReaderGroupState, SegmentRef

log = logging.getLogger("pravega_spark")

Position = Mapping  # {segment_id: offset} for a one-stream group, else {(scoped stream, segment_id): offset}


class _OwnershipMoved(Exception):
    """A reader being taken offline acquired or released segments after its segments were read."""


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

    def __reduce__(self):
        """Pickled by its store's root and its names; rebuilt in the active session from the
        group's row (see ``EventStreamWriter.__reduce__``)."""
        return (reader_group_from_names, (self._store.root, self.scope, self.name))

    # ---- the readers' port (Pravega's ``ReaderGroupStateManager``): what a reader may use -------
    @property
    def controller(self) -> Controller:
        return self._controller

    @property
    def store(self):
        return self._store

    def now(self) -> int:
        """The group's clock, in ms (``store.clock.now_ms`` unless a test set another)."""
        return self._clock()

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

        state = self.update_state(transition, f"add readers {ids}")
        readers = [EventStreamReader(self, r, incarnations[r], now) for r in ids]
        for joined in readers:
            joined.sync(state)
        log.info("%r: readers %s joined", self, ids)
        return readers

    def _complete_take_overs(self, reader_ids: list[str]) -> None:
        """A reader joining again while its take-over is half done (the sink fenced its
        segments, the group still lists it online: the remover died or is between its two
        commits) completes that take-over first, at the sink's offsets, so the README's "join
        again" is always safe. An id online and not fenced stays online (``add_reader`` refuses)."""
        state = self.state()
        online = {r: state.incarnations.get(r, "") for r in reader_ids if r in state.assigned}
        if not online or state.sink is None:
            return
        sink = self._sink_at(state.sink)
        fenced = {r: inc for r, inc in online.items() if sink.taken_over(r, inc)}
        if fenced and self.take_offline(fenced, None, fence=True, what=f"take-over of {sorted(fenced)} completed on rejoin"):
            log.warning("%r: readers %s rejoined during their take-over: completed it at the sink's offsets",
                        self, sorted(fenced))

    def online_readers(self) -> list[str]:
        """The ids of the readers online in the group."""
        return self.state().online_readers

    def reader_offline(self, reader_id: str, last_position: Position | None = None) -> None:
        """Take a reader offline (Pravega's ``readerOffline``): its segments go back to
        unassigned at ``last_position``, or, when None, at the offsets last recorded for it: the
        later of its acquisition, last checkpoint or last position refresh and, when the group has
        a sink (``delta_sink``), the offsets the sink holds (exactly-once; without a sink, events
        after the refresh are read again: at-least-once). With a sink, the reader's segments are
        fenced there first: if it is still running, it can no longer write them."""
        refs = _refs(last_position, self.config.scoped_streams)
        state = self.state()
        if reader_id in state.assigned:
            self.take_offline({reader_id: state.incarnations.get(reader_id, "")},
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
        return self.take_silent_offline(at, duration_ms(silence))

    def take_silent_offline(self, at: int, silence_ms: int, exclude: str | None = None) -> list[str]:
        state = self.state()
        refreshed = {r: last for r, (_, last) in self._members(state).items()}
        silent = {r: state.incarnations.get(r, "") for r in state.silent_readers(at, silence_ms, refreshed) if r != exclude}
        if not silent:
            return []
        gone = self.take_offline(silent, None, fence=True, what=f"offline silent readers {sorted(silent)}")
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

    def take_offline(self, joins: Mapping[str, str], positions: Mapping[str, Mapping[SegmentRef, int]] | None,
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
            state = self.state()
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
                self.update_state(transition, f"{what}")
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
        qualified = self._store.backend.qualify(path)
        sink = self._sink_at(qualified)
        sink.create(schema if schema is not None else self.batch_schema())
        if self.state().sink != qualified:
            self.update_state(lambda state: replace(state, sink=qualified), f"sink {qualified}")
        return sink

    def batch_schema(self) -> StructType:
        """The schema of what ``ReaderGroupSink.write(batch)`` writes: a batch's events and its
        ``revision``."""
        return self.empty_events().withColumn("revision", F.lit(0)).schema

    def empty_events(self) -> DataFrame:
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
        self.update_state(lambda state: state.initiate_checkpoint(name, limit, self._clock()), f"checkpoint {name}")

    def get_checkpoint(self, name: str) -> dict[str, StreamCut] | None:
        """The stream cuts of checkpoint ``name`` once every online reader reached it, else None."""
        done = self.state().completed_checkpoint(name)
        return None if done is None else self._cuts(done.positions)

    def latest_checkpoint(self) -> tuple[str, dict[str, StreamCut]] | None:
        """The newest completed checkpoint: its name and stream cuts (None if none is kept)."""
        done = [c for c in self.state().checkpoints if c.complete]
        return (done[-1].name, self._cuts(done[-1].positions)) if done else None

    def get_stream_cuts(self) -> dict[str, StreamCut]:
        """Each stream's cut at the readers' recorded positions and the unassigned segments'
        offsets. Readers record their positions when they commit and at least every
        ``position_refresh_interval`` while reading, so between checkpoints the cut may lag the
        readers by up to that interval (Pravega's lag until the next checkpoint)."""
        state = self.state()
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
        state = self.state()
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

    def state(self) -> ReaderGroupState:
        return ReaderGroupState.from_json(self._row()["state"])

    def update_state(self, transition, what: str) -> ReaderGroupState:
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


def reader_group_from_names(root: str, scope: str, group: str) -> ReaderGroup:
    """A ``ReaderGroup`` rebuilt from its pickled names, in the active session."""
    return open_reader_group(Controller.for_root(root), scope, group)
