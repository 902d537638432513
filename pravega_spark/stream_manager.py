"""``StreamManager``: scopes and streams, scaling, sealing, cuts and reads (Pravega's StreamManager
and controller in one client class).

Multi-commit workflows (create, scale, seal, delete) record their progress in the stream's row so
that the next operation on the stream finishes a workflow a crashed process left half-done; see
each method's docstring and docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import _delta, reader
from . import epochs as epochs_mod
from ._failpoints import failpoint
from ._store import Store, stream_key, utc_now
from .config import ScaleType, StreamConfiguration
from .errors import (
    GenerationMismatchError,
    InvalidConfigError,
    InvalidStreamCutError,
    ReaderGroupNotFoundError,
    ScaleConflictError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentNotFoundError,
    StreamCutBehindError,
    StreamNotFoundError,
    StreamNotSealedError,
    StreamSealedError,
    SubscriberNotFoundError,
)
from .large_events import assemble_large_events
from .names import validate_reader_group_name, validate_scope_name, validate_stream_name
from .scaling import EpochTransition, apply_transition, plan_scale
from .schema import (
    ACTIVE,
    CREATING,
    EVENTS_PARTITION,
    RECORD_CHUNK_END,
    RECORD_EVENT,
    SCALING,
    SEALED,
    SEALING,
    TRUNCATING,
)
from .segments import (
    SegmentRecord,
    active_segments,
    epoch_members,
    initial_segments,
    predecessors,
    successors_with_predecessors,
)
from .stream import StreamInfo, StreamRecord
from .stream_cut import (
    StreamCut,
    head_of_stream,
    size_between,
    stream_cut_equal_or_after,
    tail_cut,
    validate_stream_cut,
)
from .truncation import (
    TruncationRecord,
    compute_truncation_record,
    initial_truncation_record,
    partial_truncations,
)
from .validation import StreamValidation

log = logging.getLogger("pravega_spark")

# Delta's default ``delta.deletedFileRetentionDuration`` (7 days), what VACUUM keeps by default.
DEFAULT_FILE_RETENTION_HOURS = 168

CutOrName = StreamCut | str


def _watermark_paths(manager, scope: str, stream: str) -> tuple[str, str]:
    from .watermarks import _paths

    return _paths(manager, scope, stream)


def _as_utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts.astimezone(timezone.utc)


class StreamManager:
    """Creates, scales, seals and reads streams stored as Delta tables under ``root``.

    Mirrors Pravega's ``StreamManager`` (plus the controller's scale/seal workflows). Any number of
    managers, in any number of processes, may point at the same root.

    Args:
        spark: a Delta-enabled session (``ps.spark_session()``, or Databricks' ``spark``).
        root: the store's root location (local path, ``dbfs:/``, ``s3a://``, ``abfss://``...).

    Example:
        >>> manager = StreamManager(spark, "/lake/pravega")  # doctest: +SKIP
        >>> manager.create_scope("iot")  # doctest: +SKIP
        True
    """

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark = spark
        # a relative root ("lake") is made absolute here, once: Delta reads a relative path as a
        # table name
        self.root = _delta.qualify(spark, str(root))
        # checksum files list application versions and small tables' files (``_delta.SESSION_CONF``)
        _delta.configure_session(spark)
        self._store = Store(spark, self.root)
        self._store.ensure_system_tables()

    def __repr__(self) -> str:
        return f"StreamManager(root={self.root!r})"

    # ---- scopes ------------------------------------------------------------------------------
    def create_scope(self, scope: str) -> bool:
        """Create ``scope``; False if it already existed."""
        validate_scope_name(scope)
        created = self._store.insert_scope(scope)
        log.info("create_scope %s: %s", scope, "created" if created else "exists")
        return created

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if it did not exist.

        Raises:
            ScopeNotEmptyError: the scope still has streams.
        """
        validate_scope_name(scope)
        if not self._store.scope_exists(scope):
            return False
        if self._store.streams().where(F.col("scope") == scope).limit(1).count():
            raise ScopeNotEmptyError(f"scope {scope} still has streams; seal and delete them first")
        self._store.delete_scope_row(scope)
        return True

    def list_scopes(self) -> DataFrame:
        """All scopes, as a DataFrame ``(scope, creation_time)``."""
        return self._store.scopes().orderBy("scope")

    def check_scope_exists(self, scope: str) -> bool:
        validate_scope_name(scope)
        return self._store.scope_exists(scope)

    # ---- streams -----------------------------------------------------------------------------
    def create_stream(self, scope: str, stream: str,
                      config: StreamConfiguration | None = None) -> bool:
        """Create a stream with ``config.scaling_policy.min_num_segments`` equal segments.

        Commits: (1) stream row in CREATING; (2) segments table with epoch 0 and the empty events
        table; (3) row to ACTIVE. A crash after (1) is finished by the next ``create_stream`` or
        any other operation on the stream.

        Returns:
            True if this call created the stream, False if it already existed.
        """
        validate_scope_name(scope)
        validate_stream_name(stream)
        config = config or StreamConfiguration()
        if not isinstance(config, StreamConfiguration):
            raise InvalidConfigError(f"config must be a StreamConfiguration, got {type(config).__name__}")
        if not self._store.scope_exists(scope):
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        now = utc_now()
        record = StreamRecord(scope, stream, CREATING, config, 0, None, None, now, now, 0)
        inserted = _delta.retrying(lambda: self._store.insert_stream(record), f"create {scope}/{stream}")
        if not inserted:
            existing = self._store.stream_record(scope, stream)
            if existing is not None and existing.state == CREATING:
                self._finish_create(existing)
            return False
        failpoint("create:after_row")
        self._finish_create(record)
        log.info("create_stream %s/%s with %d segments", scope, stream,
                 config.scaling_policy.min_num_segments)
        return True

    def _finish_create(self, record: StreamRecord) -> StreamRecord:
        initial = initial_segments(record.configuration.scaling_policy.min_num_segments,
                                   record.creation_time)
        self._store.create_stream_tables(record.scope, record.stream, initial)
        return self._set_state(record, ACTIVE)

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        """Replace the stream's configuration (policies, tags) in one commit.

        Raises:
            StreamSealedError: the stream is sealed.
        """
        if not isinstance(config, StreamConfiguration):
            raise InvalidConfigError(f"config must be a StreamConfiguration, got {type(config).__name__}")
        record = self._settled(scope, stream)
        if record.state in (SEALING, SEALED):
            raise StreamSealedError(f"stream {record.scoped_name} is sealed")

        def attempt() -> bool:
            current = self._recover(self._stream(scope, stream))
            new = current.transition(ACTIVE, utc_now(), configuration=config)
            if not self._store.compare_and_set_stream(current, new):
                raise _delta.Retry("stream row changed")
            return True

        return _delta.retrying(attempt, f"update {scope}/{stream}")

    def check_stream_exists(self, scope: str, stream: str) -> bool:
        validate_scope_name(scope)
        validate_stream_name(stream)
        return self._store.stream_record(scope, stream) is not None

    def list_streams(self, scope: str, tag: str | None = None) -> DataFrame:
        """The scope's streams (optionally only those with ``tag``) as a DataFrame."""
        validate_scope_name(scope)
        if not self._store.scope_exists(scope):
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        df = self._store.streams().where(F.col("scope") == scope)
        if tag is not None:
            df = df.where(F.array_contains("tags", tag))
        return df.select("scope", "stream", "state", "tags", "current_epoch", "creation_time",
                         "update_time", "configuration").orderBy("stream")

    def stream_info(self, scope: str, stream: str) -> StreamInfo:
        """State, configuration, current epoch, head and tail cuts, and size of the stream."""
        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        head = self._head(record, records)
        tail = self._tail(record, records)
        return StreamInfo(scope, stream, record.state, record.configuration, record.current_epoch,
                          head, tail, size_between(head, tail, records, tail.positions))

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Seal every open segment; later writes raise ``StreamSealedError``.

        Commits: (1) row to SEALING; (2) a seal record closing each open segment (fenced against
        appends); (3) sealed sizes into the segments table; (4) row to SEALED. A crash in between
        is finished by the next operation on the stream. Sealing a sealed stream returns True.
        """
        record = self._recover(self._stream(scope, stream))
        if record.state != SEALED:
            if record.state != SEALING:
                record = _delta.retrying(lambda: self._start(scope, stream, SEALING), f"seal {scope}/{stream}")
            failpoint("seal:after_start")
            record = self._finish_seal(record)
        log.info("seal_stream %s/%s", scope, stream)
        return True

    def _finish_seal(self, record: StreamRecord) -> StreamRecord:
        records = self._store.segment_records(record.scope, record.stream)
        open_ids = [s.segment_id for s in active_segments(records)]
        sizes = self._store.seal_segments(record.scope, record.stream, open_ids)
        self._store.merge_segments(record.scope, record.stream, [
            SegmentRecord(s.segment_id, s.key_start, s.key_end, s.creation_time, None, sizes[s.segment_id])
            for s in active_segments(records)])
        return self._set_state(record, SEALED)

    def delete_stream(self, scope: str, stream: str) -> bool:
        """Delete a sealed stream and remove its tables' data from storage.

        Commits: the stream's directory is removed, then its row. A crash in between leaves a
        SEALED row with no data, which the next ``delete_stream`` finishes.

        Returns:
            False if the stream did not exist.

        Raises:
            StreamNotSealedError: the stream is not sealed.
        """
        validate_scope_name(scope)
        validate_stream_name(stream)
        record = self._store.stream_record(scope, stream)
        if record is None:
            return False
        record = self._recover(record)
        if record.state != SEALED:
            raise StreamNotSealedError(f"stream {record.scoped_name} is {record.state}; seal it first")
        removed = self._store.remove_stream_tables(scope, stream)
        failpoint("delete:after_data")
        _delta.retrying(lambda: self._store.delete_stream_row(scope, stream), f"delete {scope}/{stream}")
        log.info("delete_stream %s/%s (data removed: %s)", scope, stream, removed)
        return True

    # ---- segments and epochs -----------------------------------------------------------------
    def segments(self, scope: str, stream: str, epoch: int | None = None) -> DataFrame:
        """The stream's segments (every one it ever had, or the members of ``epoch``)."""
        self._settled(scope, stream)
        df = self._store.segments(scope, stream)
        if epoch is not None:
            df = df.transform(epochs_mod.filter_epoch_members, epoch=int(epoch))
        return df.orderBy("segment_id")

    def epochs(self, scope: str, stream: str) -> DataFrame:
        """One row per epoch: ``epoch, creation_time, segment_ids``."""
        record = self._settled(scope, stream)
        return (self._store.segments(scope, stream)
                .transform(epochs_mod.explode_epochs, current_epoch=record.current_epoch))

    def successors(self, scope: str, stream: str, segment_id: int) -> dict[int, list[int]]:
        """Successors of a sealed segment, each with its predecessors (empty if open/unknown)."""
        self._settled(scope, stream)
        return successors_with_predecessors(self._store.segment_records(scope, stream), int(segment_id))

    def predecessors(self, scope: str, stream: str, segment_id: int) -> list[int]:
        """The segments sealed to create ``segment_id`` that overlap it."""
        self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        if not any(r.segment_id == segment_id for r in records):
            raise SegmentNotFoundError(f"segment {segment_id} is not a segment of {scope}/{stream}")
        return predecessors(records, int(segment_id))

    def segments_at(self, scope: str, stream: str, time: datetime) -> DataFrame:
        """The segments active at ``time`` (those of the epoch in force then)."""
        self._settled(scope, stream)
        epoch = epochs_mod.epoch_at(self._store.segment_records(scope, stream), _as_utc(time))
        return self.segments(scope, stream, epoch)

    # ---- scaling -----------------------------------------------------------------------------
    def scale_stream(self, scope: str, stream: str, sealed_segments: Iterable[int],
                     new_key_ranges: Iterable[tuple[float, float]]) -> int:
        """Seal ``sealed_segments`` and replace them with segments over ``new_key_ranges``.

        Validated as Pravega's ``submitScale`` (see SPEC section 5). Commits: (1) row ACTIVE ->
        SCALING with the epoch transition record; (2) seal records closing the sealed segments
        (fenced against appends, whose writers then move to the successors); (3) segments table:
        sealed epochs and sizes plus the new segments; (4) row SCALING -> ACTIVE with the new
        epoch. Commits (2)-(4) are idempotent: a crash after (1) is completed by the next
        operation on the stream (roll forward). Of two concurrent scales exactly one wins.

        Returns:
            The new epoch.

        Raises:
            InvalidScaleError: the new ranges do not exactly cover the sealed segments' ranges.
            ScalePreconditionError: a segment is not in the current epoch, or too few would remain.
            ScaleConflictError: a different scale of the stream is in progress.
            StreamSealedError: the stream is sealed.
        """
        sealed = sorted({int(s) for s in sealed_segments})
        ranges = [(float(lo), float(hi)) for lo, hi in new_key_ranges]

        def attempt() -> StreamRecord:
            record = self._recover(self._stream(scope, stream))
            if record.state in (SEALING, SEALED):
                raise StreamSealedError(f"stream {record.scoped_name} is sealed")
            records = self._store.segment_records(scope, stream)
            current_epoch_time = max(
                (s.creation_time for s in epoch_members(records, record.current_epoch)
                 if s.creation_epoch == record.current_epoch and s.creation_time), default=None)
            plan = plan_scale(records, sealed, ranges,
                              record.configuration.scaling_policy.min_num_segments,
                              utc_now(), current_epoch_time)
            started = record.transition(SCALING, utc_now(), pending_scale=plan.to_json())
            if self._store.compare_and_set_stream(record, started):
                return started
            latest = self._stream(scope, stream)
            if latest.state == SCALING and latest.pending_scale:
                other = EpochTransition.from_json(latest.pending_scale)
                if (other.sealed_segments == tuple(sealed)
                        and [(r.key_start, r.key_end) for r in other.new_segments] == ranges):
                    return latest  # same scale submitted twice: idempotent
                raise ScaleConflictError(f"another scale of {record.scoped_name} is in progress: {other!r}")
            raise _delta.Retry("stream row changed")

        started = _delta.retrying(attempt, f"scale {scope}/{stream}")
        failpoint("scale:after_start")
        done = self._finish_scale(started)
        log.info("scale_stream %s/%s: sealed %s -> epoch %d", scope, stream, sealed, done.current_epoch)
        return done.current_epoch

    def _finish_scale(self, record: StreamRecord) -> StreamRecord:
        transition = EpochTransition.from_json(record.pending_scale)
        sizes = self._store.seal_segments(record.scope, record.stream, transition.sealed_segments)
        failpoint("scale:after_seal")
        records = self._store.segment_records(record.scope, record.stream)
        if not any(r.segment_id == transition.new_segments[0].segment_id for r in records):
            changed = apply_transition(records, transition, sizes)
            touched = set(transition.sealed_segments) | {s.segment_id for s in transition.new_segments}
            self._store.merge_segments(record.scope, record.stream,
                                       [r for r in changed if r.segment_id in touched])
        failpoint("scale:after_segments")
        return self._set_state(record, ACTIVE, current_epoch=transition.new_epoch, pending_scale=None)

    # ---- cuts --------------------------------------------------------------------------------
    def head_stream_cut(self, scope: str, stream: str) -> StreamCut:
        record = self._settled(scope, stream)
        return self._head(record, self._store.segment_records(scope, stream))

    def tail_stream_cut(self, scope: str, stream: str) -> StreamCut:
        """The current segments at their lengths."""
        record = self._settled(scope, stream)
        return self._tail(record, self._store.segment_records(scope, stream))

    def stream_cut_at(self, scope: str, stream: str, time: datetime) -> StreamCut:
        """The tail as it was at ``time``: the segments of the epoch active then, each at the end
        of its last event written at or before ``time`` (never before the head)."""
        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        at = _as_utc(time)
        epoch = epochs_mod.epoch_at(records, at)
        members = epoch_members(records, epoch)
        ids = [s.segment_id for s in members]
        rows = (self._store.events(scope, stream).where(F.col("segment_id").isin(ids))
                .where(F.col("write_time") <= F.lit(at))
                .where(F.col("record_type").isin(RECORD_EVENT, RECORD_CHUNK_END))
                .groupBy("segment_id").agg(F.max("next_offset").alias("tail")).collect())
        found = {r["segment_id"]: int(r["tail"]) for r in rows}
        cut = StreamCut(record.scoped_name, {sid: found.get(sid, 0) for sid in ids})
        head = self._head(record, records)
        return cut if stream_cut_equal_or_after(cut, head, records) else head

    def size_between(self, scope: str, stream: str, from_cut: CutOrName = "earliest",
                     to_cut: CutOrName = "latest") -> int:
        """Bytes (framed) between two cuts, as Pravega's ``sizeBetweenStreamCuts``."""
        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        tail = self._tail(record, records)
        resolve = self._cut_resolver(record, records, tail=tail)
        self._check_cuts(record, records, [c for c in (from_cut, to_cut) if isinstance(c, StreamCut)])
        return size_between(resolve(from_cut), resolve(to_cut), records, tail.positions)

    def validate_stream_cut(self, scope: str, stream: str, cut: StreamCut) -> StreamCut:
        """Raise ``InvalidStreamCutError`` unless ``cut`` is a valid cut of the stream."""
        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        self._check_cuts(record, records, [cut])
        return cut

    # ---- truncation --------------------------------------------------------------------------
    def truncate_stream(self, scope: str, stream: str, stream_cut: StreamCut) -> bool:
        """Move the stream's head to ``stream_cut`` and delete the data before it.

        Segments wholly before the cut are deleted (a partition-level DELETE: no data file is
        rewritten); the cut's segments lose their records below its offsets. The bytes stay in
        storage until ``vacuum`` removes the deleted files.

        Commits: (1) row ACTIVE -> TRUNCATING with the new head and truncation record (from here
        on reads below the head raise ``TruncatedDataError``); (2) a TRUNCATE record at each open
        cut segment's new start; (3) DELETE of the whole segments; (4) DELETE of the records below
        the cut's offsets; (5) row -> ACTIVE with the record completed. (2)-(5) are idempotent: a
        crash after (1) is finished by the next state change of the stream (scale, seal, update,
        truncate) or retention run. Appends go on during the truncation. Truncating at the
        current head changes nothing.

        Returns:
            True.

        Raises:
            InvalidStreamCutError: the cut is invalid or not equal to or after the current head.
            StreamSealedError: the stream is sealed.
        """
        if not isinstance(stream_cut, StreamCut) or stream_cut.is_unbounded:
            raise InvalidStreamCutError(f"truncate_stream needs a bounded StreamCut, got {stream_cut!r}")

        def attempt() -> StreamRecord | None:
            record = self._recover(self._stream(scope, stream))
            if record.state in (SEALING, SEALED):
                raise StreamSealedError(f"stream {record.scoped_name} is sealed")
            records = self._store.segment_records(scope, stream)
            previous = self._truncation(record, records)
            if stream_cut.stream != record.scoped_name:
                raise InvalidStreamCutError(f"cut of {stream_cut.stream} used with stream {record.scoped_name}")
            if previous.stream_cut == stream_cut:
                return None
            if not stream_cut_equal_or_after(stream_cut, previous.stream_cut, records):
                raise InvalidStreamCutError(f"cannot truncate at {stream_cut!r}: it is not equal to or after the "
                                            f"current head {previous.stream_cut!r}")
            self._check_cuts(record, records, [stream_cut])
            lengths = self._tail(record, records).positions
            truncation = compute_truncation_record(previous, stream_cut, records, lengths)
            started = record.transition(TRUNCATING, utc_now(), head_stream_cut=stream_cut.as_text(),
                                        truncation=truncation.to_json())
            if not self._store.compare_and_set_stream(record, started):
                raise _delta.Retry("stream row changed")
            return started

        started = _delta.retrying(attempt, f"truncate {scope}/{stream}")
        if started is None:
            log.info("truncate_stream %s/%s: already at %r", scope, stream, stream_cut)
            return True
        failpoint("truncate:after_start")
        self._finish_truncation(started)
        return True

    def truncation_record(self, scope: str, stream: str) -> TruncationRecord:
        """The stream's truncation record: head, deleted segments, bytes truncated so far."""
        record = self._settled(scope, stream)
        return self._truncation(record, self._store.segment_records(scope, stream))

    def _truncation(self, record: StreamRecord, records: Sequence[SegmentRecord]) -> TruncationRecord:
        if record.truncation:
            return TruncationRecord.from_json(record.truncation)
        return initial_truncation_record(records, record.scoped_name)

    def _finish_truncation(self, record: StreamRecord) -> tuple[StreamRecord, dict]:
        """Commits (2)-(5) of ``truncate_stream``; returns the new record and what was deleted."""
        truncation = TruncationRecord.from_json(record.truncation)
        open_ids = {s.segment_id for s in active_segments(self._store.segment_records(record.scope, record.stream))}
        starts = partial_truncations(truncation)
        self._store.mark_truncation_starts(record.scope, record.stream,
                                           {s: o for s, o in starts.items() if s in open_ids})
        failpoint("truncate:after_marks")
        whole = self._store.delete_segments(record.scope, record.stream, truncation.to_delete)
        failpoint("truncate:after_segments")
        rows = self._store.delete_below(record.scope, record.stream, starts)
        failpoint("truncate:after_rows")
        done = self._set_state(record, ACTIVE, truncation=truncation.completed().to_json())
        report = {"head": truncation.stream_cut, "segments_deleted": list(truncation.to_delete),
                  "size_till": truncation.size_till, "files_removed": whole.get("numRemovedFiles")
                  + rows.get("numRemovedFiles"), "files_rewritten": whole.get("numAddedFiles")
                  + rows.get("numAddedFiles"), "versions": [v for v in (whole.version, rows.version) if v is not None]}
        log.info("truncate_stream %s: head %r, deleted segments %s, rows below the head deleted in %s, "
                 "%d bytes truncated in total, files removed %d / rewritten %d (events versions %s)",
                 record.scoped_name, truncation.stream_cut, list(truncation.to_delete), sorted(starts),
                 truncation.size_till, report["files_removed"], report["files_rewritten"], report["versions"])
        return done, report

    # ---- retention ---------------------------------------------------------------------------
    def run_retention(self, scope: str | None = None, stream: str | None = None, now: datetime | None = None,
                      frequency: timedelta | None = None, bucket: int = 0, buckets: int = 1) -> list:
        """Apply the streams' retention policies once (what ``jobs/retention.py`` runs).

        For each stream with a retention policy: record its tail in the retention set when the
        newest record is older than ``frequency`` (default 30 minutes), then truncate where
        Pravega's time/size/consumption rules say (see ``retention_service``).

        Args:
            scope, stream: limit the run to a scope or one stream.
            now: the run's notion of the current time (default: the wall clock).
            frequency: how old the newest retention record must be before another is recorded.
            bucket, buckets: handle only this bucket's share of the streams.

        Returns:
            A list of ``RetentionOutcome`` (one per stream with a policy).
        """
        from .retention_service import run_retention

        return run_retention(self, scope, stream, None if now is None else _as_utc(now), frequency, bucket, buckets)

    # ---- auto-scaling ------------------------------------------------------------------------
    def run_autoscale(self, scope: str | None = None, stream: str | None = None, now: datetime | None = None,
                      bucket: int = 0, buckets: int = 1, cooldown: timedelta | None = None,
                      mute: timedelta | None = None) -> list:
        """Apply the streams' by-rate scaling policies once (what ``jobs/autoscale.py`` runs).

        For each unsealed stream whose policy is ``by_event_rate`` / ``by_data_rate``: measure
        each open segment's rates from the events table's last 20 minutes of commits, decide with
        Pravega's rules (cooldown 600 s after a segment's creation; split on ``r2 > 5T``, ``r5 >
        2T`` or ``r10 > T`` into ``min(max(2, rate/T), max(2, scale_factor))`` parts; mark cold
        and merge cold immediate neighbours when every rate is low and ``r20 < T/2``; mute 600 s
        after a request; never below ``min_num_segments``) and make the scales with
        ``scale_stream``. Streams with a fixed policy are never touched. Safe against concurrent
        runs, manual scales and writers: a scale that a concurrent one beat is skipped.

        Args:
            scope, stream: limit the run to a scope or one stream.
            now: the run's notion of the current time (default: the wall clock).
            bucket, buckets: handle only this bucket's share of the streams.
            cooldown, mute: Pravega's ``AutoScalerConfig`` (default 600 s each).

        Returns:
            A list of ``AutoscaleOutcome`` (one per stream with a by-rate policy).
        """
        from . import autoscale
        from .autoscale_service import run_autoscale

        return run_autoscale(self, scope, stream, None if now is None else _as_utc(now), bucket, buckets,
                             autoscale.COOLDOWN if cooldown is None else cooldown,
                             autoscale.MUTE if mute is None else mute)

    def segment_rates(self, scope: str, stream: str, now: datetime | None = None) -> DataFrame:
        """Each segment's traffic rates as the auto-scaler sees them (``segment_id, r2, r5, r10,
        r20``: Pravega's decaying rates over 2, 5, 10 and 20 minutes, in events/s, or KiB/s for a
        data-rate policy) as of ``now``, from the events table's last 20 minutes of commits.
        Segments without traffic then have no row."""
        from . import autoscale
        from .autoscale_service import stream_traffic

        record = self._settled(scope, stream)
        kind = record.configuration.scaling_policy.scale_type
        now = _as_utc(now) if now is not None else datetime.now(timezone.utc)
        return stream_traffic(self, scope, stream, now).transform(
            autoscale.segment_rates, now=now,
            scale_type=ScaleType.BY_RATE_IN_EVENTS_PER_SEC if kind is ScaleType.FIXED_NUM_SEGMENTS else kind)

    # ---- subscribers (consumption-based retention) -------------------------------------------
    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Subscribe ``subscriber`` (e.g. a reader group) to the stream's retention.

        A new subscriber starts with an empty cut, which holds nothing back until it publishes
        one. A name of the form ``scope/group`` is a reader group's, which must exist (the
        group subscribes itself when its retention type is not NONE); any other non-empty name
        is an external subscriber. An existing subscriber with an older generation takes the
        new one and keeps its cut;
        an equal or older generation is a no-op (Pravega's ``addSubscriber``).

        Returns:
            True if the call changed the subscribers table.
        """
        self._check_subscriber(subscriber, generation)
        if "/" in subscriber:  # a reader group's scoped name: the group must exist
            group_scope, group = subscriber.split("/", 1)
            if self._store.reader_group_row(group_scope, group) is None:
                raise ReaderGroupNotFoundError(f"subscriber {subscriber!r} names no reader group of the store")
        record = self._settled(scope, stream)
        changed = self._store.upsert_subscriber(scope, stream, subscriber, generation)
        log.info("add_subscriber %s to %s (generation %d): %s", subscriber, record.scoped_name, generation,
                 "done" if changed else "no change")
        return changed

    def remove_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Unsubscribe ``subscriber`` unless it has a newer generation (then this is a no-op).

        Returns:
            True if the subscriber is gone after the call.
        """
        self._check_subscriber(subscriber, generation)
        self._settled(scope, stream)
        self._store.delete_subscriber(scope, stream, subscriber, generation)
        return self._store.subscriber(scope, stream, subscriber) is None

    def update_subscriber_stream_cut(self, scope: str, stream: str, subscriber: str, generation: int,
                                     stream_cut: StreamCut) -> bool:
        """Publish how far ``subscriber`` has consumed (Pravega's ``updateSubscriberStreamCut``).

        Returns:
            True (publishing the same cut again is accepted).

        Raises:
            StreamNotFoundError: no such stream.
            SubscriberNotFoundError: the subscriber is not subscribed to the stream.
            GenerationMismatchError: ``generation`` is not the subscriber's current generation.
            InvalidStreamCutError: the cut is not a valid cut of the stream.
            StreamCutBehindError: the cut is behind the subscriber's previous cut.
        """
        self._check_subscriber(subscriber, generation)
        record = self._settled(scope, stream)
        if not isinstance(stream_cut, StreamCut) or stream_cut.is_unbounded:
            raise InvalidStreamCutError(f"a subscriber publishes a bounded StreamCut, got {stream_cut!r}")
        records = self._store.segment_records(scope, stream)
        self._check_cuts(record, records, [stream_cut])

        def attempt() -> bool:
            found = self._store.subscriber(scope, stream, subscriber)
            if found is None:
                raise SubscriberNotFoundError(f"{subscriber} is not a subscriber of {record.scoped_name}")
            stored_generation, previous = found
            if stored_generation != generation:
                raise GenerationMismatchError(
                    f"{subscriber} of {record.scoped_name} is at generation {stored_generation}, not {generation}")
            if previous and not stream_cut_equal_or_after(stream_cut, StreamCut(record.scoped_name, previous), records):
                raise StreamCutBehindError(
                    f"{stream_cut!r} is behind {subscriber}'s previous cut {StreamCut(record.scoped_name, previous)!r}")
            if not self._store.compare_and_set_subscriber_cut(scope, stream, subscriber, generation, previous,
                                                              stream_cut.positions):
                raise _delta.Retry("subscriber changed meanwhile")
            return True

        return _delta.retrying(attempt, f"update cut of {subscriber} on {scope}/{stream}")

    def subscribers(self, scope: str, stream: str) -> DataFrame:
        """The stream's subscribers: ``subscriber, generation, stream_cut, update_time``."""
        self._stream(scope, stream)
        return self._store.subscribers(scope, stream)

    def retention_set(self, scope: str, stream: str) -> DataFrame:
        """The stream's retention set: ``recording_time, recording_size, stream_cut`` (text)."""
        self._stream(scope, stream)
        return self._store.retention_set(scope, stream).orderBy("recording_time")

    @staticmethod
    def _check_subscriber(subscriber: str, generation: int) -> None:
        if not isinstance(subscriber, str) or not subscriber:
            raise InvalidConfigError(f"a subscriber is a non-empty string, got {subscriber!r}")
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise InvalidConfigError(f"a generation is an int, got {generation!r}")

    # ---- reading -----------------------------------------------------------------------------
    def read_events(self, scope: str, stream: str, start: CutOrName = "earliest",
                    end: CutOrName = "latest") -> DataFrame:
        """The events between two cuts, as a batch DataFrame.

        Columns: ``scope, stream, segment_id, offset, event, routing_key, writer_id, write_time``.
        Per routing key, ordering by ``(segment_id, offset)`` is append order. With ``end="latest"``
        the DataFrame is pinned to the events table's version at the call, so it does not grow
        when evaluated again; between two cuts the data is immutable anyway.

        Raises:
            TruncatedDataError: ``start`` is before the stream's head.
            InvalidStreamCutError: a cut is invalid or ``end`` is before ``start``.
        """
        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        version = None
        if "latest" in (start, end) or any(isinstance(c, StreamCut) and c.is_unbounded for c in (start, end)):
            version = self._store.events_version(scope, stream)
        resolve = self._cut_resolver(record, records, version)
        start_cut, end_cut = resolve(start), resolve(end)
        # bounds before the boundary probe: the data below the head is gone
        self._check_cuts(record, records, [c for c in (start, end) if isinstance(c, StreamCut)],
                         before_probe=lambda: reader.check_read_bounds(start_cut, end_cut,
                                                                       self._head(record, records), records))
        ranges = reader.segment_ranges(start_cut, end_cut, records)
        if version is not None and (end == "latest" or (isinstance(end, StreamCut) and end.is_unbounded)):
            ranges = reader.open_ended_at_tail(ranges, end_cut)  # the events are read at the tail's version
        events = self._store.events(scope, stream, version).transform(reader.filter_segment_ranges, ranges=ranges)
        # chunk assembly costs a second scan of the range: only when a large event may be in it
        # (the data between two cuts never changes; with "latest", ``version`` is pinned)
        if self._store.may_hold_chunks(scope, stream, [r.segment_id for r in ranges], version):
            events = events.transform(assemble_large_events)
        return events.transform(reader.select_read_columns, scope=scope, stream=stream)

    def read_stream(self, scope: str, stream: str, start: CutOrName = "earliest", reader_group=None,
                    max_bytes_per_trigger: int | str | None = None,
                    max_files_per_trigger: int | None = None) -> DataFrame:
        """The stream's events as a Structured Streaming DataFrame, with ``read_events``' columns.

        Built on Delta's streaming source over the events table: with ``writeStream`` and a
        checkpoint location every event is delivered exactly once across restarts (Spark's offset
        log; use ``ps.idempotent_delta_sink`` with ``foreachBatch`` for an exactly-once Delta
        sink). Per routing key, a micro-batch never holds an event appended after one that a later
        micro-batch holds; within a micro-batch ``(segment_id, offset)`` order is append order.
        Control records and staged data (open transactions, uncommitted large events) never
        appear; a large event arrives whole. A truncation below the query's position never fails
        it; events truncated before the query read them are skipped with a warning (it resumes at
        the head); data files vacuumed away make the query fail, and it must be restarted with a
        new checkpoint location.

        Args:
            scope: the stream's scope.
            stream: the stream.
            start: ``"earliest"`` (the head), ``"latest"`` (the tail when the query starts) or a
                ``StreamCut`` of the stream. Used only by a new query: a restarted one continues
                from its checkpoint.
            reader_group: a reader group (name or handle) of ``scope`` that reads this stream and
                whose retention type is not NONE: after each committed micro-batch its subscriber
                cut becomes the position the query reached, so ``run_retention`` can truncate
                behind the query.
            max_bytes_per_trigger: rate limit (Delta's soft ``maxBytesPerTrigger``: a micro-batch
                takes whole data files until it holds this many bytes; ``"64m"`` works too).
                Per-key order holds across the batches it makes.
            max_files_per_trigger: rate limit in data files per micro-batch.

        Raises:
            InvalidStreamCutError: ``start`` is not a cut of this stream.
            TruncatedDataError: ``start`` is before the stream's head.
            InvalidConfigError: a bad rate limit, or ``reader_group`` does not fit.
        """
        from . import streaming

        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        options = streaming.source_options(max_bytes_per_trigger, max_files_per_trigger)
        group = self._streaming_group(record, reader_group)
        if start == "latest":
            # the tail now, as a version that exists (Delta refuses a future one) and holds
            # nothing: an empty commit. A restarted query goes on from its checkpoint instead.
            version = self._store.empty_events_commit(scope, stream)
            options["startingVersion"] = str(version)
            start_cut = self._tail(record, records, version)
        else:
            version = self._store.events_version(scope, stream)
            start_cut = self._cut_resolver(record, records)(start)
            if isinstance(start, StreamCut):
                self._check_cuts(record, records, [start], before_probe=lambda: reader.check_read_bounds(
                    start_cut, start_cut, self._head(record, records), records))
        path = self._store.events_path(scope, stream)
        raw = self.spark.readStream.format("delta").options(**options).load(path)
        events = raw.transform(streaming.readable_events)
        if isinstance(start, StreamCut):  # "earliest" is the head, which ``above_head`` keeps up to date
            events = events.transform(streaming.from_start, cut=start_cut, records=records)
        plain = not record.truncation or '"head"' in record.truncation
        head = streaming.head_map(self._store.streams(), stream_key(scope, stream), plain)
        # after the chunks' branch is joined again: one head lookup and one metric per batch
        source = streaming._Source(self, scope, stream, start_cut, group, path, uuid.uuid4().hex[:12], version + 1)
        events = (events.transform(streaming.assemble_chunks)
                  .transform(streaming.above_head, head=head, name=source.metric))
        streaming.StreamListener.install(self.spark).register(source)
        log.info("read_stream %s from %s%s", record.scoped_name, start if isinstance(start, str) else start_cut,
                 f", publishing for reader group {group}" if group else "")
        return events.transform(reader.select_read_columns, scope=scope, stream=stream)

    def stream_progress(self, query, timeout_seconds: float = 30.0):  # -> streaming.StreamProgress | None
        """Where a ``read_stream`` query is: its stream cut after the last committed micro-batch
        and the bytes from there to the tail (``StreamProgress``), or None before its first batch.
        Display it in a notebook to watch the lag.

        It first waits (up to ``timeout_seconds``) until the session's listeners have handled the
        query's progress so far (Spark delivers it asynchronously): on return, with a
        ``reader_group``, the cut returned is the group's published subscriber cut. Call it after
        ``query.awaitTermination()`` of an ``availableNow`` run before running retention.

        Raises:
            SkippedEventsError: the query was stopped because its source skipped events.
        """
        from . import streaming

        _delta.wait_for_listeners(self.spark, timeout_seconds)
        progress = query.lastProgress
        if progress is None:
            return None
        for source, src, _ in streaming.StreamListener.install(self.spark).sources_in(progress):
            if source.failure is not None:
                raise source.failure
            cut = streaming.cut_for_offset(source, streaming.DeltaOffset.from_json(streaming._field(src, "endOffset")))
            unread = self.size_between(source.scope, source.stream, cut, "latest")
            return streaming.StreamProgress(f"{source.scope}/{source.stream}", streaming._field(progress, "batchId"), cut, unread)
        return None

    def _streaming_group(self, record: StreamRecord, reader_group) -> str | None:
        """The scoped name of the reader group a ``read_stream`` publishes for (validated)."""
        from .reader_group import ReaderGroup
        from .reader_group_config import StreamDataRetention

        if reader_group is None:
            return None
        if isinstance(reader_group, ReaderGroup):
            if reader_group.scope != record.scope:
                raise InvalidConfigError(f"{reader_group!r} is not a group of scope {record.scope}")
            handle = reader_group
        elif isinstance(reader_group, str):
            handle = self.reader_group(record.scope, reader_group)
        else:
            raise InvalidConfigError(f"reader_group must be a group name or ReaderGroup, got {reader_group!r}")
        if handle.config.retention_type is StreamDataRetention.NONE:
            raise InvalidConfigError(f"{handle!r} has retention type NONE: it publishes no cut")
        if record.scoped_name not in handle.config.scoped_streams:
            raise InvalidConfigError(f"{handle!r} does not read {record.scoped_name}")
        return handle.scoped_name

    def _cut_at_version(self, scope: str, stream: str, version: int) -> StreamCut:
        """The stream's tail as of events-table version ``version``, from the log: each segment
        that was open then (its predecessors sealed, itself not) at its length, and the sealed
        segments of a sealed stream at theirs."""
        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        gone = set()
        if record.truncation:
            truncation = TruncationRecord.from_json(record.truncation)
            gone = set(truncation.deleted_segments) | set(truncation.to_delete)
        tails = self._store.segment_tails(scope, stream, [r.segment_id for r in records if r.segment_id not in gone],
                                          version)

        def closed(sid: int) -> bool:
            return sid in gone or tails[sid].sealed

        positions = {}
        for r in records:
            if r.segment_id in gone or not all(closed(p) for p in predecessors(records, r.segment_id)):
                continue
            if tails[r.segment_id].sealed and r.sealed_epoch is not None:
                continue
            positions[r.segment_id] = tails[r.segment_id].length
        cut = StreamCut(record.scoped_name, positions)
        head = self._head(record, records)
        return cut if stream_cut_equal_or_after(cut, head, records) else head

    def _later_cut(self, scope: str, stream: str, cut: StreamCut, other: StreamCut) -> StreamCut:
        """``cut`` unless it is before ``other``."""
        records = self._store.segment_records(scope, stream)
        return cut if stream_cut_equal_or_after(cut, other, records) else other

    # ---- writers -----------------------------------------------------------------------------
    def create_event_writer(self, scope: str, stream: str, writer_id: str | None = None,
                            **options):  # -> EventStreamWriter
        """A writer appending to the stream (see ``EventStreamWriter``)."""
        from .writer import EventStreamWriter

        self._stream(scope, stream)
        return EventStreamWriter(self, scope, stream, writer_id, **options)

    # ---- reader groups -----------------------------------------------------------------------
    def create_reader_group(self, scope: str, group: str, config) -> bool:
        """Create reader group ``group`` in ``scope`` (Pravega's ``ReaderGroupManager.
        createReaderGroup``): one commit of its row, its streams' start cuts (``"earliest"``:
        the head now; ``"latest"``: the tail now) as unassigned segments. Streams of other
        scopes may be read too.

        Returns:
            False if a group of that name exists (nothing changes).

        Raises:
            InvalidConfigError: ``config`` is not a ``ReaderGroupConfig``.
            ScopeNotFoundError / StreamNotFoundError: the scope or a stream does not exist.
        """
        from .reader_group import group_row, initial_state, subscribe
        from .reader_group_config import ReaderGroupConfig

        scope, group = validate_scope_name(scope), validate_reader_group_name(group)
        if not isinstance(config, ReaderGroupConfig):
            raise InvalidConfigError(f"config must be a ReaderGroupConfig, got {type(config).__name__}")
        if not self._store.scope_exists(scope):
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        if self._store.reader_group_row(scope, group) is not None:
            return False
        state = initial_state(self, config)  # checks that every stream exists
        row = group_row(scope, group, config, state, 0, utc_now())
        created = self._store.update_reader_group(scope, group, lambda found: row if found is None else None,
                                                  f"create reader group {scope}/{group}")
        if created:
            log.info("created reader group %s/%s reading %s", scope, group, config.scoped_streams)
            # then its subscriptions (a crash in between: the group subscribes before publishing)
            subscribe(self, scope, group, config, 0)
        return created

    def reader_group(self, scope: str, group: str):  # -> ReaderGroup
        """A handle on reader group ``group`` of ``scope``.

        Raises:
            ReaderGroupNotFoundError: no such group.
        """
        from .reader_group import ReaderGroup

        scope, group = validate_scope_name(scope), validate_reader_group_name(group)
        row = self._store.reader_group_row(scope, group)
        if row is None:
            raise ReaderGroupNotFoundError(f"reader group {scope}/{group} does not exist")
        return ReaderGroup(self, scope, group, row)

    def delete_reader_group(self, scope: str, group: str) -> bool:
        """Delete the group: its subscriptions (if a subscriber), then its row (one commit).
        False if it did not exist."""
        from .reader_group import unsubscribe
        from .reader_group_config import ReaderGroupConfig

        scope, group = validate_scope_name(scope), validate_reader_group_name(group)
        row = self._store.reader_group_row(scope, group)
        if row is None:
            return False
        # unsubscribe first (a crash in between leaves the group, and a retry finishes)
        unsubscribe(self, scope, group, ReaderGroupConfig.from_json(row["configuration"]), int(row["generation"]))
        return self._store.update_reader_group(scope, group, lambda found: {} if found is not None else None,
                                               f"delete reader group {scope}/{group}")

    def list_reader_groups(self, scope: str) -> DataFrame:
        """The scope's reader groups: ``scope, reader_group, configuration, generation,
        creation_time, update_time``."""
        scope = validate_scope_name(scope)
        return (self._store.reader_groups().where(F.col("scope") == scope)
                .select("scope", "reader_group", "configuration", "generation", "creation_time", "update_time"))

    def create_transactional_writer(self, scope: str, stream: str, writer_id: str | None = None):
        """A writer of transactions on the stream (see ``transactions.TransactionalEventStreamWriter``).

        Example:
            >>> txn = manager.create_transactional_writer("iot", "sensors", "ingest-1").begin_txn()  # doctest: +SKIP
            >>> txn.write_events(df); txn.commit()  # doctest: +SKIP
        """
        from .transactions import TransactionalEventStreamWriter

        self._stream(scope, stream)
        return TransactionalEventStreamWriter(self, scope, stream, writer_id)

    def transactions(self, scope: str, stream: str, now: datetime | None = None) -> DataFrame:
        """The stream's transactions (as recorded in its events table's log) with their status
        as of ``now``: ``txn_id, status, lease_expiry, decision_time, max_execution_expiry,
        last_updated, timed_out`` (an expired lease not yet aborted by the timeout job)."""
        from .transactions import TRANSACTIONS_DDL, _now_ms, transaction_states

        self._stream(scope, stream)
        txn = _delta.Transaction(self.spark, self._store.events_path(scope, stream))
        rows = [tuple(s.values()) for s in transaction_states(txn, _now_ms(now))]
        return self.spark.createDataFrame(rows, TRANSACTIONS_DDL)

    def abort_timed_out_transactions(self, now: datetime | None = None, scope: str | None = None,
                                     stream: str | None = None) -> dict[str, list[str]]:
        """Abort every transaction whose lease expired by ``now`` (default: the wall clock) and
        remove its staged events (what ``jobs/transactions.py`` runs). Safe to run concurrently
        with commits: a transaction ends either committed or aborted.

        Returns:
            ``{"scope/stream": [aborted txn ids]}`` for the streams where something was aborted.
        """
        from .transactions import _now_ms, abort_timed_out

        now_ms = _now_ms(None if now is None else _as_utc(now))
        out = {}
        for s, t in self._stream_names(scope, stream):
            path = self._store.events_path(s, t)
            try:
                aborted = abort_timed_out(lambda p=path: _delta.Transaction(self.spark, p), s, t, now_ms,
                                          self.spark, path)
            except Exception as exc:  # noqa: BLE001 - a stream deleted meanwhile is skipped
                if _delta.is_table(self.spark, path):
                    raise
                log.info("transactions of %s/%s: stream gone (%s)", s, t, type(exc).__name__)
                continue
            if aborted:
                out[f"{s}/{t}"] = aborted
        return out

    # ---- large events ------------------------------------------------------------------------
    def open_event(self, pointer, window_chunks: int | None = None):  # -> LargeEventReader
        """A readable binary file streaming one event (large or not) chunk by chunk.

        Args:
            pointer: an ``EventPointer``, its text form, or a ``read_events`` row (scope, stream,
                segment_id, offset).
            window_chunks: chunks fetched per Spark job (default: 32 MiB worth, 4 default
                chunks). The Python process holds one window (as an Arrow table).

        Example:
            >>> row = manager.read_events("iot", "cams").select("scope", "stream", "segment_id", "offset").first()  # doctest: +SKIP
            >>> with manager.open_event(row) as event:  # doctest: +SKIP
            ...     shutil.copyfileobj(event, out_file)

        Raises:
            NoSuchEventError: no complete event starts there.
            TruncatedDataError: the pointer is below the stream's head.
        """
        from .large_events import EventPointer, LargeEventReader

        if isinstance(pointer, str):
            pointer = EventPointer.from_text(pointer)
        elif not isinstance(pointer, EventPointer):
            pointer = EventPointer.from_row(pointer)
        scope, stream = pointer.scope_and_stream
        self._settled(scope, stream)
        return LargeEventReader(self, pointer, window_chunks)

    def transient_data(self, scope: str, stream: str) -> DataFrame:
        """The large events being written (staged, not committed or aborted yet): one row per
        transient id with its writer, routing key, chunks, bytes and first/last staging time."""
        self._stream(scope, stream)
        path = self._store.ensure_transient_table(scope, stream)
        return (_delta.read(self.spark, path).groupBy("transient_id", "writer_id", "routing_key")
                .agg(F.count(F.lit(1)).alias("chunks"), F.sum("size").alias("bytes"),
                     F.min("stage_time").alias("first_staged"), F.max("stage_time").alias("last_staged")))

    def clean_transient_data(self, scope: str | None = None, stream: str | None = None,
                             now: datetime | None = None, idle_timeout: timedelta | None = None) -> dict:
        """Abort the large events nobody staged a chunk of for ``idle_timeout`` (default 10
        minutes) and remove their staged data (what ``jobs/large_events.py`` runs). Safe against a
        concurrent commit of the same event: it ends either committed or aborted.

        Returns:
            ``{"scope/stream": TransientCleanup}`` for the streams where something was removed.
        """
        from .large_events import DEFAULT_IDLE_TIMEOUT, clean_transient

        if idle_timeout is not None and (not isinstance(idle_timeout, timedelta) or idle_timeout < timedelta(0)):
            raise InvalidConfigError(f"idle_timeout must be a non-negative timedelta, got {idle_timeout!r}")
        now = _as_utc(now) if now is not None else datetime.now(timezone.utc)
        out = {}
        for s, t in self._stream_names(scope, stream):
            done = clean_transient(self, s, t, now, idle_timeout or DEFAULT_IDLE_TIMEOUT)
            if done.removed:
                log.info("transient data of %s/%s: %d large events removed (%d aborted), %d files, %d bytes",
                         s, t, len(done.removed), len(done.aborted), done.files, done.bytes)
                out[f"{s}/{t}"] = done
        return out

    # ---- watermarks --------------------------------------------------------------------------
    def compute_watermarks(self, scope: str | None = None, stream: str | None = None,
                           now: datetime | None = None) -> dict:
        """One round of Pravega's periodic watermarking on each stream (what
        ``jobs/watermarks.py`` runs); all time comparisons use ``now`` (default: the wall clock).

        Returns:
            ``{"scope/stream": Watermark}`` for the streams where a watermark was emitted.
        """
        from .watermarks import compute_round

        now = _as_utc(now) if now is not None else datetime.now(timezone.utc)
        out = {}
        for s, t in self._stream_names(scope, stream):
            try:
                watermark = compute_round(self, s, t, now)
            except StreamNotFoundError:
                continue
            if watermark is not None:
                out[f"{s}/{t}"] = watermark
        return out

    def watermarks(self, scope: str, stream: str) -> DataFrame:
        """The stream's emitted watermarks, oldest first: ``lower_time_bound, upper_time_bound,
        stream_cut`` (text form, see ``StreamCut.from_text``), ``emit_time``."""
        from .watermarks import watermarks_df

        self._stream(scope, stream)
        return watermarks_df(self, scope, stream)

    def writer_marks(self, scope: str, stream: str) -> list:
        """Each writer's latest noted time and position (``watermarks.WriterMark``)."""
        from .watermarks import writer_marks

        self._stream(scope, stream)
        return writer_marks(self, scope, stream)

    def time_window(self, scope: str, stream: str, position: StreamCut):
        """The time window of a reader at ``position`` (Pravega's ``getCurrentTimeWindow``):
        ``TimeWindow(lower_time_bound, upper_time_bound)``, None where unknown."""
        from .watermarks import time_window, watermark_list

        record = self._settled(scope, stream)
        records = self._store.segment_records(scope, stream)
        cut = self.validate_stream_cut(scope, stream, position) if position is not None else None
        return time_window(cut or self._tail(record, records), watermark_list(self, scope, stream), records)

    # ---- data quality ------------------------------------------------------------------------
    def validate_stream(self, scope: str, stream: str) -> StreamValidation:
        """Check the stream's stored invariants with Great Expectations suites.

        One suite per prepared table (segments, epochs, events, stream cuts), one expectation per
        invariant (``pravega_spark.validation.INVARIANTS``): every epoch covers ``[0, 1)``, ids
        follow Pravega's encoding, sealed segments have covering successors, offsets are contiguous
        and unique from the head with Pravega's framing, large events are complete, nothing lies
        beyond a seal or below the head, staged data stays hidden, the head matches the truncation
        record and is at or before the tail, subscriber cuts are valid and not behind the head, the
        retention set increases and watermarks are monotone. A workflow a crashed process left
        half-done is completed first, as the next operation on the stream would. Needs the
        ``quality`` extra (great-expectations).

        Returns:
            ``StreamValidation``: ``success``, ``results`` (``(expectation, success, details)``),
            ``counts`` (rows checked by kind), ``to_df(spark)`` and ``to_html(folder)``.

        Example:
            >>> result = manager.validate_stream("iot", "sensors")  # doctest: +SKIP
            >>> result.success, result.counts["event"]  # doctest: +SKIP
            (True, 1000)
        """
        from .validation import validate_stream

        return validate_stream(self, scope, stream)

    # ---- maintenance -------------------------------------------------------------------------
    def compact(self, scope: str, stream: str, segment_ids: Sequence[int] | None = None,
                target_file_size: int | None = None):
        """Rewrite each segment's runs of small consecutive files into larger ones, offsets
        unchanged (Delta's ``OPTIMIZE`` cannot: every file has its own base offset).

        One ``dataChange=false`` commit, safe against concurrent appends (they add above the runs),
        truncations (one of the two retries) and readers (who keep their snapshot). The replaced
        files leave storage at the next ``vacuum``.

        Args:
            segment_ids: only these segments (default: all).
            target_file_size: bytes a rewritten file aims at (default 128 MiB); files under half
                of it are small.

        Returns:
            A ``CompactionResult`` (its commit version, runs, files removed and added, bytes).
        """
        from .compaction import DEFAULT_TARGET_FILE_SIZE, compact

        self._stream(scope, stream)
        size = DEFAULT_TARGET_FILE_SIZE if target_file_size is None else target_file_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
            raise InvalidConfigError(f"target_file_size must be an int of at least 1024 bytes, got {size!r}")
        result = compact(self.spark, self._store.events_path(scope, stream), segment_ids, size)
        log.info("compact %s/%s: %r", scope, stream, result)
        return result

    def vacuum(self, scope: str | None = None, stream: str | None = None,
               retention: timedelta | None = None) -> list[str]:
        """VACUUM the stream tables (all, a scope's, or one stream's); returns the tables vacuumed.

        ``retention`` defaults to the tables' own deleted-file retention; ``timedelta(0)`` removes
        deleted files now, which breaks readers of older table versions (time travel).

        Staged data (an open transaction's files, a large event's chunks) is written before any
        table references it, so it looks like an orphan to VACUUM. While a stream has any, its
        events table is vacuumed with a retention that covers the oldest of them (one hour more),
        so they are never removed; they go with their abort, or with a later VACUUM.
        """
        streams = self._store.streams()
        if scope is not None:
            streams = streams.where(F.col("scope") == validate_scope_name(scope))
        if stream is not None:
            streams = streams.where(F.col("stream") == validate_stream_name(stream))
        hours = None if retention is None else retention.total_seconds() / 3600
        done = []
        for row in streams.select("scope", "stream").collect():
            for path in (self._store.segments_path(row[0], row[1]), self._store.events_path(row[0], row[1]),
                         self._store.retention_set_path(row[0], row[1]), self._store.subscribers_path(row[0], row[1]),
                         self._store.transient_path(row[0], row[1]), *_watermark_paths(self, row[0], row[1])):
                if not _delta.is_table(self.spark, path):
                    continue  # created on first use (transient, watermarks)
                if path == self._store.events_path(row[0], row[1]):
                    staged = self._staged_age_hours(row[0], row[1])
                    if staged is not None and (hours if hours is not None else DEFAULT_FILE_RETENTION_HOURS) < staged + 1:
                        log.info("vacuum of %s/%s: retention raised to %.1f h to keep staged data", row[0], row[1], staged + 1)
                        _delta.vacuum(self.spark, path, staged + 1)
                        done.append(path)
                        continue
                _delta.vacuum(self.spark, path, hours)
                done.append(path)
        log.info("vacuum: %d tables", len(done))
        return done

    # ---- internals ---------------------------------------------------------------------------
    def _staged_age_hours(self, scope: str, stream: str) -> float | None:
        """Hours since the oldest staged data of the stream was written (transaction manifests,
        large-event manifests: each is committed right after its data files; an open
        transaction's writes that its handle has not flushed yet: no later than its begin, at
        most ``MAX_EXECUTION_TIME`` before its max execution expiry), or None."""
        from .transactions import MAX_EXECUTION_TIME, transaction_states

        events = _delta.Transaction(self.spark, self._store.events_path(scope, stream))
        times = [int(f.modificationTime()) for f in events.files_where(f"{EVENTS_PARTITION} < 0")]
        now_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
        times += [int(s["max_execution_expiry"].timestamp() * 1000) - int(MAX_EXECUTION_TIME.total_seconds() * 1000)
                  for s in transaction_states(events, now_ms) if s["status"] == "OPEN"]
        transient = self._store.transient_path(scope, stream)
        if _delta.is_table(self.spark, transient):
            times += [int(f.modificationTime()) for f in _delta.Transaction(self.spark, transient).files_where(None)]
        if not times:
            return None
        return max(0.0, (datetime.now(timezone.utc).timestamp() * 1000 - min(times)) / 3_600_000)

    def _stream_names(self, scope: str | None, stream: str | None) -> list[tuple[str, str]]:
        rows = self._store.streams()
        if scope is not None:
            rows = rows.where(F.col("scope") == validate_scope_name(scope))
        if stream is not None:
            rows = rows.where(F.col("stream") == validate_stream_name(stream))
        return sorted((r["scope"], r["stream"]) for r in rows.select("scope", "stream").collect())

    def _stream(self, scope: str, stream: str) -> StreamRecord:
        validate_scope_name(scope)
        validate_stream_name(stream)
        record = self._store.stream_record(scope, stream)
        if record is None:
            raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
        return record

    def _settled(self, scope: str, stream: str) -> StreamRecord:
        """The stream's record after finishing any workflow a crashed process left half-done
        (except a truncation's deletes: reads are bounded by the head it already moved)."""
        return self._recover(self._stream(scope, stream), finish_truncation=False)

    def _active_stream(self, scope: str, stream: str) -> StreamRecord:
        """The stream's record once no scale or seal is pending (appends go on during a
        truncation, which only deletes below the tail); raises if it is sealed."""
        record = self._recover(self._stream(scope, stream), finish_truncation=False)
        if record.state in (SEALING, SEALED):
            raise StreamSealedError(f"stream {record.scoped_name} is sealed")
        return record

    def _recover(self, record: StreamRecord, finish_truncation: bool = True) -> StreamRecord:
        """Finish a workflow a crashed (or concurrent) process left half-done."""
        if record.state == TRUNCATING and finish_truncation:
            log.info("completing pending truncation of %s", record.scoped_name)
            return self._finish_truncation(record)[0]
        if record.state == CREATING:
            return self._finish_create(record)
        if record.state == SCALING and record.pending_scale:
            log.info("completing pending scale of %s", record.scoped_name)
            return self._finish_scale(record)
        if record.state == SEALING:
            log.info("completing pending seal of %s", record.scoped_name)
            return self._finish_seal(record)
        return record

    def _start(self, scope: str, stream: str, state: str, **changes) -> StreamRecord:
        record = self._recover(self._stream(scope, stream))
        new = record.transition(state, utc_now(), **changes)
        if not self._store.compare_and_set_stream(record, new):
            raise _delta.Retry("stream row changed")
        return new

    def _set_state(self, record: StreamRecord, state: str, **changes) -> StreamRecord:
        """Move ``record`` to ``state``; if someone else already did, return their record."""

        def attempt() -> StreamRecord:
            latest = self._stream(record.scope, record.stream)
            if latest.row_version != record.row_version:
                if latest.state != record.state or latest.pending_scale != record.pending_scale:
                    return latest  # another process finished this workflow
                raise _delta.Retry("stream row changed")
            new = latest.transition(state, utc_now(), **changes)
            if not self._store.compare_and_set_stream(latest, new):
                raise _delta.Retry("stream row changed")
            return new

        return _delta.retrying(attempt, f"{state} {record.scoped_name}")

    def _head(self, record: StreamRecord, records: Sequence[SegmentRecord]) -> StreamCut:
        if record.head_stream_cut:
            return StreamCut.from_text(record.head_stream_cut)
        return head_of_stream(records, record.scoped_name)

    def _tail(self, record: StreamRecord, records: Sequence[SegmentRecord],
              version: int | None = None) -> StreamCut:
        current = epoch_members(records, record.current_epoch)
        if record.state == SEALED:
            return tail_cut(record.scoped_name, records, {s.segment_id: s.sealed_size or 0 for s in current})
        tails = self._store.segment_tails(record.scope, record.stream,
                                          [s.segment_id for s in current], version)
        return tail_cut(record.scoped_name, records, {sid: t.length for sid, t in tails.items()})

    def _cut_resolver(self, record: StreamRecord, records: Sequence[SegmentRecord],
                      version: int | None = None, tail: StreamCut | None = None):
        """A function mapping "earliest" / "latest" / a StreamCut to a StreamCut (tail read lazily)."""
        cache = {"tail": tail}

        def latest() -> StreamCut:
            if cache["tail"] is None:
                cache["tail"] = self._tail(record, records, version)
            return cache["tail"]

        def resolve(cut: CutOrName) -> StreamCut:
            if isinstance(cut, str):
                if cut == "earliest":
                    return self._head(record, records)
                if cut == "latest":
                    return latest()
                raise InvalidStreamCutError(f"a cut is a StreamCut, 'earliest' or 'latest', got {cut!r}")
            if not isinstance(cut, StreamCut):
                raise InvalidStreamCutError(
                    f"a cut is a StreamCut, 'earliest' or 'latest', got {type(cut).__name__}")
            return latest() if cut.is_unbounded else cut

        return resolve

    def _check_cuts(self, record: StreamRecord, records: Sequence[SegmentRecord],
                    cuts: Sequence[StreamCut], before_probe=None) -> None:
        """Validate cuts against the stream: their structure, then ``before_probe()`` (if given),
        then one query checking every offset is an event boundary (which also bounds it by the
        segment's length)."""
        cuts = [c for c in cuts if not c.is_unbounded]
        for cut in cuts:
            if cut.stream != record.scoped_name:
                raise InvalidStreamCutError(f"cut of {cut.stream} used with stream {record.scoped_name}")
            validate_stream_cut(cut, records, None)
        if before_probe is not None:
            before_probe()
        if not cuts:
            return
        known = self._store.known_boundaries(record.scope, record.stream)
        wanted = {pos for cut in cuts for pos in cut.positions.items()} - known
        # the events DataFrame only when a position needs the probe (building it costs ~50 ms)
        events = self._store.events(record.scope, record.stream) if any(o > 0 for _, o in wanted) else None
        boundary = reader.event_boundary_checker(events, wanted)
        for cut in cuts:
            validate_stream_cut(cut, records, None,
                                is_event_boundary=lambda s, o: (s, o) in known or boundary(s, o))
        known.update(pos for cut in cuts for pos in cut.positions.items())
