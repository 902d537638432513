"""The retention run: Pravega's ``StreamCutBucketService`` and ``StreamMetadataTasks.retention``.

One run visits the streams of a store (or of one bucket of them) that have a retention policy.
For each it (1) records the tail in the retention set when the newest record is older than the
frequency, (2) computes the subscribers' lower bound, (3) picks the truncation point with the
policy's rules (``retention.truncation_point``), (4) truncates there and (5) drops the retention
records the truncation consumed. Every step is a commit of its own and safe to repeat, so two runs
over the same streams at once (or a run killed half-way) leave consistent tables: the loser of a
race re-reads or finds nothing left to do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pyspark.sql import functions as F

from ..controller import stream_tasks
from ..controller.client import Controller
from ..controller.subscribers import lower_bound_cut
from ..errors import InvalidConfigError, InvalidStreamCutError, StreamNotFoundError
from ..store import clock
from ..stream import retention
from ..stream.record import SEALED, SEALING
from ..stream.stream_cut import StreamCut

log = logging.getLogger("pravega_spark")

DEFAULT_FREQUENCY = timedelta(minutes=30)  # Pravega's retention.frequency.minutes


def stream_bucket(scoped_name: str, buckets: int) -> int:
    """The bucket of a stream: Java's ``String.hashCode`` of ``scope/stream`` modulo ``buckets``
    (Pravega's ``BucketStore`` distribution), in ``[0, buckets)``. Stable across processes."""
    data = scoped_name.encode("utf-16-be")  # Java strings hash their UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return signed % buckets


@dataclass(frozen=True)
class RetentionOutcome:
    """What one retention run did to one stream.

    Attributes:
        scope, stream: the stream.
        recorded: the retention record added to the set by this run, if any.
        lower_bound: the subscribers' lower bound (None without publishing subscribers).
        truncated_at: the cut truncated at (None if nothing was truncated).
        bytes_truncated: bytes this truncation removed from the stream's head.
        segments_deleted: segments deleted whole.
        records_dropped: retention records dropped after the truncation.
    """

    scope: str
    stream: str
    recorded: retention.RetentionRecord | None = None
    lower_bound: StreamCut | None = None
    truncated_at: StreamCut | None = None
    bytes_truncated: int = 0
    segments_deleted: tuple[int, ...] = field(default_factory=tuple)
    records_dropped: int = 0

    def __repr__(self) -> str:
        what = (f"truncated at {self.truncated_at!r} ({self.bytes_truncated} bytes, "
                f"{len(self.segments_deleted)} segments deleted)" if self.truncated_at else "no truncation")
        return f"RetentionOutcome({self.scope}/{self.stream}: {what}, recorded={self.recorded is not None})"


def run_retention(controller: Controller, scope: str | None = None, stream: str | None = None, now: datetime | None = None,
                  frequency: timedelta | None = None, bucket: int = 0, buckets: int = 1) -> list[RetentionOutcome]:
    """Apply every retention policy once (see the module docstring); returns what it did per stream.

    Args:
        controller: the store's ``Controller``.
        scope, stream: limit the run to a scope or one stream.
        now: the time the run takes as current (default: the wall clock); makes runs reproducible.
        frequency: minimum age of the newest retention record before a new one is recorded.
        bucket, buckets: visit only the streams whose ``stream_bucket(scope/stream, buckets)`` is
            ``bucket``, so that ``buckets`` job instances share a store.
    """
    if not 0 <= bucket < buckets:
        raise InvalidConfigError(f"bucket must be in [0, {buckets}), got {bucket}")
    clock.check_duration(frequency, "frequency")
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    frequency = DEFAULT_FREQUENCY if frequency is None else frequency
    if scope is not None and stream is not None:  # one stream: its row alone, not a listing of the store
        names = [(scope, stream)]
    else:
        rows = controller.store.streams().where(F.col("state") != F.lit(SEALED))
        if scope is not None:
            rows = rows.where(F.col("scope") == scope)
        if stream is not None:
            rows = rows.where(F.col("stream") == stream)
        names = sorted((r["scope"], r["stream"]) for r in rows.select("scope", "stream").collect())
    outcomes = []
    for s, t in names:
        if stream_bucket(f"{s}/{t}", buckets) != bucket:
            continue
        try:
            outcome = retain_stream(controller, s, t, now, frequency)
        except StreamNotFoundError:
            continue  # deleted meanwhile
        if outcome is not None:
            outcomes.append(outcome)
    log.info("retention run at %s (bucket %d of %d): %d streams with a policy, %d truncated",
             now.isoformat(), bucket, buckets, len(outcomes), sum(o.truncated_at is not None for o in outcomes))
    return outcomes


def retain_stream(controller: Controller, scope: str, stream: str, now: datetime,
                  frequency: timedelta) -> RetentionOutcome | None:
    """One stream's retention step; None if the stream has no retention policy or is sealed."""
    store = controller.store
    record = controller.recover(controller.stream_record(scope, stream))  # also finishes a crashed truncation
    policy = record.configuration.retention_policy
    if policy is None or record.state in (SEALING, SEALED):
        return None
    segments = store.segment_records(scope, stream)
    retention_set = store.retention_records(scope, stream)
    # the tail (the stream's own log) only when a record is due or subscribers' cuts need the
    # segments' lengths: a pass with nothing to do reads the shard tables alone (#68)
    tail = None
    recorded = None
    if retention.record_due(retention_set, now, frequency):
        tail = controller.tail(record, segments)
        candidate = retention.new_retention_record(tail, retention_set, segments, now, tail.positions)
        if store.add_retention_record(scope, stream, candidate):
            recorded = candidate
        retention_set = store.retention_records(scope, stream)
    lower_bound = None
    if store.has_subscriber_cuts(scope, stream):
        lower_bound = lower_bound_cut(store.subscriber_cuts(scope, stream), segments=store.segments(scope, stream),
                                      stream=record.scoped_name)
        tail = tail or controller.tail(record, segments)
    cut = retention.truncation_point(policy, retention_set, lower_bound, now, segments,
                                     tail.positions if tail is not None else None)
    outcome = RetentionOutcome(scope, stream, recorded, lower_bound)
    if cut is None or not cut.positions:
        return outcome
    before = controller.truncation_record(scope, stream)
    try:
        stream_tasks.truncate_stream(store, scope, stream, cut)
    except InvalidStreamCutError as exc:  # behind or overlapping the head: Pravega ignores it
        log.info("retention of %s: not truncating at %r (%s)", record.scoped_name, cut, exc)
        return outcome
    after = controller.truncation_record(scope, stream)
    kept = retention.records_after_truncation(retention_set, cut, segments)
    dropped = [r for r in retention_set if r not in kept]
    if dropped:
        store.drop_retention_records(scope, stream, max(r.recording_time for r in dropped))
    outcome = RetentionOutcome(scope, stream, recorded, lower_bound, cut, after.size_till - before.size_till,
                               tuple(sorted(set(after.deleted_segments) - set(before.deleted_segments))),
                               len(dropped))
    log.info("retention of %s: truncated at %r, %d bytes, segments deleted %s, %d retention records dropped",
             record.scoped_name, cut, outcome.bytes_truncated, list(outcome.segments_deleted), len(dropped))
    return outcome
