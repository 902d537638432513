"""Auto-scaling: Pravega's segment-store rates and its scale rules, over the events table.

Pravega measures each segment's traffic in the segment store (``SegmentAggregates``: a tick of
5 s, four exponentially decaying rates over 2, 5, 10 and 20 minutes), and the
``AutoScaleProcessor`` turns them into requests that the controller's ``AutoScaleTask`` carries
out as scales. Here:

- ``segment_rates`` is a pure DataFrame transformation from per-commit traffic rows
  (``segment_id``, ``time``, ``events``, ``bytes``) to each segment's four rates as of ``now``:
  the same recurrence, applied to 5-s ticks counted back from ``now`` over the last 20 minutes
  (silent ticks decay the rates, as Pravega's next update does), started at the mean rate since
  the segment's first tick with traffic in that window.
- ``decide`` is a pure function from (rates, segments, policy, mute and cold marks, ``now``) to
  the scales to make and the marks to keep: Pravega's cooldown, thresholds, split count, mute,
  cold marking and neighbour-only merges.

Approximation: Pravega's rates remember traffic older than 20 minutes (its 20-minute rate keeps
``e**-1`` of its value from 20 minutes earlier); reading only the last 20 minutes makes every
segment's rates those of a segment that started counting then.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..store.events_log import emitted_adds
from ..stream.config import ScaleType, ScalingPolicy
from ..stream.scaling import split_ranges
from ..stream.segments import SegmentRecord

TICK_SECONDS = 5
WINDOW_MINUTES = (2, 5, 10, 20)
# Pravega's exponential weights: alpha = 1 - exp(-tick / window)
ALPHAS = tuple(1.0 - math.exp(-TICK_SECONDS / 60.0 / m) for m in WINDOW_MINUTES)
RATE_COLUMNS = ("r2", "r5", "r10", "r20")
HISTORY = timedelta(minutes=max(WINDOW_MINUTES))
COOLDOWN = timedelta(seconds=600)  # AutoScalerConfig cooldown.time.seconds
MUTE = timedelta(seconds=600)  # AutoScalerConfig mute.time.seconds
COLD_VALIDITY = timedelta(minutes=10)  # AutoScaleTask REQUEST_VALIDITY_PERIOD


# ---- rates ---------------------------------------------------------------------------------------
def segment_rates(traffic: DataFrame, *, now: datetime, scale_type: ScaleType) -> DataFrame:
    """Each segment's rates ``r2, r5, r10, r20`` as of ``now`` (events/s, or KiB/s for a data-rate
    policy), from traffic rows ``segment_id, time, events, bytes`` (one per appended file or
    commit). Rows outside ``(now - 20 min, now]`` are ignored; segments without traffic there
    have no row.

    Tick ``b`` (0 = the newest) covers ``(now - 5(b+1) s, now - 5b s]``; with ``x_b`` its count
    per second and ``B`` the oldest tick with traffic, the rates start at the mean ``m`` of
    ``x_B .. x_0`` and follow Pravega's recurrence ``rate += alpha * (x_b - rate)`` for each
    tick from ``B`` on, silent ones included: ``rate = m (1 - alpha)**(B+1) + alpha * S`` with
    ``S = sum x_b (1 - alpha)**b``. (Pravega starts a rate at its first instant rate; events
    arrive here in commits, so one tick's instant rate overstates the rate by the commit
    interval over 5 s, and the slow rates would carry that for their whole window.)
    """
    amount = "events" if scale_type is ScaleType.BY_RATE_IN_EVENTS_PER_SEC else "bytes"
    now_s = now.timestamp()
    age = F.lit(now_s) - F.col("time").cast("double")
    ticks = (traffic.where((age >= 0) & (age < HISTORY.total_seconds()))
             .select("segment_id", F.floor(age / TICK_SECONDS).cast("int").alias("tick"), F.col(amount).alias("amount"))
             .groupBy("segment_id", "tick").agg((F.sum("amount") / TICK_SECONDS).alias("x")))
    sums = [F.sum(F.col("x") * F.pow(F.lit(1.0 - a), F.col("tick"))).alias(f"s{i}") for i, a in enumerate(ALPHAS)]
    per_segment = ticks.groupBy("segment_id").agg(F.max("tick").alias("oldest"), F.sum("x").alias("total"), *sums)
    mean = F.col("total") / (F.col("oldest") + 1)
    scale = 1024.0 if amount == "bytes" else 1.0
    rates = [((mean * F.pow(F.lit(1.0 - a), F.col("oldest") + 1) + F.lit(a) * F.col(f"s{i}")) / scale).alias(name)
             for i, (a, name) in enumerate(zip(ALPHAS, RATE_COLUMNS, strict=True))]
    return per_segment.select("segment_id", *rates)


TRAFFIC_SCHEMA = "segment_id long, time timestamp, events long, bytes long"


def traffic_rows(changes: Iterable[tuple[int, list[dict], list[dict]]]) -> list[tuple]:
    """``segment_id, time, events, bytes`` of each data file that appended events (the adds
    Delta's streaming source emits: no compaction, no rewrite), from log changes: its commit
    time (``modificationTime``), its rows (``numRecords``) and its framed bytes (``end_offset -
    base_offset``). A transaction's or a large event's events count when they are committed."""
    rows = []
    for _, adds, removes in changes:
        for a in emitted_adds(adds, removes):
            values = a["partitionValues"]
            stats = json.loads(a["stats"]) if a.get("stats") else {}
            rows.append((int(values["segment_id"]), datetime.fromtimestamp(int(a["modificationTime"]) / 1000, UTC),
                         int(stats.get("numRecords", 0)), int(values["end_offset"]) - int(values["base_offset"])))
    return rows


def decayed_rates(counts: Sequence[float], tick_seconds: float = TICK_SECONDS) -> tuple[float, ...]:
    """The recurrence applied tick by tick to ``counts`` (oldest first; leading silent ticks do
    not count), from the mean instant rate: the reference ``segment_rates`` is checked against."""
    instants = [c / tick_seconds for c in counts]
    while instants and instants[0] == 0:
        instants.pop(0)
    if not instants:
        return (0.0,) * len(ALPHAS)
    rates = [sum(instants) / len(instants)] * len(ALPHAS)
    for instant in instants:
        rates = [r + a * (instant - r) for r, a in zip(rates, ALPHAS, strict=True)]
    return tuple(rates)


# ---- the decision --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rates:
    """A segment's four rates (events/s or KiB/s)."""

    r2: float = 0.0
    r5: float = 0.0
    r10: float = 0.0
    r20: float = 0.0

    def __str__(self) -> str:
        return f"r2={self.r2:.2f} r5={self.r5:.2f} r10={self.r10:.2f} r20={self.r20:.2f}"


@dataclass(frozen=True)
class SegmentMarks:
    """What the auto-scaler remembers of one segment: its last scale-up and scale-down requests
    (the mute; Pravega's ``(lastUp, lastDown)`` cache entry, set to the segment's start when it
    is created) and until when it is cold (``None``: not cold)."""

    last_up: datetime | None = None
    last_down: datetime | None = None
    cold_until: datetime | None = None


@dataclass(frozen=True)
class ScaleRequest:
    """One scale to make: seal ``sealed``, create ``new_ranges``; ``direction`` is ``"up"`` or
    ``"down"``; ``reason`` names the rule and the rates."""

    direction: str
    sealed: tuple[int, ...]
    new_ranges: tuple[tuple[float, float], ...]
    reason: str


@dataclass(frozen=True)
class Decision:
    """The scales ``decide`` asks for, and the marks to keep for the next run."""

    requests: tuple[ScaleRequest, ...] = ()
    marks: Mapping[int, SegmentMarks] = field(default_factory=dict)


def split_count(rates: Rates, policy: ScalingPolicy) -> int:
    """Pravega's number of parts for a hot segment: the processor asks for
    ``max(2, int(max(r2, r5, r10) / target))`` and the controller caps it at
    ``max(2, scale_factor)``."""
    requested = max(2, int(max(rates.r2, rates.r5, rates.r10) / policy.target_rate))
    return min(max(2, requested), max(2, policy.scale_factor))


def wants_up(rates: Rates, target: float, age: timedelta) -> str | None:
    """The scale-up rule that holds (its text), or None."""
    if rates.r2 > 5 * target and age > timedelta(minutes=2):
        return f"r2 {rates.r2:.2f} > 5 x {target}"
    if rates.r5 > 2 * target and age > timedelta(minutes=5):
        return f"r5 {rates.r5:.2f} > 2 x {target}"
    if rates.r10 > target and age > timedelta(minutes=10):
        return f"r10 {rates.r10:.2f} > {target}"
    return None


def wants_down(rates: Rates, target: float, age: timedelta) -> bool:
    return (rates.r2 < target and rates.r5 < target and rates.r10 < target and rates.r20 < target / 2
            and age > timedelta(minutes=20))


def decide(segments: Iterable[SegmentRecord], rates: Mapping[int, Rates], policy: ScalingPolicy,
           marks: Mapping[int, SegmentMarks], now: datetime, *, cooldown: timedelta = COOLDOWN,
           mute: timedelta = MUTE) -> Decision:
    """Pravega's auto-scaling decisions for one stream's open ``segments`` (with creation times).

    Per segment (``AutoScaleProcessor.report``), once its age passes the cooldown: a scale-up
    when a threshold holds (not if a request was made within the mute; it mutes both
    directions), and a scale-down request when every rate is low (not within the mute of the
    last scale-down). A segment without traffic has rates of 0. A scale-up splits the segment;
    a scale-down marks it cold for ``COLD_VALIDITY`` and, unless the stream is at
    ``min_num_segments``, merges it with its cold immediate neighbours (``AutoScaleTask``), at
    most down to ``min_num_segments``. Each segment takes part in at most one scale per run.
    A fixed policy decides nothing. ``cooldown`` and ``mute``: Pravega's ``AutoScalerConfig``.
    """
    if policy.scale_type is ScaleType.FIXED_NUM_SEGMENTS:
        return Decision((), dict(marks))
    active = sorted(segments, key=lambda s: s.key_start)
    ids = {s.segment_id for s in active}
    kept = {sid: m for sid, m in marks.items() if sid in ids}
    for s in active:  # a new segment starts muted (Pravega's notifyCreated)
        kept.setdefault(s.segment_id, SegmentMarks(s.creation_time, s.creation_time))
    requests: list[ScaleRequest] = []
    busy: set[int] = set()
    target = float(policy.target_rate)
    count = len(active)
    for s in active:
        age = now - s.creation_time
        if age <= cooldown:
            continue
        r = rates.get(s.segment_id, Rates())
        mark = kept[s.segment_id]
        rule = wants_up(r, target, age)
        if rule is not None and _unmuted(mark.last_up, now, mute) and s.segment_id not in busy:
            parts = split_count(r, policy)
            requests.append(ScaleRequest("up", (s.segment_id,), tuple(split_ranges(s.key_start, s.key_end, parts)),
                                         f"segment {s.segment_id}: {rule} ({r}), {parts} parts"))
            kept[s.segment_id] = replace(mark, last_up=now, last_down=now)
            busy.add(s.segment_id)
            count += parts - 1
            continue
        if wants_down(r, target, age) and _unmuted(mark.last_down, now, mute):
            kept[s.segment_id] = mark = replace(mark, last_down=now, cold_until=now + COLD_VALIDITY)
            merge = _cold_merge(active, s, kept, now, count - policy.min_num_segments, busy)
            if merge:
                requests.append(ScaleRequest(
                    "down", tuple(m.segment_id for m in merge), ((merge[0].key_start, merge[-1].key_end),),
                    f"segments {[m.segment_id for m in merge]} cold (segment {s.segment_id}: {r} < {target})"))
                busy.update(m.segment_id for m in merge)
                count -= len(merge) - 1
    return Decision(tuple(requests), kept)


def _unmuted(last: datetime | None, now: datetime, mute: timedelta) -> bool:
    return last is None or now - last > mute


def _cold_merge(active: list[SegmentRecord], s: SegmentRecord, marks: Mapping[int, SegmentMarks],
                now: datetime, headroom: int, busy: set[int]) -> list[SegmentRecord]:
    """``AutoScaleTask.processScaleDown``: ``s`` and its immediate neighbours that are cold (and
    not in another scale of this run), sorted by key; the first two if only one segment may go
    (three cold, ``active - min == 1``); nothing at ``min_num_segments`` or with fewer than two."""
    if headroom <= 0:
        return []
    candidates = [c for c in active if c is s or c.key_end == s.key_start or c.key_start == s.key_end]
    cold = [c for c in candidates if c.segment_id not in busy and _cold(marks.get(c.segment_id), now)]
    if headroom == 1 and len(cold) == 3:
        cold = cold[:2]
    return cold if len(cold) > 1 else []


def _cold(mark: SegmentMarks | None, now: datetime) -> bool:
    return mark is not None and mark.cold_until is not None and mark.cold_until > now
