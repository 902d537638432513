"""Retention-policy rules (pure Python): bounds, sizes, Pravega's truncation point with and
without subscribers, and what a truncation drops from the retention set."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pravega_spark.stream.config import RetentionPolicy
from pravega_spark.stream.retention import (
    RetentionRecord,
    bound_records,
    new_retention_record,
    record_due,
    records_after_truncation,
    size_till,
    truncation_point,
)
from pravega_spark.stream.scaling import apply_transition, plan_scale
from pravega_spark.stream.segments import initial_segments
from pravega_spark.stream.stream_cut import StreamCut

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
MIN = timedelta(minutes=1)
SEGS = initial_segments(1, T0)  # one segment, 0


def cut(offset: int) -> StreamCut:
    return StreamCut("t/s", {0: offset})


def rset(*points: tuple[int, int]) -> list[RetentionRecord]:
    """Records (minutes after T0, offset) on the one-segment stream: size = offset."""
    return [RetentionRecord(T0 + m * MIN, off, cut(off)) for m, off in points]


SET = rset((0, 100), (10, 200), (20, 300), (30, 400))  # 100 bytes every 10 minutes


def test_record_due_is_strict_and_sizes_are_from_the_start():
    assert record_due([], T0, 30 * MIN)
    assert not record_due(SET, T0 + 60 * MIN, 30 * MIN)
    assert record_due(SET, T0 + 60 * MIN + timedelta(seconds=1), 30 * MIN)
    assert size_till(cut(450), SET, SEGS, {0: 500}) == 450  # reference 400 + 50
    assert size_till(cut(50), SET, SEGS, {0: 500}) == 50  # before every record: from the start
    assert new_retention_record(cut(500), SET, SEGS, T0 + 40 * MIN, {0: 500}).recording_size == 500


def test_size_across_a_scale_uses_sealed_sizes():
    records = initial_segments(1, T0)
    plan = plan_scale(records, [0], [(0.0, 0.5), (0.5, 1.0)], 1, T0 + MIN)
    records = apply_transition(records, plan, {0: 1000})
    a, b = (s.segment_id for s in plan.new_segments)
    ref = RetentionRecord(T0, 600, StreamCut("t/s", {0: 600}))
    after = StreamCut("t/s", {a: 10, b: 20})
    assert size_till(after, [ref], records) == 600 + 400 + 30


def test_bounds_by_time_and_size():
    now = T0 + 45 * MIN
    # keep >= 20 minutes: records aged 45, 35, 25, 15 -> min is the one aged 25 (the most recent)
    low, high = bound_records(RetentionPolicy.by_time(20 * MIN), SET, now)
    assert low == SET[2] and high == SET[0]  # max unbounded: the oldest qualifying
    low, high = bound_records(RetentionPolicy.by_time(20 * MIN, 40 * MIN), SET, now)
    assert low == SET[2] and high == SET[1]  # ages within [20, 40]
    assert bound_records(RetentionPolicy.by_time(50 * MIN), SET, now) == (None, None)
    # size: keep >= 150 of 400 -> retained if truncated at each: 300, 200, 100, 0
    low, high = bound_records(RetentionPolicy.by_size_bytes(150), SET, now)
    assert low == SET[1] and high == SET[0]
    low, high = bound_records(RetentionPolicy.by_size_bytes(150, 250), SET, now)
    assert low == SET[1] and high == SET[1]
    # max below every qualifying record: max falls back to min
    low, high = bound_records(RetentionPolicy.by_size_bytes(150, 160), SET, now)
    assert low == SET[1] and high == SET[1]


def test_without_subscribers_truncate_at_min():
    now = T0 + 45 * MIN
    assert truncation_point(RetentionPolicy.by_time(20 * MIN), SET, None, now, SEGS) == SET[2].stream_cut
    assert truncation_point(RetentionPolicy.by_size_bytes(150), SET, None, now, SEGS) == SET[1].stream_cut
    assert truncation_point(RetentionPolicy.by_size_bytes(1000), SET, None, now, SEGS) is None
    assert truncation_point(RetentionPolicy.by_size_bytes(0), [], None, now, SEGS) is None


def test_size_with_lower_bound():
    now = T0 + 45 * MIN
    lengths = {0: 400}
    # the subscribers are behind the min: retained at LB 350 >= param 150, < max unbounded -> LB
    assert truncation_point(RetentionPolicy.by_size_bytes(150), SET, cut(50), now, SEGS, lengths) == cut(50)
    # subscribers are ahead of the min (LB keeps only 50 < 150): min is before LB -> min
    assert truncation_point(RetentionPolicy.by_size_bytes(150), SET, cut(350), now, SEGS, lengths) == cut(200)
    # LB keeps 350 >= max 250: truncate at max if it keeps less than LB does (400 - 200 < 350)
    assert truncation_point(RetentionPolicy.by_size_bytes(150, 250), SET, cut(50), now, SEGS, lengths) == cut(200)
    # LB keeps 150 < max 250 -> LB
    assert truncation_point(RetentionPolicy.by_size_bytes(100, 250), SET, cut(250), now, SEGS, lengths) == cut(250)


def test_size_with_lower_bound_keeping_too_little_and_no_min_record_does_not_truncate():
    now = T0 + 45 * MIN
    lengths = {0: 400}
    # keep >= 350: no record keeps that much (they keep 300, 200, 100, 0), so there is no min; the
    # subscribers' lower bound keeps only 50. Pravega maps the missing min to no truncation
    # (regression: we truncated at the record at or before the lower bound, keeping < 350 bytes).
    policy = RetentionPolicy.by_size_bytes(350, 1000)
    assert bound_records(policy, SET, now) == (None, None)
    assert truncation_point(policy, SET, cut(350), now, SEGS, lengths) is None
    assert truncation_point(RetentionPolicy.by_size_bytes(350), SET, cut(350), now, SEGS, lengths) is None
    # with a min record the same lower bound still truncates at it (min before LB)
    assert truncation_point(RetentionPolicy.by_size_bytes(250, 1000), SET, cut(350), now, SEGS, lengths) == cut(100)


def test_size_with_lower_bound_overlapping_min_takes_the_record_before_it():
    records = initial_segments(2, T0)
    two = [RetentionRecord(T0, 20, StreamCut("t/s", {0: 10, 1: 10})),
           RetentionRecord(T0 + 10 * MIN, 200, StreamCut("t/s", {0: 100, 1: 100})),
           RetentionRecord(T0 + 20 * MIN, 400, StreamCut("t/s", {0: 200, 1: 200}))]
    lengths = {0: 200, 1: 200}
    low, _ = bound_records(RetentionPolicy.by_size_bytes(150), two, T0)
    assert low == two[1]
    # LB keeps 400 - (20 + 180 + 80) = 120 < 150, and overlaps the min record (ahead on 0, behind
    # on 1): the newest record at or before LB, record 0
    lb = StreamCut("t/s", {0: 190, 1: 90})
    assert truncation_point(RetentionPolicy.by_size_bytes(150), two, lb, T0, records, lengths) == two[0].stream_cut
    # keep >= 250: min is record 0, before LB -> record 0
    assert truncation_point(RetentionPolicy.by_size_bytes(250), two, StreamCut("t/s", {0: 150, 1: 50}), T0,
                            records, lengths) == two[0].stream_cut
    # nothing at or before LB: no truncation
    assert truncation_point(RetentionPolicy.by_size_bytes(150), two[1:], lb, T0, records, lengths) is None


def test_time_with_lower_bound():
    now = T0 + 45 * MIN
    policy = RetentionPolicy.by_time(20 * MIN)
    # min (record aged 25) is before LB -> min
    assert truncation_point(policy, SET, cut(350), now, SEGS) == cut(300)
    # LB before min, no max -> LB
    assert truncation_point(policy, SET, cut(150), now, SEGS) == cut(150)
    # with a max of 40 minutes: max bound = newest record aged >= 40 (T0, aged 45)
    bounded = RetentionPolicy.by_time(20 * MIN, 40 * MIN)
    assert truncation_point(bounded, SET, cut(150), now, SEGS) == cut(150)  # LB after the max bound
    # LB before the max bound: truncate at the max record (ages within [20, 40]: aged 35)
    assert truncation_point(bounded, SET, cut(50), now, SEGS) == cut(200)
    # no record old enough for min: nothing
    assert truncation_point(RetentionPolicy.by_time(60 * MIN), SET, cut(50), now, SEGS) is None


def test_lower_bound_mixing_epochs_and_future_segments():
    records = initial_segments(2, T0)
    plan = plan_scale(records, [0], [(0.0, 0.25), (0.25, 0.5)], 1, T0 + MIN)
    records = apply_transition(records, plan, {0: 100})
    a, b = (s.segment_id for s in plan.new_segments)
    retention_set = [RetentionRecord(T0, 100, StreamCut("t/s", {0: 50, 1: 50})),
                     RetentionRecord(T0 + 10 * MIN, 300, StreamCut("t/s", {a: 40, b: 10, 1: 100}))]
    lb = StreamCut("t/s", {a: 20, b: -1, 1: 60})  # a started, b not reached yet
    policy = RetentionPolicy.by_size_bytes(0)
    assert truncation_point(policy, retention_set, lb, T0 + 20 * MIN, records, {a: 40, b: 10, 1: 100}) == lb


def test_records_after_truncation():
    assert records_after_truncation(SET, cut(250), SEGS) == SET[2:]  # drops 100 and 200
    assert records_after_truncation(SET, cut(200), SEGS) == SET[2:]  # up to and including equal
    assert records_after_truncation(SET, cut(50), SEGS) == SET
    assert records_after_truncation(SET, cut(400), SEGS) == []
