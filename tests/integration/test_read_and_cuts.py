"""Reading between cuts, cut validity against the stored stream, DataFrame round trip, cut at time."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from chispa import assert_df_equality

import pravega_spark as ps
from pravega_spark.store.segment_ranges import (
    SegmentRange,
    check_read_bounds,
    filter_segment_ranges,
)
from tests.helpers import table_versions

ROWS_SCHEMA = "routing_key string, event string"


def _write(writer, spark, prefix, n, keys=4):
    return writer.write_events(spark.createDataFrame([(f"k{i % keys}", f"{prefix}{i:03d}") for i in range(n)], ROWS_SCHEMA))


@pytest.mark.slow
@pytest.mark.connect
def test_read_between_cuts_across_a_scale(manager, spark, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    _write(writer, spark, "a", 12)
    cut1 = manager.tail_stream_cut(scope, stream)
    _write(writer, spark, "b", 12)
    manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    _write(writer, spark, "c", 12)
    cut2 = manager.tail_stream_cut(scope, stream)
    _write(writer, spark, "d", 12)
    middle = manager.read_events(scope, stream, start=cut1, end=cut2)
    assert sorted(r.event.decode()[0] for r in middle.collect()) == ["b"] * 12 + ["c"] * 12
    assert middle.columns == ["scope", "stream", "segment_id", "offset", "event", "routing_key", "writer_id", "write_time"]
    assert manager.read_events(scope, stream, end=cut1).count() == 12
    assert manager.read_events(scope, stream, start=cut2).count() == 12
    assert manager.read_events(scope, stream, start=cut2, end=cut2).count() == 0
    assert manager.size_between(scope, stream, cut1, cut2) == 24 * (8 + 4)
    # a cut inside the files of 'b' (each write is one file per segment): the rows of those
    # files are filtered by offset, the other files read whole
    by_segment: dict[int, list[int]] = {}
    for r in middle.where("event LIKE 'b%'").collect():
        by_segment.setdefault(r.segment_id, []).append(r.offset)
    inside = ps.StreamCut(f"{scope}/{stream}", {**cut1.positions, **{
        sid: sorted(offs)[2] for sid, offs in by_segment.items() if len(offs) > 2}})
    want = sorted(r.event.decode() for r in middle.collect()
                  if r.segment_id not in inside.positions or r.offset >= inside.positions[r.segment_id])
    assert 12 < len(want) < 24
    assert sorted(r.event.decode() for r in manager.read_events(scope, stream, inside, cut2).collect()) == want
    assert manager.read_events(scope, stream, cut1, inside).count() == 24 - len(want)
    assert manager.size_between(scope, stream) == manager.stream_info(scope, stream).size_bytes == 48 * 12
    # the DataFrame is pinned: later writes do not change it
    before = middle.count()
    _write(writer, spark, "e", 4)
    assert middle.count() == before
    assert manager.read_events(scope, stream, start=cut2).count() == 16
    # per key, (segment_id, offset) order is append order
    rows = manager.read_events(scope, stream).collect()
    for key in {r.routing_key for r in rows}:
        seq = [r.event.decode() for r in sorted((r for r in rows if r.routing_key == key),
                                                key=lambda r: (r.segment_id, r.offset))]
        assert seq == sorted(seq)
    with pytest.raises(ps.InvalidStreamCutError):
        manager.read_events(scope, stream, start=cut2, end=cut1)


@pytest.mark.connect
def test_invalid_cuts_refused(manager, spark, root, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    _write(writer, spark, "a", 8, keys=1)
    tail = manager.tail_stream_cut(scope, stream)
    seg = next(s for s, o in tail.positions.items() if o > 0)
    before = table_versions(spark, root)
    bad = [
        ps.StreamCut("iot/other", tail.positions),                        # other stream
        ps.StreamCut(f"{scope}/{stream}", {seg: tail.positions[seg]}),     # does not cover the key space
        tail.with_positions({seg: tail.positions[seg] + 12}),              # beyond the segment's length
        tail.with_positions({seg: 3}),                                     # not on an event boundary
        ps.StreamCut(f"{scope}/{stream}", {0: 0, 1: 0, 99: 0}),            # unknown segment
    ]
    for cut in bad:
        with pytest.raises(ps.InvalidStreamCutError):
            manager.read_events(scope, stream, start=cut)
        with pytest.raises(ps.InvalidStreamCutError):
            manager.validate_stream_cut(scope, stream, cut)
    with pytest.raises(ps.InvalidStreamCutError):
        manager.read_events(scope, stream, start="yesterday")
    assert table_versions(spark, root) == before
    assert manager.validate_stream_cut(scope, stream, tail.with_positions({seg: 12})) is not None


def test_cut_dataframe_and_text_round_trip(manager, spark, stream2):
    scope, stream = stream2
    _write(manager.create_event_writer(scope, stream), spark, "a", 6)
    cut = manager.tail_stream_cut(scope, stream)
    df = cut.to_df(spark)
    assert {r.segment_id: r.offset for r in df.collect()} == dict(cut.positions)
    assert ps.StreamCut.from_df(df) == cut
    assert_df_equality(ps.StreamCut.from_df(df).to_df(spark), df, ignore_row_order=True)
    assert ps.StreamCut.from_text(cut.as_text()) == cut == ps.StreamCut.from_json(cut.to_json())
    assert ps.StreamCut.from_text(ps.StreamCut.UNBOUNDED.as_text()) is ps.StreamCut.UNBOUNDED
    assert len({cut, ps.StreamCut.from_text(cut.as_text())}) == 1


def test_stream_cut_at_time(manager, spark, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    _write(writer, spark, "a", 6)
    time.sleep(1.0)
    t1 = datetime.now(timezone.utc)
    time.sleep(1.0)
    _write(writer, spark, "b", 6)
    at_t1 = manager.stream_cut_at(scope, stream, t1)
    assert manager.read_events(scope, stream, end=at_t1).count() == 6
    assert manager.stream_cut_at(scope, stream, datetime(2000, 1, 1)) == manager.head_stream_cut(scope, stream)
    assert manager.stream_cut_at(scope, stream, datetime.now(timezone.utc)) == manager.tail_stream_cut(scope, stream)
    assert manager.segments_at(scope, stream, t1).count() == 2


def test_reads_below_head_raise_truncated(spark):
    # the head check in isolation (truncation itself arrives with retention)
    from pravega_spark.stream.segments import initial_segments
    records = initial_segments(2)
    head = ps.StreamCut("a/b", {0: 24, 1: 0})
    with pytest.raises(ps.TruncatedDataError):
        check_read_bounds(ps.StreamCut("a/b", {0: 12, 1: 0}), ps.StreamCut("a/b", {0: 48, 1: 0}), head, records)
    check_read_bounds(head, ps.StreamCut("a/b", {0: 48, 1: 0}), head, records)


def test_filter_segment_ranges_is_a_pure_transformation(spark):
    # the events view's columns: files of three 9-byte events ([base_offset, end_offset)), and a
    # seal record in a file of its own (base = end); segment 1's rows are never asked for
    def rows(sid, base):
        return [(sid, o, o + 9, 0, "k", b"x", "w", datetime(2026, 1, 1), o, base, base + 27)
                for o in range(base, base + 27, 9)]
    events = spark.createDataFrame(
        rows(0, 0) + rows(0, 27) + rows(0, 54) + rows(1, 0)
        + [(0, 81, 81, 1, None, None, None, datetime(2026, 1, 1), None, 81, 81)],
        "segment_id long, offset long, next_offset long, record_type int, routing_key string, "
        "event binary, writer_id string, write_time timestamp, event_offset long, base_offset long, "
        "end_offset long")

    def read(*ranges, extents=None):
        return [(r.segment_id, r.offset) for r in events.transform(filter_segment_ranges, ranges=list(ranges),
                                                                   extents=extents)
                .orderBy("segment_id", "offset").collect()]

    # bounds inside files: the straddling files' rows are filtered, the inner file read whole
    assert read(SegmentRange(0, 9, 63)) == [(0, o) for o in (9, 18, 27, 36, 45, 54)]
    assert read(SegmentRange(0, 27, 54)) == [(0, o) for o in (27, 36, 45)]  # bounds at file edges
    assert read(SegmentRange(0, 30, 40)) == [(0, 36)]  # both bounds in one file
    assert read(SegmentRange(0, 60, None)) == [(0, 63), (0, 72)]  # the seal record never shows
    assert read(SegmentRange(0, 0, None)) == [(0, o) for o in range(0, 81, 9)]
    assert read(SegmentRange(0, 0, 18), SegmentRange(1, 9, None)) == [(0, 0), (0, 9), (1, 9), (1, 18)]
    assert read() == []
    # with the files known, a range whose bounds are file edges reads them whole
    extents = {0: [(0, 27), (27, 54), (54, 81)], 1: [(0, 27)]}
    assert read(SegmentRange(0, 27, 54), extents=extents) == [(0, o) for o in (27, 36, 45)]
    assert read(SegmentRange(0, 9, 63), extents=extents) == [(0, o) for o in (9, 18, 27, 36, 45, 54)]


def test_range_filters_filter_rows_only_where_a_file_may_straddle_a_bound():
    from pravega_spark.store.segment_ranges import range_filters

    files, rows = range_filters([SegmentRange(3, 0, None), SegmentRange(1, 0, None)])
    assert (files, rows) == ("segment_id IN (1, 3)", "")  # whole segments: no row filter
    extents = {0: [(0, 10), (10, 20), (20, 30)], 1: [(0, 15), (15, 30)]}
    files, rows = range_filters([SegmentRange(0, 10, 20), SegmentRange(1, 10, None)], extents)
    end = 2**63 - 1
    assert files == ("segment_id IN (0, 1) AND end_offset > try_element_at(map(0L, 10L, 1L, 10L), segment_id) "
                     f"AND base_offset < try_element_at(map(0L, 20L, 1L, {end}L), segment_id)")
    # segment 0's bounds are file edges; segment 1's start is inside its first file
    assert rows == ("segment_id IN (0) OR (offset >= try_element_at(map(1L, 10L), segment_id) AND "
                    f"offset < try_element_at(map(1L, {end}L), segment_id))")
    assert range_filters([SegmentRange(0, 10, 20)], extents)[1] == ""  # bounds at edges: no row filter
    assert range_filters([SegmentRange(0, 10, 20)])[1] != ""  # files unknown: rows filtered


def test_ranges_ending_at_the_tail_read_at_its_version_are_open_ended():
    from pravega_spark.store.segment_ranges import SegmentRange, open_ended_at_tail

    tail = ps.StreamCut("iot/s", {1: 100, 2: 50})
    ranges = [SegmentRange(0, 0, 40), SegmentRange(1, 10, 100), SegmentRange(2, 0, 30), SegmentRange(3, 0, None)]
    assert open_ended_at_tail(ranges, tail) == [SegmentRange(0, 0, 40), SegmentRange(1, 10, None),
                                                SegmentRange(2, 0, 30), SegmentRange(3, 0, None)]
