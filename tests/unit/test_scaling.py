"""Tests for pravega_spark.stream.scaling.

The validation cases re-express Pravega's ``RecordHelperTest.scaleHelperMethodTest`` (five equal
segments, ``keyRangeChunk = 1.0 / 5``) and the classic split-then-merge lineage example.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

from pravega_spark.errors import (
    InvalidConfigError,
    InvalidScaleError,
    PravegaSparkError,
    ScalePreconditionError,
)
from pravega_spark.stream.scaling import (
    EpochTransition,
    apply_transition,
    merge_key_ranges,
    plan_scale,
    scale_up_to,
    split_ranges,
)
from pravega_spark.stream.segments import (
    SegmentRecord,
    current_epoch,
    epoch_members,
    initial_segments,
    predecessors,
    segment_id,
    successors_with_predecessors,
)

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
T1 = datetime(2024, 1, 2, tzinfo=timezone.utc)
CHUNK = 1.0 / 5


def five() -> list[SegmentRecord]:
    return initial_segments(5, T0)


def plan5(sealed, ranges, min_num_segments=1):
    return plan_scale(five(), sealed, ranges, min_num_segments, T1)


def ranges_of(transition: EpochTransition) -> list[tuple[float, float]]:
    return [(s.key_start, s.key_end) for s in transition.new_segments]


# --- initial segments ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", range(1, 12))
def test_initial_segments_cover_key_space(count):
    records = initial_segments(count, T0)
    assert [r.segment_id for r in records] == list(range(count))
    assert records[0].key_start == 0.0
    assert records[-1].key_end == 1.0
    for previous, current in zip(records, records[1:], strict=False):
        assert previous.key_end == current.key_start
    assert merge_key_ranges((r.key_start, r.key_end) for r in records) == [(0.0, 1.0)]


def test_initial_five_ranges_match_pravega_chunks():
    assert [(r.key_start, r.key_end) for r in five()] == [
        (0.0, CHUNK),
        (CHUNK, 2 * CHUNK),
        (2 * CHUNK, 3 * CHUNK),
        (3 * CHUNK, 4 * CHUNK),
        (4 * CHUNK, 1.0),
    ]


# --- Pravega's scaleHelperMethodTest, case by case ------------------------------------------------


def test_can_scale_for_current_epoch_only():
    with pytest.raises(ScalePreconditionError) as info:
        plan5([0, 1, 5], [(0.0, 2 * CHUNK)])
    assert "segments [5] are not in the current epoch 0" in str(info.value)
    assert "[0, 1, 2, 3, 4]" in str(info.value)
    plan5([0, 1, 4], [(0.0, 2 * CHUNK), (4 * CHUNK, 1.0)])  # 0,1 merge; 4 stays alone


def test_case1_empty_new_ranges():
    with pytest.raises(InvalidScaleError, match="new_key_ranges is empty"):
        plan5([0, 1], [])


def test_case2_simple_mismatch():
    with pytest.raises(InvalidScaleError) as info:
        plan5([0, 1], [(0.0, CHUNK)])
    message = str(info.value)
    assert f"cover [(0.0, {2 * CHUNK})]" in message
    assert f"new ranges cover [(0.0, {CHUNK})]" in message


def test_case3_simple_valid_merge():
    t = plan5([0, 1], [(0.0, 2 * CHUNK)])
    assert (t.active_epoch, t.new_epoch) == (0, 1)
    assert t.sealed_segments == (0, 1)
    assert t.new_segment_ids == (segment_id(5, 1),)
    assert ranges_of(t) == [(0.0, 2 * CHUNK)]


def test_case4_two_disjoint_merges():
    t = plan5([0, 1, 3, 4], [(0.0, 2 * CHUNK), (3 * CHUNK, 1.0)])
    assert t.new_segment_ids == (segment_id(5, 1), segment_id(6, 1))


def test_case5_one_merge_and_one_disjoint_replacement():
    t = plan5([1, 3, 4], [(CHUNK, 2 * CHUNK), (3 * CHUNK, 1.0)])
    assert ranges_of(t) == [(CHUNK, 2 * CHUNK), (3 * CHUNK, 1.0)]


SPLITS = [(0.0, 2 * CHUNK), (3 * CHUNK, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0)]


def test_case6_one_merge_two_splits():
    t = plan5([0, 1, 3, 4], SPLITS)
    assert len(t.new_segments) == 5
    assert [s.segment_number for s in t.new_segments] == [5, 6, 7, 8, 9]


def test_case7_one_invalid_split():
    with pytest.raises(InvalidScaleError, match="must exactly cover"):
        plan5([0, 1, 3, 4], SPLITS[:-1] + [(0.9, 0.99)])


def test_case8_unsorted_segments_to_seal():
    t = plan5([4, 0, 1, 3], SPLITS)
    assert t.sealed_segments == (0, 1, 3, 4)


def test_case9_unsorted_new_ranges_numbered_in_given_order():
    given = [SPLITS[4], SPLITS[1], SPLITS[2], SPLITS[0], SPLITS[3]]
    t = plan5([4, 0, 1, 3], given)
    assert ranges_of(t) == given
    assert [s.segment_number for s in t.new_segments] == [5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    "ranges",
    [
        [(0.0, 0.2), (0.2, 0.2), (0.2, 0.4)],  # case 10: low == high
        [(0.0, 0.2), (0.3, 0.2), (0.2, 0.4)],  # case 11: low > high
    ],
)
def test_case10_11_low_not_below_high(ranges):
    with pytest.raises(InvalidScaleError, match="need 0.0 <= low < high <= 1.0"):
        plan5([0, 1], ranges)


@pytest.mark.parametrize(
    "sealed, ranges",
    [
        ([1, 2], [(0.2, 0.4), (0.3, 3 * CHUNK)]),  # case 12: plain overlap
        ([1], [(0.2, 0.4), (0.3, 0.33)]),  # case 13: a contains b
        ([1], [(0.2, 0.33), (0.2, 0.4)]),  # case 14: b contains a, same low
        ([1], [(0.2, 0.35), (0.3, 0.4)]),  # case 15: b.low < a.high
    ],
)
def test_case12_to_15_overlapping_new_ranges(sealed, ranges):
    with pytest.raises(InvalidScaleError, match="overlap"):
        plan5(sealed, ranges)


def test_case16_gap_between_new_ranges():
    with pytest.raises(InvalidScaleError) as info:
        plan5([1], [(0.2, 0.25), (0.3, 0.4)])
    assert "new ranges cover [(0.2, 0.25), (0.3, 0.4)]" in str(info.value)


# --- further validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ranges, fragment",
    [
        ([(-0.1, 0.2)], "need 0.0 <= low < high <= 1.0"),
        ([(0.8, 1.1)], "need 0.0 <= low < high <= 1.0"),
        ([(float("nan"), 0.2)], "need 0.0 <= low < high <= 1.0"),
        ([(0.0,)], "must be a (low, high) pair"),
        ([0.5], "must be a (low, high) pair"),
        ([(0.0, "0.2")], "bounds must be numbers, got str '0.2'"),
        ([(False, 0.2)], "bounds must be numbers, got bool False"),
        ("0.0-0.2", "must be an iterable of (low, high)"),
    ],
)
def test_malformed_ranges(ranges, fragment):
    with pytest.raises(InvalidScaleError) as info:
        plan5([0], ranges)
    assert fragment in str(info.value)


def test_empty_sealed_segments():
    with pytest.raises(InvalidScaleError, match="sealed_segments is empty"):
        plan5([], [(0.0, 0.2)])


@pytest.mark.parametrize("sealed", [["0"], [True], [1.0], 3])
def test_malformed_sealed_ids(sealed):
    with pytest.raises(InvalidScaleError, match="sealed_segments must"):
        plan5(sealed, [(0.0, 0.2)])


def test_duplicate_sealed_ids_collapse():
    t = plan5([1, 1, 0, 1], [(0.0, 2 * CHUNK)])
    assert t.sealed_segments == (0, 1)


def test_int_bounds_accepted_as_floats():
    t = plan_scale(initial_segments(1, T0), [0], [(0, 0.5), (0.5, 1)], 1, T1)
    assert ranges_of(t) == [(0.0, 0.5), (0.5, 1.0)]
    assert all(isinstance(b, float) for r in ranges_of(t) for b in r)


def test_min_num_segments():
    plan5([0, 1], [(0.0, 2 * CHUNK)], min_num_segments=4)
    with pytest.raises(ScalePreconditionError) as info:
        plan5([0, 1], [(0.0, 2 * CHUNK)], min_num_segments=5)
    message = str(info.value)
    assert "leave 4 segments (5 - 2 sealed + 1 new)" in message
    assert "min_num_segments=5" in message
    full = [(0.0, 1.0)]
    with pytest.raises(ScalePreconditionError, match="leave 1 segments"):
        plan5([0, 1, 2, 3, 4], full, min_num_segments=2)
    assert plan5([0, 1, 2, 3, 4], full).new_segment_ids == (segment_id(5, 1),)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_min_num_segments_type(bad):
    with pytest.raises(InvalidConfigError, match="min_num_segments must be"):
        plan5([0], [(0.0, CHUNK)], min_num_segments=bad)


def test_check_order_follows_pravega():
    # membership (precondition) before range validation
    with pytest.raises(ScalePreconditionError):
        plan5([9], [(0.3, 0.2)])
    # range validation before the min-segments check
    with pytest.raises(InvalidScaleError):
        plan5([0, 1], [(0.0, CHUNK)], min_num_segments=10)


def test_errors_are_pravega_spark_errors():
    with pytest.raises(PravegaSparkError):
        plan5([9], [(0.0, 0.2)])
    with pytest.raises(ValueError):
        plan5([0], [(0.0, 0.1)])


# --- numbering, epochs, times ---------------------------------------------------------------------


def test_numbering_follows_given_order():
    history = initial_segments(3, T0)
    one = history[1]
    t = plan_scale(history, [1], [(0.5, one.key_end), (one.key_start, 0.5)], 1, T1)
    assert t.new_segments[0].segment_id == segment_id(3, 1)
    assert (t.new_segments[0].key_start, t.new_segments[0].key_end) == (0.5, one.key_end)
    assert t.new_segments[1].segment_id == segment_id(4, 1)
    assert (t.new_segments[1].key_start, t.new_segments[1].key_end) == (one.key_start, 0.5)


def test_split_into_two_and_three():
    history = initial_segments(1, T0)
    two = plan_scale(history, [0], split_ranges(0.0, 1.0, 2), 1, T1)
    assert ranges_of(two) == [(0.0, 0.5), (0.5, 1.0)]
    assert two.new_segment_ids == (segment_id(1, 1), segment_id(2, 1))
    three = plan_scale(history, [0], split_ranges(0.0, 1.0, 3), 3, T1)
    assert len(three.new_segments) == 3
    assert three.new_segments[-1].key_end == 1.0


def test_new_segments_carry_epoch_time():
    t = plan5([0], [(0.0, 0.1), (0.1, CHUNK)])
    assert t.scale_time == T1
    assert all(s.creation_time == T1 for s in t.new_segments)
    assert all(s.sealed_epoch is None and s.sealed_size is None for s in t.new_segments)


def test_epoch_time_is_after_previous_epoch():
    # explicit previous time later than the scale time: new epoch is 1 µs after it
    t = plan_scale(initial_segments(1), [0], [(0.0, 1.0)], 1, T0, previous_epoch_time=T1)
    assert t.scale_time == T1 + timedelta(microseconds=1)
    assert t.new_segments[0].creation_time == t.scale_time
    # an earlier previous time leaves the scale time alone
    t = plan_scale(initial_segments(1), [0], [(0.0, 1.0)], 1, T1, previous_epoch_time=T0)
    assert t.scale_time == T1
    # without an explicit value, the current epoch's creation time is used
    t = plan_scale(initial_segments(1, T1), [0], [(0.0, 1.0)], 1, T1)
    assert t.scale_time == T1 + timedelta(microseconds=1)
    # and nothing is assumed when the history has no times
    t = plan_scale(initial_segments(1), [0], [(0.0, 1.0)], 1, T0)
    assert t.scale_time == T0


def test_naive_times_are_utc():
    naive = datetime(2024, 1, 2)
    t = plan_scale(initial_segments(1), [0], [(0.0, 1.0)], 1, naive)
    assert t.scale_time == T1
    assert t.scale_time.tzinfo == timezone.utc
    plus_two = timezone(timedelta(hours=2))
    t = plan_scale(
        initial_segments(1), [0], [(0.0, 1.0)], 1, datetime(2024, 1, 2, 2, tzinfo=plus_two)
    )
    assert t.scale_time == T1
    assert t.scale_time.utcoffset() == timedelta(0)
    with pytest.raises(InvalidScaleError, match="scale_time must be a datetime"):
        plan_scale(initial_segments(1), [0], [(0.0, 1.0)], 1, "2024-01-01")


# --- apply_transition and lineage ------------------------------------------------------------------


def classic_history() -> tuple[list[SegmentRecord], int, int, int]:
    """Epoch 0: 0,1,2 in thirds; epoch 1: split 1 in halves (3.#1, 4.#1); epoch 2: merge 0 + 3.#1."""
    history = initial_segments(3, T0)
    one = history[1]
    split = plan_scale(history, [1], split_ranges(one.key_start, one.key_end, 2), 1, T1)
    history = apply_transition(history, split, {1: 100})
    s3, s4 = split.new_segment_ids
    zero, first_half = history[0], split.new_segments[0]
    merge = plan_scale(history, [0, s3], [(zero.key_start, first_half.key_end)], 1, T1)
    history = apply_transition(history, merge, {0: 200, s3: 300})
    (s5,) = merge.new_segment_ids
    return history, s3, s4, s5


def test_classic_history_epochs():
    history, s3, s4, s5 = classic_history()
    assert (s3, s4, s5) == (segment_id(3, 1), segment_id(4, 1), segment_id(5, 2))
    assert current_epoch(history) == 2
    assert [r.segment_id for r in epoch_members(history, 0)] == [0, 1, 2]
    assert [r.segment_id for r in epoch_members(history, 1)] == [0, s3, s4, 2]
    assert [r.segment_id for r in epoch_members(history, 2)] == [s5, s4, 2]
    by_id = {r.segment_id: r for r in history}
    assert (by_id[1].sealed_epoch, by_id[1].sealed_size) == (1, 100)
    assert (by_id[0].sealed_epoch, by_id[0].sealed_size) == (2, 200)
    assert (by_id[s3].sealed_epoch, by_id[s3].sealed_size) == (2, 300)
    assert by_id[s4].sealed_epoch is None and by_id[2].sealed_epoch is None
    assert by_id[s3].creation_time == T1
    assert by_id[s5].creation_time == T1 + timedelta(microseconds=1)
    assert (by_id[s5].key_start, by_id[s5].key_end) == (0.0, 0.5)


def test_classic_history_successors_and_predecessors():
    history, s3, s4, s5 = classic_history()
    assert successors_with_predecessors(history, 0) == {s5: [0, s3]}
    assert successors_with_predecessors(history, 1) == {s3: [1], s4: [1]}
    assert successors_with_predecessors(history, s3) == {s5: [0, s3]}
    assert successors_with_predecessors(history, 2) == {}
    assert successors_with_predecessors(history, s4) == {}
    assert predecessors(history, s3) == [1]
    assert predecessors(history, s4) == [1]
    assert predecessors(history, s5) == [0, s3]
    assert predecessors(history, 0) == []


def test_seal_segment_of_previous_epoch_refused():
    history, s3, s4, s5 = classic_history()
    with pytest.raises(ScalePreconditionError) as info:
        plan_scale(history, [1], [(1 / 3, 2 / 3)], 1, T1)
    message = str(info.value)
    assert "segments [1] are not in the current epoch 2" in message
    assert str(sorted([2, s4, s5])) in message


def test_numbering_from_max_of_current_epoch():
    history, s3, s4, s5 = classic_history()
    whole = [(0.0, 1.0)]
    t = plan_scale(history, [s5, s4, 2], whole, 1, T1)
    assert t.new_segment_ids == (segment_id(6, 3),)


def test_apply_transition_is_pure_and_ordered():
    history = initial_segments(3, T0)
    before = list(history)
    t = plan_scale(history, [2, 0], [(0.0, history[0].key_end), (history[2].key_start, 1.0)], 1, T1)
    after = apply_transition(history, t, {0: 5, 2: 7, 99: 1})
    assert history == before
    assert [r.segment_id for r in after] == [0, 1, 2, *t.new_segment_ids]
    assert after[0] == dataclasses.replace(history[0], sealed_epoch=1, sealed_size=5)
    assert after[1] == history[1]
    assert after[2].sealed_size == 7


def test_apply_transition_twice_is_a_no_op():
    history = initial_segments(2, T0)
    t = plan_scale(history, [0], [(0.0, 0.25), (0.25, 0.5)], 1, T1)
    once = apply_transition(history, t, {0: 10})
    assert apply_transition(once, t, {0: 10}) == once


def test_apply_stale_transition_refused():
    history = initial_segments(2, T0)
    t = plan_scale(history, [0], [(0.0, 0.5)], 1, T1)
    other = plan_scale(history, [1], [(0.5, 1.0)], 1, T1)
    moved = apply_transition(history, other, {1: 3})
    with pytest.raises(ScalePreconditionError, match="partly applied"):
        apply_transition(moved, t, {0: 1})  # same new segment id already exists
    t2 = plan_scale(moved, [0], [(0.0, 0.5)], 1, T1)
    with pytest.raises(
        ScalePreconditionError, match="planned on epoch 1 but the stream is at epoch 0"
    ):
        apply_transition(history, t2, {0: 1})


@pytest.mark.parametrize(
    "sizes, fragment",
    [
        ({}, "no size for sealed segments [0]"),
        ({0: -1}, "must be an int >= 0, got -1"),
        ({0: 1.5}, "must be an int >= 0, got 1.5"),
        ({0: True}, "must be an int >= 0, got True"),
    ],
)
def test_apply_transition_sizes(sizes, fragment):
    history = initial_segments(2, T0)
    t = plan_scale(history, [0], [(0.0, 0.5)], 1, T1)
    with pytest.raises(InvalidScaleError) as info:
        apply_transition(history, t, sizes)
    assert fragment in str(info.value)


# --- EpochTransition --------------------------------------------------------------------------------


def test_transition_json_round_trip():
    t = plan5([4, 0, 1, 3], SPLITS)
    text = t.to_json()
    data = json.loads(text)
    assert data["scale_time"] == "2024-01-02T00:00:00+00:00"
    restored = EpochTransition.from_json(text)
    assert restored == t
    assert restored.to_json() == text
    assert restored.scale_time.tzinfo is not None


def test_transition_json_round_trip_with_microseconds_and_thirds():
    history = initial_segments(3, T0)
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
    t = plan_scale(history, [1], split_ranges(history[1].key_start, history[1].key_end, 3), 1, when)
    restored = EpochTransition.from_json(t.to_json())
    assert restored == t
    assert [s.key_end for s in restored.new_segments] == [s.key_end for s in t.new_segments]
    assert restored.scale_time.microsecond == 123456


def test_transition_normalises_fields():
    t = EpochTransition(0, 1, [3, 1, 1], [], datetime(2024, 1, 2))
    assert t.sealed_segments == (1, 3)
    assert t.new_segments == ()
    assert t.scale_time == T1 and t.scale_time.tzinfo == timezone.utc
    assert hash(t) == hash(EpochTransition(0, 1, (1, 3), (), T1))


def test_transition_validation():
    with pytest.raises(InvalidScaleError, match="new_epoch must be active_epoch \\+ 1 = 1, got 2"):
        EpochTransition(0, 2, (0,), (), T1)
    with pytest.raises(InvalidScaleError, match="active_epoch must be an int >= 0"):
        EpochTransition(-1, 0, (0,), (), T1)
    with pytest.raises(InvalidScaleError, match="not valid JSON"):
        EpochTransition.from_json("{")
    with pytest.raises(InvalidScaleError, match="not a valid epoch transition record"):
        EpochTransition.from_json("{}")


def test_transition_repr():
    history = initial_segments(2, T0)
    t = plan_scale(history, [1], [(0.5, 0.75), (0.75, 1.0)], 1, T1)
    assert repr(t) == (
        "EpochTransition(epoch 0 -> 1 at 2024-01-02T00:00:00+00:00: seal [1], "
        "create [2.#epoch.1 [0.5, 0.75), 3.#epoch.1 [0.75, 1.0)])"
    )


# --- split_ranges and merge_key_ranges --------------------------------------------------------------


def test_split_ranges_equal_parts_last_exact():
    assert split_ranges(0.0, 1.0, 2) == [(0.0, 0.5), (0.5, 1.0)]
    parts = split_ranges(1 / 3, 2 / 3, 3)
    assert parts[0][0] == 1 / 3 and parts[-1][1] == 2 / 3
    for previous, current in zip(parts, parts[1:], strict=False):
        assert previous[1] == current[0]
    assert split_ranges(0.2, 0.4, 1) == [(0.2, 0.4)]
    seven = split_ranges(0.0, 0.7, 7)
    assert seven[-1][1] == 0.7
    assert merge_key_ranges(seven) == [(0.0, 0.7)]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((0.0, 1.0, 0), "parts must be an int >= 1, got 0"),
        ((0.0, 1.0, True), "parts must be an int >= 1, got True"),
        ((0.5, 0.5, 2), "need 0.0 <= low < high <= 1.0"),
        ((0.0, 1.5, 2), "need 0.0 <= low < high <= 1.0"),
    ],
)
def test_split_ranges_validation(args, fragment):
    with pytest.raises(InvalidScaleError) as info:
        split_ranges(*args)
    assert fragment in str(info.value)


def test_merge_key_ranges_keeps_overlaps_and_gaps_apart():
    assert merge_key_ranges([]) == []
    assert merge_key_ranges([(0.5, 1.0), (0.0, 0.5)]) == [(0.0, 1.0)]
    assert merge_key_ranges([(0.0, 0.4), (0.3, 0.6)]) == [(0.0, 0.4), (0.3, 0.6)]
    assert merge_key_ranges([(0.0, 0.2), (0.3, 0.4), (0.4, 0.5)]) == [(0.0, 0.2), (0.3, 0.5)]


@pytest.mark.parametrize("count, minimum", [(1, 2), (2, 5), (3, 3), (3, 10), (1, 100)])
def test_scale_up_to_reaches_the_minimum_with_a_valid_even_scale(count, minimum):
    """An update raising min_num_segments (Pravega's UpdateStreamTask): the plan brings the open
    segments to exactly the minimum, passes ``plan_scale`` (the new ranges tile the sealed ones
    exactly) and never leaves a part wider than twice the narrowest."""
    segments = initial_segments(count, T0)
    sealed, ranges = scale_up_to(segments, minimum)
    if minimum <= count:
        assert (sealed, ranges) == ([], [])
        return
    transition = plan_scale(segments, sealed, ranges, minimum, T1)
    after = [s for s in apply_transition(segments, transition, {sid: 0 for sid in sealed}) if s.sealed_epoch is None]
    assert len(after) == minimum
    widths = [s.key_end - s.key_start for s in after]
    assert max(widths) <= 2 * min(widths) + 1e-12


def test_scale_up_to_splits_the_widest_segments_first():
    # after a split of segment 0: [0, .25), [.25, .5), [.5, 1): one more segment splits [.5, 1)
    segments = apply_transition(initial_segments(2, T0),
                                plan_scale(initial_segments(2, T0), [0], [(0.0, 0.25), (0.25, 0.5)], 1, T1), {0: 0})
    open_ = [s for s in segments if s.sealed_epoch is None]
    sealed, ranges = scale_up_to(open_, 4)
    assert sealed == [1] and ranges == [(0.5, 0.75), (0.75, 1.0)]
