"""Watermarks: Pravega's periodic watermarking rules, across a scale and with silent and
shut-down writers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import pravega_spark as ps
from pravega_spark.controller.watermarks import (
    Watermark,
    WriterMark,
    classify_writers,
    complete_cut,
    compute_watermark,
    missing_ranges,
    time_window,
    upper_bound,
)
from pravega_spark.stream.cut_algorithms import stream_cut_equal_or_after
from pravega_spark.stream.segments import SegmentRecord, segment_id

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
S0, S1 = segment_id(0, 0), segment_id(1, 0)
S2, S3 = segment_id(2, 1), segment_id(3, 1)  # S0 split in epoch 1
RECORDS = [
    SegmentRecord(S0, 0.0, 0.5, T0, 1, 100), SegmentRecord(S1, 0.5, 1.0, T0),
    SegmentRecord(S2, 0.0, 0.25, T0), SegmentRecord(S3, 0.25, 0.5, T0),
]


def _t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# ---- pure rules ----------------------------------------------------------------------------------
def test_upper_bound_is_lineage_aware_and_completed_from_the_highest_epoch():
    bound = upper_bound([{S0: 40}, {S2: 10, S1: 70}, {S1: 30}], RECORDS)
    assert bound == {S2: 10, S1: 70}  # S2 replaced its predecessor S0; S1 took the max
    assert upper_bound([{S2: 10}, {S0: 90}], RECORDS) == {S2: 10}  # a predecessor after its successor is skipped
    assert missing_ranges(bound, RECORDS) == [(0.25, 0.5)]
    assert complete_cut(bound, None, RECORDS) == {S2: 10, S3: 0, S1: 70}
    # the previous watermark's cut is folded in: the result never goes back
    assert complete_cut({S0: 20, S1: 10}, {S0: 50, S1: 60}, RECORDS) == {S0: 50, S1: 60}
    assert complete_cut({}, None, RECORDS) == {S2: 0, S3: 0, S1: 0}


def test_writer_classification_follows_pravega():
    previous = Watermark(_t(10), _t(12), ps.StreamCut("s/t", {S0: 0, S1: 0}))
    marks = [WriterMark("fresh", _t(11), {}, True),
             WriterMark("stale-alive", _t(9), {}, True),
             WriterMark("stale-timed-out", _t(9), {}, True, stale_since=_t(100)),
             WriterMark("stale-closed", _t(10), {}, False),
             WriterMark("fresh-closed", _t(15), {}, False, stale_since=_t(90))]
    active, inactive, stale = classify_writers(marks, previous, now=_t(160), timeout=timedelta(seconds=60))
    assert [m.writer_id for m in active] == ["fresh", "stale-alive", "fresh-closed"]
    assert [m.writer_id for m in inactive] == ["stale-timed-out", "stale-closed"]
    assert stale == {"stale-alive": _t(160), "stale-closed": _t(160), "fresh-closed": None}


def test_compute_watermark_needs_time_to_advance():
    marks = [WriterMark("a", _t(5), {S0: 16}, True), WriterMark("b", _t(8), {S1: 24}, True)]
    wm = compute_watermark(marks, None, RECORDS, "s/t")
    assert (wm.lower_time_bound, wm.upper_time_bound, wm.stream_cut.positions) == (_t(5), _t(8), {S0: 16, S1: 24})
    assert compute_watermark(marks, wm, RECORDS, "s/t") is None


def test_time_window_of_positions():
    wms = [Watermark(_t(1), _t(2), ps.StreamCut("s/t", {S0: 10, S1: 10})),
           Watermark(_t(5), _t(6), ps.StreamCut("s/t", {S0: 50, S1: 50}))]
    window = time_window(ps.StreamCut("s/t", {S0: 20, S1: 20}), wms, RECORDS)
    assert (window.lower_time_bound, window.upper_time_bound) == (_t(1), _t(6))
    assert time_window(ps.StreamCut("s/t", {S0: 0, S1: 0}), wms, RECORDS).lower_time_bound is None
    assert time_window(ps.StreamCut("s/t", {S0: 60, S1: 60}), wms, RECORDS).upper_time_bound is None


# ---- against a real store ------------------------------------------------------------------------
def _write(spark, writer, tag: str, n: int = 12):
    writer.write_events(spark.createDataFrame([(f"key-{i}", f"{tag}-{i}") for i in range(n)],
                                              "routing_key string, event string"))


@pytest.mark.slow
def test_watermarks_across_a_scale_are_monotone(spark, root, manager, stream2):
    a = manager.create_event_writer("iot", "sensors", writer_id="a")
    b = manager.create_event_writer("iot", "sensors", writer_id="b")
    _write(spark, a, "a0")
    _write(spark, b, "b0")
    a.note_time(_t(10))
    b.note_time(_t(12))
    with pytest.raises(ps.InvalidWriterMarkError):
        a.note_time(_t(9))  # time never goes backwards
    first = manager.compute_watermarks(now=_t(20))["iot/sensors"]
    assert (first.lower_time_bound, first.upper_time_bound) == (_t(10), _t(12))
    assert first.stream_cut == manager.tail_stream_cut("iot", "sensors")  # both wrote both segments
    # with Pravega's default aggregation timeout (0) a writer that did not advance is dropped at once
    a_dropped = manager.compute_watermarks(now=_t(21))["iot/sensors"]
    assert (a_dropped.lower_time_bound, a_dropped.stream_cut) == (_t(12), first.stream_cut)
    assert [m.writer_id for m in manager.writer_marks("iot", "sensors")] == ["b"]
    assert manager.compute_watermarks(now=_t(22)) == {}  # b did not advance either: nothing to emit

    info = manager.stream_info("iot", "sensors")
    low = [s for s in manager.segments("iot", "sensors", epoch=info.current_epoch).collect() if s.key_start == 0.0][0]
    manager.scale_stream("iot", "sensors", [low.segment_id], [(0.0, 0.25), (0.25, 0.5)])
    _write(spark, a, "a1")
    a.note_time(_t(30))
    b.note_time(_t(31))  # b wrote nothing since the scale: its position is still pre-scale
    second = manager.compute_watermarks(now=_t(40))["iot/sensors"]
    assert (second.lower_time_bound, second.upper_time_bound) == (_t(30), _t(31))
    records = manager.controller.store.segment_records("iot", "sensors")
    assert stream_cut_equal_or_after(second.stream_cut, first.stream_cut, records)
    assert set(second.stream_cut.positions) == {segment_id(2, 1), segment_id(3, 1), segment_id(1, 0)}
    manager.validate_stream_cut("iot", "sensors", second.stream_cut)

    table = manager.watermarks("iot", "sensors").collect()
    assert [(r.lower_time_bound.replace(tzinfo=timezone.utc), ps.StreamCut.from_text(r.stream_cut)) for r in table] == [
        (_t(10), first.stream_cut), (_t(12), first.stream_cut), (_t(30), second.stream_cut)]
    window = manager.time_window("iot", "sensors", first.stream_cut)
    assert (window.lower_time_bound, window.upper_time_bound) == (_t(12), _t(31))
    head = manager.time_window("iot", "sensors", manager.head_stream_cut("iot", "sensors"))
    assert (head.lower_time_bound, head.upper_time_bound) == (None, _t(12))


def test_silent_writer_blocks_until_shut_down_or_timed_out(spark, manager, stream2, capsys):
    manager.update_stream("iot", "sensors", ps.StreamConfiguration(
        scaling_policy=ps.ScalingPolicy.fixed(2), timestamp_aggregation_timeout=timedelta(minutes=5)))
    a = manager.create_event_writer("iot", "sensors", writer_id="a")
    b = manager.create_event_writer("iot", "sensors", writer_id="b")
    _write(spark, a, "a0")
    a.note_time(_t(10))
    b.note_time(_t(10))  # b never wrote: an empty position
    assert manager.compute_watermarks(now=_t(20))["iot/sensors"].lower_time_bound == _t(10)
    a.note_time(_t(30))
    # b is silent, alive and within the timeout: no watermark, whatever a does
    assert manager.compute_watermarks(now=_t(40)) == {}
    assert manager.compute_watermarks(now=_t(100)) == {}
    b.close()  # shut down: no longer waited for, and removed
    assert manager.compute_watermarks(now=_t(110))["iot/sensors"].lower_time_bound == _t(30)
    assert [m.writer_id for m in manager.writer_marks("iot", "sensors")] == ["a"]

    # a writer that stays stale past the aggregation timeout is dropped as well
    c = manager.create_event_writer("iot", "sensors", writer_id="c")
    c.note_time(_t(5))  # behind the last watermark: not participating
    a.note_time(_t(50))
    assert manager.compute_watermarks(now=_t(200)) == {}  # c is tracked as stale from now on
    assert manager.compute_watermarks(now=_t(200 + 299)) == {}
    from jobs import watermarks as job  # the job's round at that time

    assert job.main(["--root", manager.root, "--now", _t(200 + 300).isoformat()]) == 0
    assert "1 rounds, 1 watermarks emitted" in capsys.readouterr().out
    assert manager.watermarks("iot", "sensors").collect()[-1].lower_time_bound.replace(tzinfo=timezone.utc) == _t(50)
    assert sorted(m.writer_id for m in manager.writer_marks("iot", "sensors")) == ["a"]
