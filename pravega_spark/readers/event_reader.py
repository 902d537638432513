"""Readers of a group: Pravega's ``EventStreamReader`` and what one ``read_next`` returns.

A reader reads a batch at a time: it publishes its position, acquires and releases segments by
the group's rules (``reader_group_state``), and reads the owned segments' ranges as one DataFrame.
The group it belongs to (``reader_group.ReaderGroup``) holds the shared state it changes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from pyspark.sql import DataFrame

from ..controller.client import Controller
from ..errors import (
    ReaderNotInReaderGroupError,
)
from ..store import segment_ranges
from ..store.clock import duration_ms, utc_now
from ..store.store import Store
from ..stream.segments import predecessors, successors_with_predecessors
from ..stream.stream_cut import StreamCut
from .large_event_reader import assemble_large_events
from .reader_group_config import ReaderGroupConfig
from .reader_group_state import ReaderGroupState, SegmentRef


class ReaderGroupPort(Protocol):
    """What a reader uses of its group (``reader_group.ReaderGroup`` implements it): the group's
    names, configuration, clock, shared state and its transitions, and the store it reads."""

    scope: str
    name: str
    config: ReaderGroupConfig
    scoped_name: str
    controller: Controller
    store: Store

    def now(self) -> int: ...
    def state(self) -> ReaderGroupState: ...
    def update_state(self, transition, what: str) -> ReaderGroupState: ...
    def take_offline(self, joins: Mapping[str, str], positions: Mapping | None, fence: bool, what: str) -> list[str]: ...
    def take_silent_offline(self, at: int, silence_ms: int, exclude: str | None = None) -> list[str]: ...
    def empty_events(self) -> DataFrame: ...

log = logging.getLogger("pravega_spark")

Position = Mapping  # {segment_id: offset} for a one-stream group, else {(scoped stream, segment_id): offset}


def offsets_json(positions: Mapping[SegmentRef, int]) -> str:
    return json.dumps({str(ref): int(off) for ref, off in sorted(positions.items())})


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


@dataclass
class Survey:
    """What a ``read_next`` found before committing: events versions and tails of the owned
    segments, the segments it completes (-> their successors) and the ones truncated away."""

    versions: dict = field(default_factory=dict)
    tails: dict = field(default_factory=dict)
    completions: dict = field(default_factory=dict)
    truncated: set = field(default_factory=set)


def owner_change(before: ReaderGroupState, after: ReaderGroupState) -> bool:
    """Whether a transition changes more than the reader's liveness and recorded positions
    (those alone wait for the refresh interval: Pravega's write rule)."""
    return replace(after, last_seen=before.last_seen, positions=before.positions) != before


def positions_of(state_positions: Mapping[SegmentRef, int], single: bool) -> dict:
    if single:
        return {ref.segment_id: off for ref, off in state_positions.items()}
    return {(ref.stream, ref.segment_id): off for ref, off in state_positions.items()}


class EventStreamReader:
    """One reader of a group (Pravega's ``EventStreamReader``), reading a batch at a time.

    Its positions live in the reader (Pravega's write rule): a ``read_next`` commits the group's
    state only to acquire, release or complete segments, to answer a checkpoint, or (in its member
    row, every ``position_refresh_interval``) to record its processed positions and liveness.
    """

    def __init__(self, group: ReaderGroupPort, reader_id: str, incarnation: str, now: int) -> None:
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
        with self._group.store.one_read():  # the segments' summaries are asked once per version
            return self._read_next()

    def _read_next(self) -> ReadBatch:
        group = self._group
        config = group.config
        now = group.now()
        stored = group.state()
        self.sync(stored)
        processed = dict(self._positions)  # the caller has processed every batch returned so far
        refresh_due = now - self._persisted >= duration_ms(config.position_refresh_interval)
        if refresh_due and config.reader_silence_limit is not None:
            if group.take_silent_offline(now, duration_ms(config.reader_silence_limit), exclude=self.reader_id):
                stored = group.state()
                self.sync(stored)
        survey = self._survey(stored, processed)
        interval = None if config.automatic_checkpoint_interval is None else duration_ms(config.automatic_checkpoint_interval)
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

        if owner_change(stored, transition(stored)):
            state = group.update_state(transition, f"read_next of {self.reader_id}")
            self._persisted = now
            if plan.get("released"):  # Pravega's acquire timer: the segment is for the others now
                self._acquire_after = now + duration_ms(config.position_refresh_interval)
        else:
            state = stored
            if refresh_due:
                self._refresh(processed, now)
        self.sync(state)
        single = len(self._streams) == 1
        if "checkpoint" in plan:
            log.info("%r: checkpoint %s", self, plan["checkpoint"])
            return ReadBatch(self._events({}, {}), positions_of(processed, single), plan["checkpoint"],
                             state.end_of_data, state.revision)
        ranges, versions = self._ranges(state, survey)
        self._positions.update({SegmentRef(stream, sid): hi for (stream, sid), (_, hi) in ranges.items()})
        position = positions_of(self._positions, single)
        owners = {key: self._owners[SegmentRef(*key)] for key in ranges}
        batch = ReadBatch(self._events(ranges, versions), position, None, state.end_of_data, state.revision,
                          ranges, owners)
        log.log(logging.INFO if batch.ranges else logging.DEBUG, "%r read %d segment ranges; position %s",
                self, len(batch.ranges), position)
        return batch

    def position(self) -> Position:
        """This reader's segments and offsets: after the latest batch it returned."""
        try:
            self.sync(self._group.state())
        except ReaderNotInReaderGroupError:
            pass  # offline: where it stopped
        return positions_of(self._positions, len(self._streams) == 1)

    def close(self) -> None:
        """Go offline at the current position (Pravega's ``close``): the caller has processed
        every batch returned."""
        state = self._group.state()
        if self.reader_id in state.assigned and state.incarnations.get(self.reader_id, "") == self._incarnation:
            self.sync(state)
            self._group.take_offline({self.reader_id: self._incarnation}, {self.reader_id: dict(self._positions)},
                                 fence=False, what=f"reader {self.reader_id} closed")

    # ---- internals ---------------------------------------------------------------------------
    def _check_online(self, state: ReaderGroupState) -> None:
        if self.reader_id not in state.assigned or state.incarnations.get(self.reader_id, "") != self._incarnation:
            raise ReaderNotInReaderGroupError(f"{self!r} is offline (closed, or taken offline): create a reader "
                                              "to join again")

    def sync(self, state: ReaderGroupState) -> None:
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
                    "incarnation": self._incarnation, "positions": offsets_json(processed),
                    "last_seen": now, "update_time": utc_now()}

        group.store.update_member(group.scope, group.name, self.reader_id, change,
                                   f"refresh of {self.reader_id} in {group.scoped_name}")
        self._persisted = now
        log.debug("%r refreshed its positions %s", self, processed)

    def _survey(self, state: ReaderGroupState, processed: Mapping[SegmentRef, int]) -> Survey:
        """Each owned stream's events version and segment tails, and the owned segments this
        reader has finished (read to their sealed end or end offset, or truncated away) with
        their successors: what this call completes."""
        store, controller = self._group.store, self._group.controller
        survey = Survey()
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
                    allowed = within_end(list(records.values()), self._group.config.end_of(stream))
                record = records.get(ref.segment_id)
                if (end is None and not truncated and record is not None and record.sealed_epoch is None
                        and record.sealed_size is None):
                    continue  # sealed, its record not yet: completed by a later call
                survey.completions[ref] = {} if end is not None else {
                    s: p for s, p in successors_with_predecessors(list(records.values()), ref.segment_id).items()
                    if allowed is None or s in allowed}
        return survey

    def _ranges(self, state: ReaderGroupState, survey: Survey):
        """The ranges this batch reads: each owned segment from its live position up to its
        tail or end offset, at the surveyed events versions (a segment acquired by this call is
        read at its stream's surveyed version, or the latest)."""
        store = self._group.store
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
                self._empty = self._group.empty_events()
            return self._empty
        store = self._group.store
        parts = []
        for stream in sorted(versions):
            scope, name = stream.split("/")
            mine = [segment_ranges.SegmentRange(sid, lo, hi) for (s, sid), (lo, hi) in sorted(ranges.items()) if s == stream]
            # the files at the surveyed version, if the log lists them: a range from a position
            # at a file's edge to the tail is then read with no row filter
            version, extents = store.data_files(scope, name, versions.get(stream))
            events = store.events(scope, name, version).transform(segment_ranges.filter_segment_ranges, ranges=mine,
                                                                 extents=extents)
            if mine and store.may_hold_chunks(scope, name, [r.segment_id for r in mine], version):
                events = events.transform(assemble_large_events)
            parts.append(events.transform(segment_ranges.select_read_columns, scope=scope, stream=name))
        out = parts[0]
        for part in parts[1:]:
            out = out.unionByName(part)
        return out


def within_end(records, end: StreamCut | None) -> set[int] | None:
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


