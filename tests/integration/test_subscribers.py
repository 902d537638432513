"""The subscribers' lower bound (Spark) against a re-statement of Pravega's sequential
``computeSubscribersLowerBound``, on hand-made and on randomly generated valid cuts."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from pravega_spark.controller.subscribers import lower_bound_cut, subscribers_lower_bound
from pravega_spark.errors import InvalidStreamCutError
from pravega_spark.store.schema import SEGMENTS_SCHEMA
from pravega_spark.stream.cut_algorithms import validate_stream_cut
from pravega_spark.stream.scaling import apply_transition, plan_scale
from pravega_spark.stream.segments import (
    epoch_members,
    initial_segments,
    predecessors,
    successors_with_predecessors,
)
from pravega_spark.stream.stream_cut import StreamCut

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SIZE = 1000  # every sealed segment's size


def _covers(intervals, start, end) -> bool:
    reach = start
    for lo, hi in sorted(intervals):
        if lo > reach:
            break
        reach = max(reach, hi)
    return reach >= end


def pravega_lower_bound(cuts: list[dict[int, int]], records) -> dict[int, int]:
    """Pravega's algorithm, re-stated from PRAVEGA_SEMANTICS.md section 6 (subscriber by subscriber,
    entry by entry)."""
    by_id = {r.segment_id: r for r in records}
    bound: dict[int, int] = {}

    def overlapping(seg):
        return [s for s in bound if s != seg and by_id[s].overlaps(by_id[seg])]

    def covered_by_predecessors(seg):
        preds = [s for s in overlapping(seg) if s < seg]
        return _covers([(by_id[p].key_start, by_id[p].key_end) for p in preds], by_id[seg].key_start, by_id[seg].key_end)

    for cut in cuts:
        for seg, off in cut.items():
            if seg in bound:
                bound[seg] = min(bound[seg], off)
                continue
            others = overlapping(seg)
            preds, succs = [s for s in others if s < seg], [s for s in others if s > seg]
            if not others:
                bound[seg] = off
            elif off < 0:
                if not covered_by_predecessors(seg):
                    bound[seg] = off
            elif not preds:
                bound[seg] = off
                for s in succs:
                    if bound[s] >= 0:
                        del bound[s]
                for s in succs:
                    if s in bound and bound[s] < 0 and covered_by_predecessors(s):
                        del bound[s]
    return bound


def _history(rng: random.Random, scales: int):
    records = initial_segments(rng.randint(1, 4), T0)
    for e in range(scales):
        current = sorted(epoch_members(records, e), key=lambda r: r.key_start)
        if rng.random() < 0.6 or len(current) == 1:  # split one segment in 2 or 3
            s = rng.choice(current)
            parts = rng.choice([2, 3])
            step = (s.key_end - s.key_start) / parts
            bounds = [s.key_start + i * step for i in range(parts)] + [s.key_end]
            plan = plan_scale(records, [s.segment_id], list(zip(bounds, bounds[1:], strict=False)), 1, T0 + timedelta(minutes=e + 1))
            sealed = [s]
        else:  # merge two neighbours
            i = rng.randrange(len(current) - 1)
            sealed = current[i:i + 2]
            plan = plan_scale(records, [r.segment_id for r in sealed], [(sealed[0].key_start, sealed[1].key_end)], 1,
                              T0 + timedelta(minutes=e + 1))
        records = apply_transition(records, plan, {r.segment_id: SIZE for r in sealed})
    return records


def _reader_cut(rng: random.Random, records) -> dict[int, int] | None:
    """A reader's position: start at some epoch's members, then complete a few segments, which
    makes their successors readable (all predecessors done) or future (-1)."""
    epochs = sorted({r.creation_epoch for r in records})
    cut = {r.segment_id: rng.randrange(0, SIZE + 1) for r in epoch_members(records, rng.choice(epochs))}
    for _ in range(rng.randint(0, 4)):
        done = [s for s, o in cut.items() if o >= 0 and successors_with_predecessors(records, s)]
        if not done:
            break
        s = rng.choice(done)
        del cut[s]
        for succ, preds in successors_with_predecessors(records, s).items():
            if all(p not in cut for p in preds):
                cut[succ] = rng.randrange(0, SIZE + 1)
            else:
                cut.setdefault(succ, -1)
    lengths = {r.segment_id: SIZE for r in records if r.sealed_epoch is None}
    try:
        validate_stream_cut(StreamCut("t/s", cut), records, lengths)
    except InvalidStreamCutError:
        return None
    return cut


def _segments_df(spark, records):
    return spark.createDataFrame([(r.segment_id, r.segment_number, r.creation_epoch, r.key_start, r.key_end,
                                   r.creation_time, r.sealed_epoch, r.sealed_size) for r in records], SEGMENTS_SCHEMA)


def _cuts_df(spark, cuts: list[dict[int, int]], scenario: int = 0):
    rows = [(scenario, f"sub-{i}", s, o) for i, cut in enumerate(cuts) for s, o in cut.items()]
    return spark.createDataFrame(rows, "scenario int, subscriber string, segment_id long, offset long")


def _spark_bound(spark, cuts, records) -> dict[int, int]:
    bound = lower_bound_cut(_cuts_df(spark, cuts).drop("scenario"), segments=_segments_df(spark, records), stream="t/s")
    return dict(bound.positions) if bound else {}


def test_one_epoch_is_a_per_segment_min(spark):
    records = initial_segments(3, T0)
    cuts = [{0: 10, 1: 50, 2: 7}, {0: 30, 1: 5, 2: 7}]
    assert _spark_bound(spark, cuts, records) == {0: 10, 1: 5, 2: 7} == pravega_lower_bound(cuts, records)
    assert _spark_bound(spark, cuts[:1], records) == cuts[0]  # one subscriber: its own cut
    assert _spark_bound(spark, [], records) == {}


def test_older_segment_bounds_its_successors_after_split_and_merge(spark):
    records = initial_segments(2, T0)
    plan = plan_scale(records, [0], [(0.0, 0.25), (0.25, 0.5)], 1, T0 + timedelta(minutes=1))
    records = apply_transition(records, plan, {0: SIZE})
    s10, s11 = plan.new_segments[0].segment_id, plan.new_segments[1].segment_id
    plan = plan_scale(records, [s10, s11], [(0.0, 0.5)], 1, T0 + timedelta(minutes=2))
    records = apply_transition(records, plan, {s10: SIZE, s11: SIZE})
    s20 = plan.new_segments[0].segment_id
    # a is still in segment 0 (epoch 0), b is in the merged segment (epoch 2): 0 bounds both halves
    cuts = [{0: 40, 1: 900}, {s20: 5, 1: 100}]
    assert _spark_bound(spark, cuts, records) == {0: 40, 1: 100} == pravega_lower_bound(cuts, records)
    # a finished s10 but not s11: s20 is a future segment for it, and s11 bounds b's s20 on [0.25, 0.5)
    cuts = [{s11: 30, s20: -1, 1: 500}, {s20: 5, 1: 100}]
    expected = {s11: 30, s20: -1, 1: 100}
    assert _spark_bound(spark, cuts, records) == expected == pravega_lower_bound(cuts, records)
    # a future entry whose older entries cover it is dropped
    cuts = [{s10: 3, s11: 30, 1: 500}, {s11: 40, s20: -1, 1: 100}]
    expected = {s10: 3, s11: 30, 1: 100}
    assert _spark_bound(spark, cuts, records) == expected == pravega_lower_bound(cuts, records)
    assert predecessors(records, s20) == [s10, s11]


def test_transformation_is_usable_with_transform(spark):
    records = initial_segments(2, T0)
    df = _cuts_df(spark, [{0: 1, 1: 2}, {0: 3, 1: 0}]).drop("scenario")
    out = df.transform(subscribers_lower_bound, segments=_segments_df(spark, records))
    assert out.columns == ["segment_id", "offset"]
    assert sorted(tuple(r) for r in out.collect()) == [(0, 1), (1, 0)]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_random_valid_cuts_match_pravega(spark, seed):
    """Random histories and reader positions: Spark's bound equals Pravega's, whatever the
    subscribers' order, and is itself a valid cut."""
    rng = random.Random(seed)
    scenarios = []
    while len(scenarios) < 10:
        records = _history(rng, rng.randint(1, 5))
        cuts = [c for c in (_reader_cut(rng, records) for _ in range(rng.randint(2, 5))) if c is not None]
        if cuts:
            scenarios.append((records, cuts))
    for records, cuts in scenarios:
        expected = pravega_lower_bound(cuts, records)
        for _ in range(3):  # Pravega's result does not depend on the subscribers' order here
            assert pravega_lower_bound(rng.sample(cuts, len(cuts)), records) == expected
        got = _spark_bound(spark, cuts, records)
        assert got == expected, (cuts, records)
        lengths = {r.segment_id: SIZE for r in records if r.sealed_epoch is None}
        validate_stream_cut(StreamCut("t/s", got), records, lengths)
