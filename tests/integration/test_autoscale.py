"""Auto-scaling rules (``autoscale.py``) with an injected clock: Pravega's scenarios from
``SegmentAggregatesTest``, ``AutoScaleProcessorTest`` and the controller's ``AutoScaleTask``,
re-expressed, each rule just below and just above its threshold."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime, timedelta

import pytest

import pravega_spark as ps
from pravega_spark.services import autoscale_rules as autoscale
from pravega_spark.services.autoscale_rules import Rates, SegmentMarks, decide, segment_rates
from pravega_spark.stream.segments import SegmentRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EVENTS = ps.ScalingPolicy.by_event_rate(10, 2, 1)
ZERO = timedelta(0)


def _segments(n: int, created: datetime = T0) -> list[SegmentRecord]:
    return [SegmentRecord(i, i / n, (i + 1) / n if i < n - 1 else 1.0, created) for i in range(n)]


def _decide(rates, *, age, policy=EVENTS, n=1, marks=None, cooldown=ZERO, mute=ZERO):
    return decide(_segments(n), rates, policy, marks or {}, T0 + age, cooldown=cooldown, mute=mute)


# ---- rates -----------------------------------------------------------------------------------
def _traffic(spark, per_tick: dict[int, list[int]], now: datetime, amount: str = "events"):
    """Rows ``segment_id, time, events, bytes``: for each segment, counts per 5-s tick, oldest
    first, the last tick ending at ``now``."""
    rows = []
    for sid, counts in per_tick.items():
        for i, c in enumerate(counts):
            if c:
                at = now - timedelta(seconds=5 * (len(counts) - 1 - i) + 2.5)
                rows.append((sid, at, c if amount == "events" else 0, c if amount == "bytes" else 0))
    return spark.createDataFrame(rows, "segment_id long, time timestamp, events long, bytes long")


@pytest.mark.slow
def test_rates_follow_pravegas_recurrence_tick_by_tick(spark):
    rng = random.Random(7)
    now = T0 + timedelta(hours=1)
    counts = {1: [rng.choice([0, 0, 3, 50]) for _ in range(240)],  # 20 minutes of ticks
              2: [0] * 200 + [7] + [0] * 39,  # one burst, then silence
              3: [0] * 239 + [1]}  # only the newest tick
    got = {r.segment_id: r for r in segment_rates(_traffic(spark, counts, now), now=now,
                                                  scale_type=ps.ScaleType.BY_RATE_IN_EVENTS_PER_SEC).collect()}
    for sid, c in counts.items():
        want = autoscale.decayed_rates(c)
        assert [getattr(got[sid], n) for n in autoscale.RATE_COLUMNS] == pytest.approx(want, rel=1e-9), sid
    # older than 20 minutes or later than now: ignored
    late = _traffic(spark, {4: [5]}, now + timedelta(seconds=10))
    old = _traffic(spark, {5: [5] + [0] * 240}, now)
    assert segment_rates(late.unionByName(old), now=now, scale_type=ps.ScaleType.BY_RATE_IN_EVENTS_PER_SEC).count() == 0


@pytest.mark.slow
def test_steady_silent_and_byte_rates_as_pravegas_segment_aggregates(spark):
    now = T0 + timedelta(hours=1)
    events = ps.ScaleType.BY_RATE_IN_EVENTS_PER_SEC
    [steady] = segment_rates(_traffic(spark, {1: [25] * 240}, now), now=now, scale_type=events).collect()
    assert all(4.5 < getattr(steady, n) < 5.5 for n in autoscale.RATE_COLUMNS)  # 5 events/s for 20 min
    [kib] = segment_rates(_traffic(spark, {1: [6250] * 240}, now, "bytes"), now=now,
                          scale_type=ps.ScaleType.BY_RATE_IN_KBYTES_PER_SEC).collect()
    assert all(1.0 < getattr(kib, n) < 1.5 for n in autoscale.RATE_COLUMNS)  # 1,250 B/s in KiB/s
    # 5 events/s for a minute, 10 silent minutes, a burst of 100: the 2-minute rate is below 1
    burst = [25] * 12 + [0] * 120 + [100]
    [after] = segment_rates(_traffic(spark, {1: burst}, now), now=now, scale_type=events).collect()
    assert after.r2 < 1.0
    # two minutes of 5 events/s bring it back to about 5
    [back] = segment_rates(_traffic(spark, {1: burst + [25] * 24}, now), now=now, scale_type=events).collect()
    assert back.r2 == pytest.approx(5.0, abs=2.0)


# ---- scale up --------------------------------------------------------------------------------
@pytest.mark.parametrize(("rates", "age"), [
    (Rates(r2=50.0), timedelta(minutes=2, seconds=1)),  # r2 > 5 x target after 2 minutes
    (Rates(r5=20.0), timedelta(minutes=5, seconds=1)),  # r5 > 2 x target after 5 minutes
    (Rates(r10=10.0), timedelta(minutes=10, seconds=1)),  # r10 > target after 10 minutes
])
def test_each_scale_up_rule_at_its_threshold(rates, age):
    above = Rates(**{k: v + 0.01 if v else 0.0 for k, v in vars(rates).items()})
    assert _decide({0: rates}, age=age).requests == ()  # at the threshold: not above it
    assert _decide({0: above}, age=age - timedelta(seconds=2)).requests == ()  # too young for that window
    [request] = _decide({0: above}, age=age).requests
    assert request.direction == "up" and request.sealed == (0,) and request.new_ranges == ((0.0, 0.5), (0.5, 1.0))


def test_split_count_formula_and_equal_parts_ending_at_the_key_end():
    policy = ps.ScalingPolicy.by_event_rate(10, 5, 1)
    assert autoscale.split_count(Rates(r2=35.0), policy) == 3  # int(35 / 10)
    assert autoscale.split_count(Rates(r10=10.1), policy) == 2  # at least 2 (Pravega's stream4)
    assert autoscale.split_count(Rates(r5=100.0, r2=1001.0), policy) == 5  # at most max(2, scale factor)
    assert autoscale.split_count(Rates(r2=1001.0), ps.ScalingPolicy.by_event_rate(10, 1, 1)) == 2
    [request] = decide([SegmentRecord(7, 0.1, 0.7, T0)], {7: Rates(r2=1001.0, r5=500.0, r10=200.0, r20=200.0)},
                       ps.ScalingPolicy.by_event_rate(10, 3, 1), {}, T0 + timedelta(minutes=20)).requests
    ranges = request.new_ranges
    assert len(ranges) == 3 and ranges[0][0] == 0.1 and ranges[-1][1] == 0.7
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert ranges[0][1] - ranges[0][0] == pytest.approx(0.2)


# ---- scale down ------------------------------------------------------------------------------
def test_scale_down_rule_at_its_threshold_marks_cold_and_merges_cold_neighbours_only():
    low = Rates(9.99, 9.99, 9.99, 4.99)
    age = timedelta(minutes=20, seconds=1)
    d = _decide({0: low, 1: low}, age=age, n=2)
    assert [r.sealed for r in d.requests] == [(0, 1)] and d.requests[0].new_ranges == ((0.0, 1.0),)
    assert d.marks[0].cold_until == T0 + age + autoscale.COLD_VALIDITY
    for not_low in (Rates(9.99, 9.99, 9.99, 5.0), Rates(10.0, 9.99, 9.99, 4.99), Rates(9.99, 10.0, 9.99, 4.99),
                    Rates(9.99, 9.99, 10.0, 4.99)):  # each rate at its threshold
        assert _decide({0: not_low, 1: not_low}, age=age, n=2).requests == ()
    assert _decide({0: low, 1: low}, age=timedelta(minutes=20), n=2).requests == ()  # not older than 20 minutes
    # segments 0 and 2 cold, 1 busy: no merge (not neighbours); then 1 cools and merges with both
    hot = Rates(20.0, 20.0, 9.0, 9.0)
    d = _decide({0: low, 1: hot, 2: low}, age=age, n=3)
    assert d.requests == () and {s for s, m in d.marks.items() if m.cold_until} == {0, 2}
    d = _decide({0: low, 1: low, 2: low}, age=age + timedelta(minutes=1), n=3, marks=d.marks)
    assert [r.sealed for r in d.requests] == [(0, 1, 2)]  # 1 cools: it and both cold neighbours merge
    d = decide(_segments(3), {0: hot, 1: low, 2: hot}, EVENTS, {0: SegmentMarks(cold_until=T0 + timedelta(hours=1)),
                                                  2: SegmentMarks(cold_until=T0 + timedelta(hours=1))},
               T0 + age, cooldown=ZERO, mute=ZERO)
    assert [r.sealed for r in d.requests] == [(0, 1, 2)] and d.requests[0].new_ranges == ((0.0, 1.0),)
    # a cold mark expires after COLD_VALIDITY
    expired = {0: SegmentMarks(cold_until=T0 + age - timedelta(seconds=1))}
    assert decide(_segments(2), {0: hot, 1: low}, EVENTS, expired, T0 + age, cooldown=ZERO, mute=ZERO).requests == ()


def test_never_below_min_num_segments():
    low = Rates()
    age = timedelta(minutes=30)
    two = ps.ScalingPolicy.by_event_rate(10, 2, 2)
    assert _decide({}, age=age, n=2, policy=two).requests == ()  # at the minimum: marked cold only
    # three cold neighbours but only one segment may go: the first two (by key) merge
    warm = Rates(20.0, 20.0, 9.0, 9.0)  # neither hot nor cold
    [request] = decide(_segments(3), {0: warm, 1: low, 2: warm}, two, {0: SegmentMarks(cold_until=T0 + age * 2),
                                                                      2: SegmentMarks(cold_until=T0 + age * 2)},
                       T0 + age, cooldown=ZERO, mute=ZERO).requests
    assert request.sealed == (0, 1)
    d = _decide({0: low, 1: low, 2: low, 3: low}, age=age, n=4, policy=two)
    assert [r.sealed for r in d.requests] == [(0, 1), (2, 3)]  # 4 -> 2 segments, never below 2
    three = ps.ScalingPolicy.by_event_rate(10, 2, 3)
    assert [r.sealed for r in _decide({}, age=age, n=4, policy=three).requests] == [(0, 1)]  # 4 -> 3


# ---- mute, cooldown, fixed -------------------------------------------------------------------
def test_cooldown_and_mute():
    hot = {0: Rates(r2=100.0, r5=100.0, r10=100.0, r20=100.0)}
    cooldown = autoscale.COOLDOWN
    assert decide(_segments(1), hot, EVENTS, {}, T0 + cooldown).requests == ()  # age must pass the cooldown
    [up] = decide(_segments(1), hot, EVENTS, {}, T0 + cooldown + timedelta(seconds=1)).requests
    assert up.direction == "up"
    # a new segment starts muted (for the mute after its creation) even with no cooldown
    assert decide(_segments(1), hot, EVENTS, {}, T0 + timedelta(seconds=599), cooldown=ZERO).requests == ()
    # after a scale-up request, both directions are muted
    d = _decide(hot, age=timedelta(minutes=30), mute=autoscale.MUTE)
    assert d.requests and d.marks[0].last_up == d.marks[0].last_down == T0 + timedelta(minutes=30)
    for later, direction in ((timedelta(minutes=39, seconds=59), None), (timedelta(minutes=40, seconds=1), "up")):
        again = decide(_segments(1), hot, EVENTS, d.marks, T0 + later, cooldown=ZERO, mute=autoscale.MUTE)
        assert [r.direction for r in again.requests] == ([direction] if direction else [])
    low = {0: Rates(), 1: Rates()}
    muted_down = {0: SegmentMarks(last_up=T0, last_down=T0 + timedelta(minutes=25)),
                  1: SegmentMarks(last_up=T0, last_down=T0 + timedelta(minutes=25))}
    assert decide(_segments(2), low, EVENTS, muted_down, T0 + timedelta(minutes=30), mute=autoscale.MUTE).requests == ()
    # a scale-down mutes only scale-downs: an up follows at once
    [up] = decide(_segments(1), hot, EVENTS, {0: muted_down[0]}, T0 + timedelta(minutes=30), mute=autoscale.MUTE).requests
    assert up.direction == "up"


def test_a_fixed_policy_is_never_scaled():
    hot = {0: Rates(r2=1e9, r5=1e9, r10=1e9, r20=1e9)}
    assert decide(_segments(1), hot, ps.ScalingPolicy.fixed(1), {}, T0 + timedelta(days=1)).requests == ()
    assert decide(_segments(3), {}, ps.ScalingPolicy.fixed(1), {}, T0 + timedelta(days=1)).requests == ()


# ---- runs on a store -------------------------------------------------------------------------
def _keys_below_half(spark, n: int) -> list[str]:
    """``n`` routing keys whose key-space position is below 0.5 (segment 0 of two)."""
    from pyspark.sql import functions as F

    keys = spark.range(0, 20 * n).select(F.concat(F.lit("hot-"), F.col("id").cast("string")).alias("k"))
    return [r.k for r in keys.where(ps.key_position(F.col("k")) < 0.5).limit(n).collect()]


def _write_at(manager, monkeypatch, at: datetime, keys: list[str], events: int) -> None:
    """``events`` events over ``keys``, committed with the store's clock at ``at`` (the internal
    seam), which is the wall clock again afterwards."""
    from pravega_spark import _delta

    _delta.set_clock(lambda: at.timestamp())
    try:
        rows = [(keys[i % len(keys)], f"e{i}") for i in range(events)]
        manager.create_event_writer("iot", "sensors", "w").write_events(
            manager.spark.createDataFrame(rows, "routing_key string, event string"))
    finally:
        _delta.set_clock(None)


@pytest.mark.slow
def test_run_autoscale_splits_a_hot_segment_once_and_never_scales_a_fixed_stream(manager, stream2, monkeypatch,
                                                                                  caplog, capsys):
    caplog.set_level(logging.INFO, logger="pravega_spark")
    now = datetime.now(UTC) + timedelta(minutes=30)  # the segments are 30 minutes old then
    keys = _keys_below_half(manager.spark, 16)
    for back in (65, 35, 5):
        _write_at(manager, monkeypatch, now - timedelta(seconds=back), keys, 2000)
    rates = {r.segment_id: r for r in manager.segment_rates("iot", "sensors", now=now).collect()}
    assert list(rates) == [0] and rates[0].r2 > 50  # 2,000 events per 30 s on segment 0 only
    assert manager.run_autoscale(now=now) == []  # fixed policy: never scaled
    assert manager.stream_info("iot", "sensors").current_epoch == 0
    manager.update_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.by_event_rate(10, 2, 2)))
    [outcome] = manager.run_autoscale(scope="iot", stream="sensors", now=now)
    [(request, epoch)] = outcome.scaled
    assert request.direction == "up" and request.sealed == (0,) and request.new_ranges == ((0.0, 0.25), (0.25, 0.5))
    assert epoch == 1 and outcome.rates[0].r2 == rates[0].r2 and outcome.rates[1] == Rates()
    assert "auto-scaling iot/sensors: scale up [0]" in caplog.text and "r2" in caplog.text
    marks = {r["segment_id"]: r for r in manager.controller.store.autoscale_marks("iot", "sensors")}
    assert marks[1]["cold_until"] is not None  # segment 1 is cold (no traffic), alone: not merged
    # the job at the wall clock (the new segments' creation is real time): all in their cooldown
    from jobs import autoscale as autoscale_job

    assert autoscale_job.main(["--root", manager.root]) == 0
    assert "autoscale: 1 streams by rate, 0 scales, 0 skipped" in capsys.readouterr().out
    assert manager.stream_info("iot", "sensors").current_epoch == 1
    events = manager.read_events("iot", "sensors").count()
    assert events == 6000  # nothing lost by the scale


@pytest.mark.slow
def test_a_manual_scale_landing_between_decision_and_scale_wins_alone(manager, stream2, monkeypatch):
    """The interleaving that a concurrent manual scale makes: it lands after the run decided and
    before its scale. The run's scale of the same segment is refused and skipped: one scale."""
    now = datetime.now(UTC) + timedelta(minutes=30)
    keys = _keys_below_half(manager.spark, 16)
    _write_at(manager, monkeypatch, now - timedelta(seconds=20), keys, 2000)
    manager.update_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.by_event_rate(10, 4, 1)))
    decided = autoscale.decide

    def decide_then_manual_scale(*args, **kwargs):
        decision = decided(*args, **kwargs)
        manager.scale_stream("iot", "sensors", [0], [(0.0, 0.1), (0.1, 0.5)])  # the operator's scale
        return decision

    monkeypatch.setattr(autoscale, "decide", decide_then_manual_scale)
    [outcome] = manager.run_autoscale(now=now)
    [(request, reason)] = outcome.skipped
    assert outcome.scaled == () and request.sealed == (0,) and len(request.new_ranges) == 4
    info = manager.stream_info("iot", "sensors")
    assert info.current_epoch == 1  # exactly one scale: the manual one
    assert sorted((s.key_start, s.key_end) for s in manager.controller.store.segment_records("iot", "sensors")
                  if s.sealed_epoch is None) == [(0.0, 0.1), (0.1, 0.5), (0.5, 1.0)]
