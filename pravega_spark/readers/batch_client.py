"""Reading a stream between two cuts as one batch DataFrame (Pravega's ``BatchClient``: the
segment ranges between two stream cuts, read in parallel)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from ..controller.client import Controller
from ..controller.stream_cut_helper import CutOrName
from ..store import segment_ranges
from ..store.read_cache import no_chunks_check, stale_check
from ..stream.names import validate_scope_name, validate_stream_name
from ..stream.segments import epoch_members
from ..stream.stream_cut import StreamCut
from .large_event_reader import CONNECT_ROW_LIMIT, assemble_large_events


def read_events(controller: Controller, scope: str, stream: str, start: CutOrName = "earliest",
                end: CutOrName = "latest") -> DataFrame:
    """``StreamManager.read_events``: the cuts resolved and checked (bounds first, then one
    boundary probe, skipped for positions known to be boundaries), the segment ranges between
    them filtered from the events table (pinned at the tail's version when ``end`` is the tail),
    large events assembled when the ranges may hold chunks.

    Requests before the scan: the stream's row and segments; with ``"latest"`` the events
    table's version and one summary of its segments at that version (the tail and the chunk
    check both come from it); between two bounded cuts nothing more once this process has
    read them (boundaries and the chunk answer are facts of data that never changes). When a
    range has a bound, the files of the version read, if its log lists them (classic: a look at
    the checksum file, kept per version): a bound at a file's edge then needs no row filter."""
    store = controller.store
    if store.backend.resolves_at_evaluation:
        return read_at_evaluation(controller, scope, stream, start, end)
    record, records = controller.settled_with_segments(scope, stream)
    version = None
    if "latest" in (start, end) or any(isinstance(x, StreamCut) and x.is_unbounded for x in (start, end)):
        version = store.events_version(scope, stream)
    with store.one_read():
        if version is not None:  # one summary at the pinned version for the tail and the chunk check
            store.segment_summary(scope, stream, [r.segment_id for r in records], version)
        resolve = controller.resolver(record, records, version)
        start_cut, end_cut = resolve(start, "start"), resolve(end, "end")
        # bounds before the boundary probe: the data below the head is gone
        head = controller.head(record, records)
        controller.check_cuts(record, records, [x for x in (start, end) if isinstance(x, StreamCut)],
                              before_probe=lambda: segment_ranges.check_read_bounds(start_cut, end_cut, head, records))
        ranges = segment_ranges.segment_ranges(start_cut, end_cut, records)
        if version is not None and (end == "latest" or (isinstance(end, StreamCut) and end.is_unbounded)):
            ranges = segment_ranges.open_ended_at_tail(ranges, end_cut)  # the events are read at the tail's version
        # (the data between two bounded cuts never changes: its chunk answer is kept)
        fixed = (record.creation_time, tuple(ranges)) if version is None else None
        extents = None
        if any(r.start > 0 or r.end is not None for r in ranges):
            # a bound inside a file needs a row filter there: the files, if the log lists them
            # (the read is then pinned at that version)
            version, extents = store.data_files(scope, stream, version)
        events = store.events(scope, stream, version).transform(segment_ranges.filter_segment_ranges, ranges=ranges,
                                                                extents=extents)
        # chunk assembly costs a second scan of the range: only when a large event may be in it
        if store.may_hold_chunks(scope, stream, [r.segment_id for r in ranges], version, fixed):
            events = events.transform(assemble_large_events)
    return events.transform(segment_ranges.select_read_columns, scope=scope, stream=stream)


def open_end(end: CutOrName) -> bool:
    """Whether a read's ``end`` is open: ``"latest"`` or an unbounded cut (pure)."""
    return end == "latest" or (isinstance(end, StreamCut) and end.is_unbounded)


def read_at_evaluation(controller: Controller, scope: str, stream: str, start: CutOrName = "earliest",
                       end: CutOrName = "latest") -> DataFrame:
    """``read_events`` over Spark Connect: the stream's row and segments from this process's read
    cache (no request once the stream was read), ``"latest"`` resolved when Spark evaluates the
    DataFrame (each segment read to whatever is there then), and the cache's staleness checked
    inside the scan (``store.read_cache``): a row changed by another client since fails the
    action with ``StaleReadError``'s message, never a wrong or partial result.

    A large event past ``CONNECT_ROW_LIMIT`` fails the action with a message naming
    ``open_event`` (the row would cross the server's driver and the wire whole).

    Requests before the scan: none for a stream read before in this process (a bounded cut is
    probed for its boundaries once); the first read fetches the row and segments, and asks
    once whether large events are there."""
    validate_scope_name(scope)
    validate_stream_name(stream)
    store = controller.store
    entry = controller.cached_with_segments(scope, stream)
    record, records = entry.record, entry.records
    resolve = controller.resolver(record, records, None)
    start_cut = resolve(start, "start")
    if open_end(end):  # to whatever is there: every segment of the current epoch, open-ended
        end_cut = StreamCut(record.scoped_name, {r.segment_id: segment_ranges.NO_END
                                                 for r in epoch_members(records, record.current_epoch)})
    else:
        end_cut = resolve(end, "end")
    head = controller.head(record, records)
    controller.check_cuts(record, records, [x for x in (start, end) if isinstance(x, StreamCut)],
                          before_probe=lambda: segment_ranges.check_read_bounds(start_cut, end_cut, head, records))
    ranges = segment_ranges.segment_ranges(start_cut, end_cut, records)
    if open_end(end):
        ranges = [segment_ranges.SegmentRange(r.segment_id, r.start, None) for r in ranges]
    events = (store.events(scope, stream).where(stale_check(store.stream_rows(scope, stream), record))
              .transform(segment_ranges.filter_segment_ranges, ranges=ranges))
    if open_end(end):
        if entry.chunks is None:  # asked once per entry; a chunk committed since fails the scan
            entry.chunks = store.may_hold_chunks(scope, stream, [r.segment_id for r in records])
        events = (events.transform(assemble_large_events, CONNECT_ROW_LIMIT) if entry.chunks
                  else events.where(no_chunks_check(record)))
    elif store.may_hold_chunks(scope, stream, [r.segment_id for r in ranges], None,
                               (record.creation_time, tuple(ranges))):  # fixed data: its answer is kept
        events = events.transform(assemble_large_events, CONNECT_ROW_LIMIT)
    return events.transform(segment_ranges.select_read_columns, scope=scope, stream=stream)
