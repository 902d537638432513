"""Direct unit tests of pure code that the integration tests only reach through Spark: the stream
state machine, the truncation record, read ranges between cuts, epochs at a time, and the
retry/conflict classification (``RetriesExhaustedError`` included). No Spark session."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pravega_spark import _delta
from pravega_spark.errors import (
    IllegalStateError,
    InvalidStreamCutError,
    PravegaSparkError,
    RetriesExhaustedError,
    StreamSealedError,
)
from pravega_spark.store.segment_ranges import SegmentRange, segment_ranges
from pravega_spark.stream.config import StreamConfiguration
from pravega_spark.stream.epochs import epoch_at
from pravega_spark.stream.record import (
    ACTIVE,
    ALLOWED_TRANSITIONS,
    CREATING,
    SCALING,
    SEALED,
    SEALING,
    UPDATING,
    StreamRecord,
)
from pravega_spark.stream.scaling import apply_transition, plan_scale
from pravega_spark.stream.segments import initial_segments, segment_id
from pravega_spark.stream.stream_cut import StreamCut
from pravega_spark.stream.truncation import (
    TruncationRecord,
    compute_truncation_record,
    initial_truncation_record,
)

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
T1 = T0 + timedelta(hours=1)
STATES = sorted(ALLOWED_TRANSITIONS)


def record(state: str) -> StreamRecord:
    return StreamRecord("s", "t", state, StreamConfiguration(), 0, None, None, T0, T0, 7)


# ---- the stream state machine (Pravega's State.isTransitionAllowed) -------------------------------
@pytest.mark.parametrize("source", STATES)
@pytest.mark.parametrize("target", STATES)
def test_every_transition_is_allowed_or_refused_as_pravega_says(source, target):
    allowed = target == source or target in ALLOWED_TRANSITIONS[source]
    if allowed:
        new = record(source).transition(target, T1, current_epoch=3)
        assert (new.state, new.update_time, new.row_version, new.current_epoch) == (target, T1, 8, 3)
        return
    expected = StreamSealedError if source in (SEALING, SEALED) else IllegalStateError
    with pytest.raises(expected) as info:
        record(source).transition(target, T1)
    assert isinstance(info.value, PravegaSparkError)


def test_the_workflow_states_lead_back_to_active_only():
    for state in (SCALING, UPDATING, CREATING):
        assert ALLOWED_TRANSITIONS[state] == {ACTIVE}
    assert ALLOWED_TRANSITIONS[SEALED] == set()


# ---- truncation records -------------------------------------------------------------------------
def split_history():
    """Two segments; segment 0 split into two at T1 (epoch 1)."""
    segments = initial_segments(2, T0)
    transition = plan_scale(segments, [0], [(0.0, 0.25), (0.25, 0.5)], 1, T1)
    return apply_transition(segments, transition, {0: 100})


def test_truncation_record_deletes_whole_segments_and_counts_bytes():
    records = split_history()
    a, b = segment_id(2, 1), segment_id(3, 1)
    first = initial_truncation_record(records, "s/t")
    assert first.stream_cut == StreamCut("s/t", {0: 0, 1: 0}) and first.size_till == 0
    cut = StreamCut("s/t", {a: 10, b: 0, 1: 40})
    done = compute_truncation_record(first, cut, records, {a: 30, b: 0, 1: 80})
    assert done.to_delete == (0,) and done.updating
    assert done.size_till == 100 + 10 + 40  # all of segment 0, then each cut offset
    finished = done.completed()
    assert finished.deleted_segments == (0,) and finished.to_delete == () and not finished.updating
    assert TruncationRecord.from_json(finished.to_json()) == finished
    again = compute_truncation_record(finished, cut, records, {a: 30, b: 0, 1: 80})
    assert again.to_delete == () and again.size_till == finished.size_till  # the same head: nothing more


def test_truncation_record_refuses_a_cut_before_the_head():
    records = split_history()
    a, b = segment_id(2, 1), segment_id(3, 1)
    head = compute_truncation_record(initial_truncation_record(records, "s/t"),
                                     StreamCut("s/t", {a: 10, b: 0, 1: 40}), records, {a: 30, b: 0, 1: 80})
    with pytest.raises(InvalidStreamCutError):
        compute_truncation_record(head, StreamCut("s/t", {0: 50, 1: 40}), records, {a: 30, b: 0, 1: 80})


# ---- read ranges between cuts -------------------------------------------------------------------
def test_segment_ranges_cover_each_segment_between_two_cuts_once():
    records = split_history()
    a, b = segment_id(2, 1), segment_id(3, 1)
    ranges = segment_ranges(StreamCut("s/t", {0: 20, 1: 5}), StreamCut("s/t", {a: 7, b: 3, 1: 60}), records)
    assert sorted(ranges, key=lambda r: r.segment_id) == [
        SegmentRange(0, 20, None), SegmentRange(1, 5, 60), SegmentRange(a, 0, 7), SegmentRange(b, 0, 3)]
    assert segment_ranges(StreamCut("s/t", {a: 7, b: 3, 1: 60}), StreamCut("s/t", {a: 7, b: 3, 1: 60}), records) == []


# ---- epochs -------------------------------------------------------------------------------------
def test_epoch_at_is_the_epoch_in_force_at_a_time():
    records = split_history()
    assert epoch_at(records, T0) == 0
    assert epoch_at(records, T1 - timedelta(microseconds=1)) == 0
    assert epoch_at(records, T1) == 1
    assert epoch_at(records, T1 + timedelta(days=1)) == 1


# ---- retries and conflict classification --------------------------------------------------------
def test_retrying_retries_asked_retries_and_gives_up_with_retries_exhausted():
    calls = []

    def step():
        calls.append(1)
        raise _delta.Retry("stale read")

    with pytest.raises(RetriesExhaustedError) as info:
        _delta.retrying(step, "a step", _delta.RetryPolicy(attempts=4, initial_backoff=0.0, max_backoff=0.0))
    assert len(calls) == 4
    assert "a step: gave up after 4 attempts" in str(info.value) and "stale read" in str(info.value)
    assert isinstance(info.value, PravegaSparkError)


def test_retrying_returns_after_conflicts_and_lets_other_errors_through():
    conflict = next(c for c in _delta.CONFLICTS)
    outcomes = [conflict("a concurrent append"), _delta.Retry("again"), "done"]

    def step():
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    assert _delta.retrying(step, "x", _delta.RetryPolicy(attempts=5, initial_backoff=0.0, max_backoff=0.0)) == "done"
    with pytest.raises(ValueError):
        _delta.retrying(lambda: (_ for _ in ()).throw(ValueError("bad input")), "x")


def test_conflicts_are_recognised_by_class_or_by_the_jvm_error_naming_them():
    for cls in _delta.CONFLICTS:
        assert _delta.is_conflict(cls("x"))
    assert _delta.is_conflict(RuntimeError("py4j: io.delta.exceptions.ConcurrentAppendException: ..."))
    assert _delta.is_conflict(RuntimeError("org.apache.hadoop.fs.FileAlreadyExistsException: 00000.json"))
    assert _delta.is_conflict(RuntimeError("[DELTA_CONCURRENT_WRITE] ..."))
    assert not _delta.is_conflict(RuntimeError("[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] ..."))
    assert not _delta.is_conflict(ValueError("bad input"))


# ---- a stream's segments, kept in its row ----------------------------------------------------------
def test_segments_merged_into_a_row_add_new_ones_and_seal_known_ones_idempotently():
    """``merge_segment_entries``: a scale's records add the new segments and give the sealed ones
    their sealed epoch and size, keeping what else they had; merging them again changes nothing;
    the stored form round-trips to the same records."""
    from pravega_spark.store.store import merge_segment_entries, segment_entries, segment_records_of

    created = initial_segments(2, T0)
    scaled = apply_transition(created, plan_scale(created, [0], [(0.0, 0.25), (0.25, 0.5)], 1, T1), {0: 100})
    touched = [r for r in scaled if r.segment_id != 1]
    stored = merge_segment_entries(segment_entries(created), touched)
    assert segment_records_of(stored) == sorted(scaled, key=lambda r: r.segment_id)
    assert merge_segment_entries(stored, touched) == stored
    assert merge_segment_entries(stored, []) == stored
    assert [e["segment_id"] for e in stored] == sorted(e["segment_id"] for e in stored)
    first = next(e for e in stored if e["segment_id"] == 0)
    assert (first["sealed_epoch"], first["sealed_size"], first["creation_time"]) == (1, 100, T0)
