"""The auto-scaling run: Pravega's segment store reporting rates and the controller's
``AutoScaleTask`` carrying the requests out, as one pass over a store's streams.

For each stream with a by-rate policy (fixed-policy streams are never touched) a run:
(1) reads the events table's recent commits from its log (the last 20 minutes, newest first: the
cost follows the recent traffic, not the history) and computes each open segment's rates as of
``now`` (``autoscale_rules.segment_rates``); (2) decides with Pravega's rules (``autoscale_rules.decide``)
from the rates, the segments' ages and the marks stored by earlier runs; (3) makes each scale with
``scale_stream``, which validates it against the current epoch and lets exactly one of two
concurrent scales of a segment win (a manual scale, or another run): a refused scale is logged
and skipped; (4) stores the marks (mutes, cold marks), merged field by field with what a
concurrent run stored. A crash before (4) loses only marks: a scaled segment is sealed anyway,
its successors start muted by their creation time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..controller import stream_tasks
from ..controller.client import Controller
from ..errors import (
    InvalidConfigError,
    ScaleConflictError,
    ScalePreconditionError,
    StreamNotFoundError,
    StreamSealedError,
)
from ..store import clock
from ..store.events_log import emitted_adds
from ..stream.config import ScaleType
from ..stream.record import SEALED, SEALING
from ..stream.segments import active_segments
from . import autoscale_rules
from .autoscale_rules import Rates, ScaleRequest, SegmentMarks
from .retention_service import stream_bucket

log = logging.getLogger("pravega_spark")


@dataclass(frozen=True)
class AutoscaleOutcome:
    """What one auto-scaling run did to one stream.

    Attributes:
        scope, stream: the stream.
        rates: each open segment's rates as of the run's ``now`` (segments without traffic: 0).
        scaled: the scales made, each with the epoch it created.
        skipped: the scales decided but refused (a concurrent scale won), with the reason.
    """

    scope: str
    stream: str
    rates: dict[int, Rates] = field(default_factory=dict)
    scaled: tuple[tuple[ScaleRequest, int], ...] = ()
    skipped: tuple[tuple[ScaleRequest, str], ...] = ()

    def __repr__(self) -> str:
        done = ", ".join(f"{r.direction} {list(r.sealed)} -> epoch {e}" for r, e in self.scaled) or "no scale"
        return f"AutoscaleOutcome({self.scope}/{self.stream}: {done}, {len(self.skipped)} skipped)"


def run_autoscale(controller: Controller, scope: str | None = None, stream: str | None = None, now: datetime | None = None,
                  bucket: int = 0, buckets: int = 1, cooldown: timedelta = autoscale_rules.COOLDOWN,
                  mute: timedelta = autoscale_rules.MUTE) -> list[AutoscaleOutcome]:
    """One auto-scaling pass (module docstring) over the store's unsealed streams with a by-rate
    policy, or those of ``scope`` / one ``stream``, or one ``bucket`` of ``buckets``."""
    if not 0 <= bucket < buckets:
        raise InvalidConfigError(f"bucket must be in [0, {buckets}), got {bucket}")
    clock.check_duration(cooldown, "cooldown")
    clock.check_duration(mute, "mute")
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    rows = controller.store.streams().where(~F.col("state").isin(SEALED, SEALING))
    if scope is not None:
        rows = rows.where(F.col("scope") == scope)
    if stream is not None:
        rows = rows.where(F.col("stream") == stream)
    outcomes = []
    for s, t in sorted((r["scope"], r["stream"]) for r in rows.select("scope", "stream").collect()):
        if stream_bucket(f"{s}/{t}", buckets) != bucket:
            continue
        try:
            outcome = autoscale_stream(controller, s, t, now, cooldown, mute)
        except (StreamNotFoundError, StreamSealedError):
            continue  # deleted or sealed meanwhile
        if outcome is not None:
            outcomes.append(outcome)
    log.info("auto-scaling run at %s (bucket %d of %d): %d streams by rate, %d scales", now.isoformat(), bucket,
             buckets, len(outcomes), sum(len(o.scaled) for o in outcomes))
    return outcomes


def autoscale_stream(controller: Controller, scope: str, stream: str, now: datetime, cooldown: timedelta = autoscale_rules.COOLDOWN,
                     mute: timedelta = autoscale_rules.MUTE) -> AutoscaleOutcome | None:
    """One stream's auto-scaling step; None for a fixed policy."""
    store = controller.store
    record = controller.settled(scope, stream)
    policy = record.configuration.scaling_policy
    if policy.scale_type is ScaleType.FIXED_NUM_SEGMENTS:
        return None
    segments = active_segments(store.segment_records(scope, stream))
    rates = stream_rates(controller, scope, stream, now, policy.scale_type)
    marks = {int(r["segment_id"]): SegmentMarks(r["last_up"], r["last_down"], r["cold_until"])
             for r in store.autoscale_marks(scope, stream)}
    decision = autoscale_rules.decide(segments, rates, policy, marks, now, cooldown=cooldown, mute=mute)
    scaled, skipped = [], []
    for request in decision.requests:
        try:
            epoch = stream_tasks.scale_stream(store, scope, stream, request.sealed, request.new_ranges)
        except (ScaleConflictError, ScalePreconditionError, StreamSealedError) as exc:
            log.info("auto-scaling %s: %s not made (%s)", record.scoped_name, request.reason, exc)
            skipped.append((request, str(exc)))
            continue
        log.info("auto-scaling %s: scale %s %s -> %d segments, epoch %d: %s", record.scoped_name, request.direction,
                 list(request.sealed), len(request.new_ranges), epoch, request.reason)
        scaled.append((request, epoch))
    sealed = {s for r, _ in scaled for s in r.sealed}
    open_ids = {s.segment_id for s in segments} - sealed
    rows = [{"segment_id": sid, "last_up": m.last_up, "last_down": m.last_down, "cold_until": m.cold_until}
            for sid, m in decision.marks.items() if sid in open_ids]
    store.merge_autoscale_marks(scope, stream, rows, open_ids)
    return AutoscaleOutcome(scope, stream, {s.segment_id: rates.get(s.segment_id, Rates()) for s in segments},
                            tuple(scaled), tuple(skipped))


def stream_rates(controller: Controller, scope: str, stream: str, now: datetime, scale_type: ScaleType) -> dict[int, Rates]:
    """Each segment's rates as of ``now`` from the events table's last 20 minutes of commits."""
    traffic = stream_traffic(controller, scope, stream, now)
    rates = traffic.transform(autoscale_rules.segment_rates, now=now, scale_type=scale_type).collect()
    return {int(r.segment_id): Rates(r.r2, r.r5, r.r10, r.r20) for r in rates}


def stream_traffic(controller: Controller, scope: str, stream: str, now: datetime):
    """The stream's traffic rows (``autoscale_rules.TRAFFIC_SCHEMA``) of the 20 minutes before ``now``,
    read from the events table's log (newest commits first; no data file is read)."""
    since_ms = int((now - autoscale_rules.HISTORY).timestamp() * 1000)
    changes = controller.store.backend.recent_changes(controller.store.events_path(scope, stream), since_ms, emitted_adds)
    return controller.spark.createDataFrame(autoscale_rules.traffic_rows(changes), autoscale_rules.TRAFFIC_SCHEMA)


def segment_rates_df(controller: Controller, scope: str, stream: str, now: datetime) -> DataFrame:
    """``StreamManager.segment_rates``: each segment's rates as of ``now`` (events/s, or KiB/s for a
    data-rate policy; a fixed policy's stream is measured in events/s)."""
    kind = controller.settled(scope, stream).configuration.scaling_policy.scale_type
    return stream_traffic(controller, scope, stream, now).transform(
        autoscale_rules.segment_rates, now=now,
        scale_type=ScaleType.BY_RATE_IN_EVENTS_PER_SEC if kind is ScaleType.FIXED_NUM_SEGMENTS else kind)
