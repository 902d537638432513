"""Reader group state transitions (Pravega's ReaderGroupStateManagerTest scenarios re-expressed),
pure Python: the rules that the stored group applies one commit at a time."""

from __future__ import annotations

import json
import random

import pytest

from pravega_spark.errors import IllegalStateError
from pravega_spark.readers.reader_group_state import (
    KEPT_CHECKPOINTS,
    MaxNumberOfCheckpointsExceededError,
    ReaderGroupState,
    SegmentRef,
)

S = "iot/sensors"


def seg(sid: int, stream: str = S) -> SegmentRef:
    return SegmentRef(stream, sid)


def test_segment_split_successors_start_at_offset_zero():
    state = ReaderGroupState.initial({seg(0): 0}).add_reader("r1")
    state, got = state.acquire("r1")
    assert got == [seg(0)]
    state = state.record_read("r1", {seg(0): 500})
    split = {(1 << 32) | 1: [0], (1 << 32) | 2: [0]}
    state = state.complete_segment("r1", seg(0), split)
    assert state.unassigned == {seg((1 << 32) | 1): 0, seg((1 << 32) | 2): 0}
    state, got = state.acquire("r1")
    assert got == [seg((1 << 32) | 1), seg((1 << 32) | 2)] and not state.end_of_data


def test_segment_merge_waits_for_every_predecessor():
    state = ReaderGroupState.initial({seg(0): 0, seg(1): 0}).add_reader("r1").add_reader("r2")
    state, _ = state.acquire("r1")
    state, _ = state.acquire("r2")
    assert state.segments_of("r1") == {seg(0): 0} and state.segments_of("r2") == {seg(1): 0}
    merged = (1 << 32) | 2
    state = state.complete_segment("r1", seg(0), {merged: [0, 1]})
    assert seg(merged) not in state.unassigned and state.future == {seg(merged): frozenset({1})}
    assert state.acquire_count("r1") == 0  # nothing readable until segment 1 is done
    state = state.complete_segment("r2", seg(1), {merged: [0, 1]})
    assert state.unassigned == {seg(merged): 0} and state.future == {}
    state, got = state.acquire("r1")
    assert got == [seg(merged)]
    state = state.complete_segment("r1", seg(merged), {})
    assert state.end_of_data


def _read_round(state: ReaderGroupState) -> ReaderGroupState:
    """Every online reader calls read_next once: release if it should, else acquire."""
    for reader in state.online_readers:
        extra = state.segment_to_release(reader)
        if extra is not None:
            state = state.release(reader, extra, state.segments_of(reader)[extra])
        else:
            state, _ = state.acquire(reader)
    return state


def _counts(state: ReaderGroupState) -> list[int]:
    return [len(state.assigned[r]) for r in state.online_readers]


def test_segments_assigned_offline_with_a_position_and_rejoin():
    state = ReaderGroupState.initial({seg(i): 0 for i in range(4)}).add_reader("r1").add_reader("r2")
    assert state.acquire_count("r1") == 2  # max(max(4 // 2, min(4, round(4 / 2) - 0)), 1)
    state = _read_round(state)
    assert _counts(state) == [2, 2] and not state.unassigned
    r1 = state.segments_of("r1")
    state = state.record_read("r1", {ref: 100 for ref in r1})
    state = state.remove_reader("r1", {ref: 40 for ref in r1})  # offline with a position
    assert state.unassigned == {ref: 40 for ref in r1} and state.online_readers == ["r2"]
    state = _read_round(state)
    assert _counts(state) == [4]
    assert {ref: off for ref, off in state.segments_of("r2").items() if ref in r1} == {ref: 40 for ref in r1}
    state = state.add_reader("r1")
    for _ in range(3):  # every reader reads again: releases and acquisitions even the counts
        state = _read_round(state)
    assert sorted(_counts(state)) == [2, 2]


def test_offline_without_a_position_resumes_at_the_last_recorded_offsets():
    state = ReaderGroupState.initial({seg(0): 10, seg(1): 20}).add_reader("r1")
    state, _ = state.acquire("r1")
    state = state.record_read("r1", {seg(0): 110, seg(1): 220})
    assert state.stream_positions() == {seg(0): 110, seg(1): 220}
    offline = state.remove_reader("r1")  # at-least-once: back to the acquisition offsets
    assert offline.unassigned == {seg(0): 10, seg(1): 20}
    state = state.initiate_checkpoint("cp", 3).checkpoint_reader("r1", "cp")
    state = state.record_read("r1", {seg(0): 150})
    assert state.remove_reader("r1").unassigned == {seg(0): 110, seg(1): 220}  # the checkpoint's


def test_checkpoints_wait_for_online_readers_and_respect_the_outstanding_limit():
    state = ReaderGroupState.initial({seg(i): 0 for i in range(3)}).add_reader("r1").add_reader("r2")
    state, _ = state.acquire("r1")
    state = state.record_read("r1", {seg(0): 30, seg(1): 60})
    state = state.initiate_checkpoint("cp-1", 1)
    with pytest.raises(MaxNumberOfCheckpointsExceededError, match="at most 1"):
        state.initiate_checkpoint("cp-2", 1)
    assert state.pending_checkpoint_for("r1") == "cp-1" and state.segment_to_release("r1") is None
    state = state.checkpoint_reader("r1", "cp-1")
    assert state.completed_checkpoint("cp-1") is None  # r2 has not checkpointed yet
    state = state.remove_reader("r2")  # an offline reader counts as checkpointed
    done = state.completed_checkpoint("cp-1")
    assert done is not None and done.positions == {seg(0): 30, seg(1): 60, seg(2): 0}
    state = state.initiate_checkpoint("cp-2", 1).checkpoint_reader("r1", "cp-2")
    assert [c.name for c in state.clear_checkpoints_before("cp-2").checkpoints] == ["cp-2"]
    with pytest.raises(IllegalStateError):
        state.initiate_checkpoint("cp-2", 5)


def test_no_segment_is_ever_owned_twice_under_random_interleavings():
    rng = random.Random(7)
    state = ReaderGroupState.initial({seg(i): 0 for i in range(6)})
    readers = [f"r{i}" for i in range(4)]
    next_id = 6
    for _ in range(2000):
        reader = rng.choice(readers)
        action = rng.random()
        if reader not in state.assigned:
            state = state.add_reader(reader)
        elif action < 0.1:
            state = state.remove_reader(reader, None if rng.random() < 0.5 else {})
        elif action < 0.3 and state.assigned[reader]:
            done = rng.choice(sorted(state.assigned[reader]))
            state = state.complete_segment(reader, done, {next_id: [done.segment_id]})
            next_id += 1
        else:
            extra = state.segment_to_release(reader)
            state = (state.release(reader, extra, 0) if extra is not None else state.acquire(reader)[0])
        owned = [ref for r in state.assigned for ref in state.assigned[r]]
        assert len(owned) == len(set(owned)), "a segment owned by two readers"
        assert not set(owned) & set(state.unassigned) and not set(owned) & set(state.future)
        assert len(owned) + len(state.unassigned) == 6  # a split of one into one keeps the count


def test_automatic_checkpoint_after_the_interval_only_when_none_is_pending():
    state = ReaderGroupState.initial({seg(0): 0}, now_ms=1_000).add_reader("r1", 1_000).add_reader("r2", 1_000)
    assert not state.automatic_checkpoint_due(30_999, 30_000)  # 1 ms before the interval
    assert state.automatic_checkpoint_due(31_000, 30_000)
    assert not state.automatic_checkpoint_due(10**9, None)  # disabled
    state, name = state.initiate_automatic_checkpoint(31_000, max_outstanding=3)
    assert name == "auto-31000" and state.pending_checkpoint_for("r1") == name
    assert not state.automatic_checkpoint_due(10**9, 30_000)  # one is pending
    state = state.checkpoint_reader("r1", name).checkpoint_reader("r2", name)
    assert state.completed_checkpoint(name) is not None
    assert not state.automatic_checkpoint_due(60_999, 30_000) and state.automatic_checkpoint_due(61_000, 30_000)
    state = state.initiate_checkpoint("manual", 3, now_ms=50_000)  # a manual one restarts the interval too
    assert state.last_checkpoint_ms == 50_000
    assert not ReaderGroupState.initial({seg(0): 0}).automatic_checkpoint_due(10**9, 1)  # no reader: none


def test_completed_checkpoints_are_pruned_to_the_latest_ten_and_survive_json():
    state = ReaderGroupState.initial({seg(0): 0}).add_reader("r1")
    for i in range(KEPT_CHECKPOINTS + 5):
        state = state.initiate_checkpoint(f"c{i}", 1).checkpoint_reader("r1", f"c{i}")
    state = state.initiate_checkpoint("pending", 1)
    names = [c.name for c in state.checkpoints]
    assert names == [f"c{i}" for i in range(5, KEPT_CHECKPOINTS + 5)] + ["pending"]
    assert state.completed_checkpoint("c4") is None and state.completed_checkpoint("c14") is not None
    assert ReaderGroupState.from_json(state.to_json()) == state


def test_silent_readers_by_their_last_call():
    state = ReaderGroupState.initial({seg(0): 0, seg(1): 0}).add_reader("r1", 0).add_reader("r2", 0)
    state = state.seen("r2", 5_000)
    assert state.silent_readers(10_000, 10_000) == ["r1"]  # r2 was seen 5 s ago
    assert state.silent_readers(9_999, 10_000) == []
    assert "r1" not in state.remove_reader("r1").last_seen
    legacy = json.loads(state.to_json())
    del legacy["last_seen"], legacy["last_checkpoint_ms"]  # a state stored before these fields
    assert ReaderGroupState.from_json(json.dumps(legacy)).last_checkpoint_ms == 0


def test_silent_readers_count_joins_commits_and_member_refreshes():
    state = ReaderGroupState.initial({}).add_reader("a", 0, "i-a").add_reader("b", 5_000, "i-b")
    assert dict(state.incarnations) == {"a": "i-a", "b": "i-b"}
    assert state.silent_readers(20_000, 20_000) == ["a"]
    assert state.silent_readers(20_000, 15_000, {"a": 10_000}) == ["b"]  # a refreshed its member row at 10 s
    assert state.remove_reader("a").incarnations == {"b": "i-b"}
