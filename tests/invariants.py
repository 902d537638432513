"""Checks of a stream's stored state used by the concurrency and crash tests."""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import functions as F

from pravega_spark.store.schema import (
    CHUNK_TYPES,
    HEADER_SIZE,
    MARKS_SEGMENT,
    RECORD_EVENT,
    RECORD_SEAL,
    RECORD_STAGED,
    RECORD_TRUNCATE,
    RECORD_WRITE_MARK,
)
from pravega_spark.writers.transactions import parse_txn_id, staging_partition
from tests.helpers import absolute_events


def check_stream_consistent(spark, manager, scope: str, stream: str) -> list:
    """Assert the stored invariants and return the event rows.

    - per segment, offsets are contiguous from its start (0, or the head's offset after a
      truncation): ``next = offset + 8 + len`` (a large event's chunks: 8 for the header in the
      first chunk only; each large event has its first and last chunk); segments deleted by
      truncation hold no row;
    - nothing lies beyond a sealed segment's sealed size, which equals its last event's end;
    - every segment with events is a known segment; a seal record exactly for sealed segments;
    - the stream is ACTIVE or SEALED (no half-finished workflow);
    - staged (transaction) rows exist only in the staging partitions of transactions not decided;
    - every data file sits under the directory of its partition values in the log (engines that
      read them from paths, Polars, agree with Delta);
    - and, stated independently of this code, ``validate_stream``'s suites all hold (the oracle).
    """
    info = manager.stream_info(scope, stream)
    assert info.state in ("ACTIVE", "SEALED"), info.state
    truncation = manager.truncation_record(scope, stream)
    head = info.head_stream_cut.positions
    segments = {r.segment_id: r for r in manager.segments(scope, stream).collect()}
    path = f"{manager.root}/{scope}/{stream}"
    rows = absolute_events(spark, path).collect()
    assert not files_outside_their_partition(spark, path)
    undecided = {staging_partition(parse_txn_id(t.txn_id))
                 for t in manager.transactions(scope, stream).collect() if t.status == "OPEN" or t.timed_out}
    events = defaultdict(list)
    seals = {}
    for r in rows:
        if r.record_type == RECORD_STAGED:
            assert r.segment_id in undecided, f"staged row of a decided or unknown transaction: {r}"
            continue
        if r.segment_id < MARKS_SEGMENT:  # a large event's staged chunk (the public-API backend)
            assert r.record_type in CHUNK_TYPES, f"not a staged chunk below the marks partition: {r}"
            continue
        if r.segment_id == MARKS_SEGMENT:  # a writer's write number (the public-API backend)
            assert r.record_type == RECORD_WRITE_MARK and r.writer_id, f"not a write mark in the marks partition: {r}"
            continue
        assert r.segment_id in segments, r.segment_id
        assert r.segment_id not in truncation.deleted_segments, f"row of deleted segment {r.segment_id}"
        if r.record_type == RECORD_EVENT or r.record_type in CHUNK_TYPES:
            events[r.segment_id].append(r)
        elif r.record_type == RECORD_TRUNCATE:
            assert r.offset == r.next_offset and r.offset <= head.get(r.segment_id, 0), r
        else:
            assert r.record_type == RECORD_SEAL, r
            assert r.segment_id not in seals, f"two seal records in {r.segment_id}"
            seals[r.segment_id] = r.offset
    for sid, seg_rows in events.items():
        expected = max(head.get(sid, 0), 0)
        open_large = None  # event_offset of the large event whose chunks are being walked
        for r in sorted(seg_rows, key=lambda r: r.offset):
            assert r.offset == expected, (sid, r.offset, expected)
            if r.record_type in CHUNK_TYPES:
                first = r.offset == r.event_offset
                assert first == (open_large is None), f"chunk without its first chunk, or a first chunk inside a large event: {r.offset}"
                assert open_large in (None, r.event_offset), (sid, r.offset, r.event_offset)
                assert r.next_offset == r.offset + (HEADER_SIZE if first else 0) + len(r.event)
                open_large = None if r.record_type == CHUNK_TYPES[1] else r.event_offset
            else:
                assert open_large is None, f"large event at {open_large} in {sid} has no last chunk"
                assert r.next_offset == r.offset + HEADER_SIZE + len(r.event)
            expected = r.next_offset
        assert open_large is None, f"large event at {open_large} in {sid} has no last chunk"
        sealed_size = segments[sid].sealed_size
        if sealed_size is not None:
            assert expected == sealed_size, (sid, expected, sealed_size)
    for sid, seg in segments.items():
        if sid in truncation.deleted_segments:
            continue
        if seg.sealed_size is not None:
            assert seals.get(sid) == seg.sealed_size, (sid, seals.get(sid), seg.sealed_size)
        else:
            assert sid not in seals, f"segment {sid} has a seal record but is open"
    assert_valid(manager, scope, stream)
    return [r for seg_rows in events.values() for r in seg_rows if r.record_type == RECORD_EVENT]


def assert_valid(manager, scope: str, stream: str):
    """The oracle: ``validate_stream``'s Great Expectations suites all hold."""
    result = manager.validate_stream(scope, stream)
    assert result.success, str(result)
    return result


def check_key_order(event_rows) -> None:
    """Per (writer, key), (segment_id, offset) order is the writer's append order."""
    by_key = defaultdict(list)
    for r in event_rows:
        writer = r.event.decode().split(":")[0]
        by_key[(writer, r.routing_key)].append(r)
    for key, rows in by_key.items():
        seq = [r.event.decode() for r in sorted(rows, key=lambda r: (r.segment_id, r.offset))]
        assert seq == sorted(seq), f"order broken for {key}"


def files_outside_their_partition(spark, path: str) -> list:
    """The data files of the Delta table at ``path`` whose directory does not name the partition
    values (segment, base, end) that the log gives them."""
    files = (spark.read.format("delta").load(path)
             .select("segment_id", "base_offset", "end_offset", F.input_file_name().alias("file")).distinct())
    wanted = F.format_string("/segment_id=%d/base_offset=%d/end_offset=%d/part-", "segment_id", "base_offset", "end_offset")
    return files.where(~F.col("file").contains(wanted)).collect()
