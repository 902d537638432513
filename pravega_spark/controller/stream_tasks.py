"""The controller's stream workflows (Pravega's ``StreamMetadataTasks`` with one request handler
per workflow: ``CreateStreamTask``, ``UpdateStreamTask``, ``SealStreamTask``,
``DeleteStreamTask``, ``ScaleOperationTask``, ``TruncateStreamTask``).

A workflow of several commits records its progress in the stream's row first (its state, and the
scale or truncation it is making), so that whoever touches the stream next finishes it: the roll
forward of ``recover``. Each function's docstring lists its commits in order and its crash rule.
Every commit of a finishing step is idempotent, so two processes finishing the same workflow at
once end in the same state.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .. import _delta
from .._failpoints import failpoint
from ..errors import (
    InvalidScaleError,
    InvalidStreamCutError,
    RetriesExhaustedError,
    ScaleConflictError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    StreamNotFoundError,
    StreamNotSealedError,
    StreamSealedError,
    WorkflowPendingError,
)
from ..store.clock import utc_now
from ..store.store import Store
from ..stream.config import StreamConfiguration
from ..stream.cut_algorithms import stream_cut_equal_or_after
from ..stream.names import validate_scope_name, validate_stream_name
from ..stream.record import (
    ACTIVE,
    CREATING,
    SCALING,
    SEALED,
    SEALING,
    TRUNCATING,
    UPDATING,
    StreamRecord,
)
from ..stream.scaling import EpochTransition, apply_transition, plan_scale, scale_up_to
from ..stream.segments import SegmentRecord, active_segments, epoch_members, initial_segments
from ..stream.stream_cut import StreamCut
from ..stream.truncation import TruncationRecord, compute_truncation_record, partial_truncations
from . import stream_cut_helper

log = logging.getLogger("pravega_spark")

T = TypeVar("T")


# ---- reading a stream's row --------------------------------------------------------------------
def existing_stream(store: Store, scope: str, stream: str) -> StreamRecord:
    """The stream's row as stored (a workflow may be pending).

    Raises:
        InvalidNameError: a bad scope or stream name.
        StreamNotFoundError: no such stream.
    """
    validate_scope_name(scope)
    validate_stream_name(stream)
    record = store.stream_record(scope, stream)
    if record is None:
        raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
    return record


def recover(store: Store, record: StreamRecord, finish_truncation: bool = True) -> StreamRecord:
    """Finish the workflow a crashed (or concurrent) process left half-done; the row after it.
    A truncation's deletes are finished only with ``finish_truncation`` (reads are bounded by the
    head it already moved)."""
    if record.state == TRUNCATING and finish_truncation:
        log.info("completing pending truncation of %s", record.scoped_name)
        return complete_truncation(store, record)[0]
    if record.state == CREATING:
        return _finish_create(store, record)
    if record.state == SCALING and record.pending_scale:
        log.info("completing pending scale of %s", record.scoped_name)
        return _finish_scale(store, record)
    if record.state == SEALING:
        log.info("completing pending seal of %s", record.scoped_name)
        return _finish_seal(store, record)
    if record.state == UPDATING:
        log.info("completing pending update of %s", record.scoped_name)
        return _finish_update(store, record)
    return record


def settled(store: Store, scope: str, stream: str) -> StreamRecord:
    """The stream's row after finishing any pending workflow except a truncation's deletes."""
    return recover(store, existing_stream(store, scope, stream), finish_truncation=False)


def settled_with_segments(store: Store, scope: str, stream: str) -> tuple[StreamRecord, list[SegmentRecord]]:
    """``settled`` and the stream's segment records, from one read of its row (the records are
    part of it); read again if a pending workflow had to be finished first.

    Raises:
        InvalidNameError: a bad scope or stream name.
        StreamNotFoundError: no such stream.
    """
    validate_scope_name(scope)
    validate_stream_name(stream)
    record, records = store.stream_record_and_segments(scope, stream)
    if record is None:
        raise StreamNotFoundError(f"stream {scope}/{stream} does not exist")
    done = recover(store, record, finish_truncation=False)
    if done is not record:
        records = store.segment_records(scope, stream)
    return done, records


def active_stream(store: Store, scope: str, stream: str) -> StreamRecord:
    """The stream's row once no scale or seal is pending (appends go on during a truncation,
    which only deletes below the tail).

    Raises:
        StreamSealedError: the stream is sealed.
    """
    record = settled(store, scope, stream)
    if record.state in (SEALING, SEALED):
        raise StreamSealedError(f"stream {record.scoped_name} is sealed")
    return record


def active_with_segments(store: Store, scope: str, stream: str) -> tuple[StreamRecord, list[SegmentRecord]]:
    """``active_stream`` and its segment records (``settled_with_segments``)."""
    record, records = settled_with_segments(store, scope, stream)
    if record.state in (SEALING, SEALED):
        raise StreamSealedError(f"stream {record.scoped_name} is sealed")
    return record, records


def _start(store: Store, scope: str, stream: str, state: str, **changes) -> StreamRecord:
    record = recover(store, existing_stream(store, scope, stream))
    new = record.transition(state, utc_now(), **changes)
    if not store.compare_and_set_stream(record, new):
        raise _delta.Retry("stream row changed")
    return new


def _set_state(store: Store, record: StreamRecord, state: str, segments: Sequence[SegmentRecord] = (),
               **changes) -> StreamRecord:
    """Move ``record`` to ``state`` (its segments taking ``segments``, in the same commit); if
    someone else already did, return their row."""

    def attempt() -> StreamRecord:
        latest = existing_stream(store, record.scope, record.stream)
        if latest.row_version != record.row_version:
            if latest.state != record.state or latest.pending_scale != record.pending_scale:
                return latest  # another process finished this workflow
            raise _delta.Retry("stream row changed")
        new = latest.transition(state, utc_now(), **changes)
        if not store.compare_and_set_stream(latest, new, segments):
            raise _delta.Retry("stream row changed")
        return new

    return _delta.retrying(attempt, f"{state} {record.scoped_name}")


def _finishing(record: StreamRecord, what: str, finish: Callable[[], T]) -> T:
    """``finish()``, the commits after a workflow's first; if they keep losing to concurrent
    writers, say so truthfully: the workflow is pending (the row records it), not undone."""
    try:
        return finish()
    except RetriesExhaustedError as exc:
        raise WorkflowPendingError(
            f"{what} of {record.scoped_name} started (the stream is {record.state}) but its next commits kept "
            f"conflicting with concurrent writers: it is pending, not undone, and the next operation on the "
            f"stream completes it ({exc})") from exc


# ---- scopes ------------------------------------------------------------------------------------
def delete_scope(store: Store, scope: str) -> bool:
    """Delete an empty scope; False if it did not exist.

    Commits: (1) the scope's deletion mark in the streams table, in a transaction that read the
    whole table and found no stream of the scope (so a concurrent ``create_stream`` either lands
    first and is seen, or conflicts with the mark and fails with ``ScopeNotFoundError``); (2) the
    scope's row removed. A crash in between leaves a scope that takes no new stream; the next
    ``delete_scope`` finishes it.

    Raises:
        ScopeNotEmptyError: the scope still has streams or key-value tables.
    """
    validate_scope_name(scope)
    created = store.scope_creation_time(scope)
    if created is None:
        return False
    if not _delta.retrying(lambda: store.mark_scope_deleted(scope, created), f"delete scope {scope}"):
        raise ScopeNotEmptyError(f"scope {scope} still has streams or key-value tables; delete them first")
    failpoint("delete_scope:after_mark")
    store.delete_scope_row(scope)
    log.info("delete_scope %s", scope)
    return True


# ---- create ------------------------------------------------------------------------------------
def create_stream(store: Store, scope: str, stream: str, config: StreamConfiguration) -> bool:
    """Create a stream with ``config.scaling_policy.min_num_segments`` equal segments.

    Commits: (1) the stream's row in CREATING, holding its epoch-0 segments; (2) its empty
    events table; (3) the row to ACTIVE. A crash after (1) is finished by the next
    ``create_stream`` or any other operation on the stream.

    Returns:
        True if this call created the stream, False if it already existed.

    The insert is fenced against a concurrent ``delete_scope`` (``Store.insert_stream``): of
    the two, exactly one succeeds, so no stream is left in a deleted scope.

    Raises:
        ScopeNotFoundError: the scope does not exist (or was deleted meanwhile).
    """
    scope_created = store.scope_creation_time(scope)
    if scope_created is None:
        raise ScopeNotFoundError(f"scope {scope} does not exist")
    now = utc_now()
    record = StreamRecord(scope, stream, CREATING, config, 0, None, None, now, now, 0)
    initial = initial_segments(config.scaling_policy.min_num_segments, now)
    if not _delta.retrying(lambda: store.insert_stream(record, scope_created, initial), f"create {scope}/{stream}"):
        existing = store.stream_record(scope, stream)
        if existing is not None and existing.state == CREATING:
            _finish_create(store, existing)
        return False
    failpoint("create:after_row")
    _finish_create(store, record)
    log.info("create_stream %s/%s with %d segments", scope, stream, config.scaling_policy.min_num_segments)
    return True


def _finish_create(store: Store, record: StreamRecord) -> StreamRecord:
    store.create_stream_tables(record.scope, record.stream)
    failpoint("create:after_events")
    return _set_state(store, record, ACTIVE)


# ---- update ------------------------------------------------------------------------------------
def update_stream(store: Store, scope: str, stream: str, config: StreamConfiguration) -> bool:
    """Replace the stream's configuration (policies, tags), scaling up when the new
    ``min_num_segments`` exceeds the open segments (Pravega's ``UpdateStreamTask``).

    Commits: (1) the row ACTIVE -> UPDATING with the new configuration and, if a scale-up is
    needed, its epoch transition (``scaling.scale_up_to``: the widest segments split evenly);
    then, with a scale-up, (2) seal records closing the split segments; (3) the row -> ACTIVE
    (with the new epoch and segments). A crash after (1) is finished by the next operation on the
    stream: the configuration is in force from (1) on.

    Raises:
        StreamSealedError: the stream is sealed.
    """

    def attempt() -> StreamRecord:
        current = recover(store, existing_stream(store, scope, stream))
        if current.state in (SEALING, SEALED):
            raise StreamSealedError(f"stream {current.scoped_name} is sealed")
        plan = None
        records = store.segment_records(scope, stream)
        sealed, ranges = scale_up_to(epoch_members(records, current.current_epoch),
                                     config.scaling_policy.min_num_segments)
        if sealed:
            plan = plan_scale(records, sealed, ranges, config.scaling_policy.min_num_segments, utc_now(),
                              _epoch_time(records, current.current_epoch)).to_json()
        started = current.transition(UPDATING, utc_now(), configuration=config, pending_scale=plan)
        if not store.compare_and_set_stream(current, started):
            raise _delta.Retry("stream row changed")
        return started

    started = _delta.retrying(attempt, f"update {scope}/{stream}")
    failpoint("update:after_start")
    done = _finishing(started, "update", lambda: _finish_update(store, started))
    log.info("update_stream %s/%s: %s%s", scope, stream, config,
             f", scaled up to epoch {done.current_epoch}" if started.pending_scale else "")
    return True


def _finish_update(store: Store, record: StreamRecord) -> StreamRecord:
    if record.pending_scale:
        return _finish_scale(store, record)  # back to ACTIVE with the new epoch
    return _set_state(store, record, ACTIVE)


def _epoch_time(records, epoch: int):
    """The creation time of ``epoch`` (its newest segment's), or None."""
    return max((s.creation_time for s in epoch_members(records, epoch)
                if s.creation_epoch == epoch and s.creation_time), default=None)


# ---- seal --------------------------------------------------------------------------------------
def seal_stream(store: Store, scope: str, stream: str) -> bool:
    """Seal every open segment; later writes raise ``StreamSealedError``.

    Commits: (1) the row to SEALING; (2) a seal record closing each open segment (fenced against
    appends); (3) the row to SEALED, its segments taking their sealed sizes. A crash in between
    is finished by the next operation on the stream. Sealing a sealed stream returns True.
    """
    record = recover(store, existing_stream(store, scope, stream))
    if record.state != SEALED:
        if record.state != SEALING:
            record = _delta.retrying(lambda: _start(store, scope, stream, SEALING), f"seal {scope}/{stream}")
        failpoint("seal:after_start")
        _finishing(record, "seal", lambda: _finish_seal(store, record))
    log.info("seal_stream %s/%s", scope, stream)
    return True


def _finish_seal(store: Store, record: StreamRecord) -> StreamRecord:
    records = store.segment_records(record.scope, record.stream)
    open_ids = [s.segment_id for s in active_segments(records)]
    sizes = store.seal_segments(record.scope, record.stream, open_ids)
    return _set_state(store, record, SEALED, [
        SegmentRecord(s.segment_id, s.key_start, s.key_end, s.creation_time, None, sizes[s.segment_id])
        for s in active_segments(records)])


# ---- delete ------------------------------------------------------------------------------------
def delete_stream(store: Store, scope: str, stream: str) -> bool:
    """Delete a sealed stream and remove its tables' data from storage.

    Commits: the stream's directory is removed, then its rows in the shard tables (one DELETE
    per table holding some), then its row. A crash in between leaves a SEALED row, which the
    next ``delete_stream`` finishes.

    Returns:
        False if the stream did not exist.

    Raises:
        StreamNotSealedError: the stream is not sealed.
    """
    validate_scope_name(scope)
    validate_stream_name(stream)
    record = store.stream_record(scope, stream)
    if record is None:
        return False
    record = recover(store, record)
    if record.state != SEALED:
        raise StreamNotSealedError(f"stream {record.scoped_name} is {record.state}; seal it first")
    removed = store.remove_stream_tables(scope, stream)
    failpoint("delete:after_data")
    store.delete_shard_rows(scope, stream)
    failpoint("delete:after_rows")
    _delta.retrying(lambda: store.delete_stream_row(scope, stream), f"delete {scope}/{stream}")
    log.info("delete_stream %s/%s (data removed: %s)", scope, stream, removed)
    return True


# ---- scale -------------------------------------------------------------------------------------
def scale_arguments(sealed, ranges) -> tuple[list[int], list[tuple[float, float]]]:
    """``scale_stream``'s arguments checked and normalized: sorted distinct segment ids, and
    ``(low, high)`` pairs of floats (``InvalidScaleError`` naming the argument otherwise)."""
    ids = None if isinstance(sealed, (str, bytes)) or not isinstance(sealed, Iterable) else list(sealed)
    if ids is None or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in ids):
        raise InvalidScaleError(f"sealed_segments must be segment ids (ints), got {sealed!r}")
    pairs = None if isinstance(ranges, (str, bytes)) or not isinstance(ranges, Iterable) else list(ranges)
    if pairs is None or not all(isinstance(r, (tuple, list)) and len(r) == 2 and all(
            isinstance(x, numbers.Real) and not isinstance(x, bool) for x in r) for r in pairs):
        raise InvalidScaleError(f"new_key_ranges must be (low, high) pairs of numbers, got {ranges!r}")
    return sorted({int(s) for s in ids}), [(float(lo), float(hi)) for lo, hi in pairs]


def scale_stream(store: Store, scope: str, stream: str, sealed: Iterable[int],
                 ranges: Iterable[tuple[float, float]]) -> int:
    """Seal ``sealed`` and replace them with segments over ``ranges``; the new epoch.

    Validated as Pravega's ``submitScale``. Commits: (1) the row ACTIVE -> SCALING with the epoch
    transition record; (2) seal records closing the sealed segments (fenced against appends,
    whose writers then move to the successors); (3) the row SCALING -> ACTIVE with the new epoch
    and its segments: sealed epochs and sizes plus the new ones. (2)-(3) are idempotent: a crash
    after (1) is finished by the next operation on the stream. Of two
    concurrent scales exactly one wins; the same scale submitted twice is made once.

    Raises:
        InvalidScaleError, ScalePreconditionError: see ``scaling.plan_scale``.
        ScaleConflictError: a different scale of the stream is in progress.
        StreamSealedError: the stream is sealed.
    """
    sealed, ranges = scale_arguments(sealed, ranges)

    def attempt() -> StreamRecord:
        record = recover(store, existing_stream(store, scope, stream))
        if record.state in (SEALING, SEALED):
            raise StreamSealedError(f"stream {record.scoped_name} is sealed")
        records = store.segment_records(scope, stream)
        plan = plan_scale(records, sealed, ranges, record.configuration.scaling_policy.min_num_segments,
                          utc_now(), _epoch_time(records, record.current_epoch))
        started = record.transition(SCALING, utc_now(), pending_scale=plan.to_json())
        if store.compare_and_set_stream(record, started):
            return started
        latest = existing_stream(store, scope, stream)
        if latest.state == SCALING and latest.pending_scale:
            other = EpochTransition.from_json(latest.pending_scale)
            if (other.sealed_segments == tuple(sealed)
                    and [(r.key_start, r.key_end) for r in other.new_segments] == ranges):
                return latest  # same scale submitted twice: idempotent
            raise ScaleConflictError(f"another scale of {record.scoped_name} is in progress: {other!r}")
        raise _delta.Retry("stream row changed")

    started = _delta.retrying(attempt, f"scale {scope}/{stream}")
    failpoint("scale:after_start")
    done = _finishing(started, "scale", lambda: _finish_scale(store, started))
    log.info("scale_stream %s/%s: sealed %s -> epoch %d", scope, stream, sealed, done.current_epoch)
    return done.current_epoch


def _finish_scale(store: Store, record: StreamRecord) -> StreamRecord:
    transition = EpochTransition.from_json(record.pending_scale)
    sizes = store.seal_segments(record.scope, record.stream, transition.sealed_segments)
    failpoint("scale:after_seal")
    records = store.segment_records(record.scope, record.stream)
    touched = []
    if not any(r.segment_id == transition.new_segments[0].segment_id for r in records):
        changed = apply_transition(records, transition, sizes)
        ids = set(transition.sealed_segments) | {s.segment_id for s in transition.new_segments}
        touched = [r for r in changed if r.segment_id in ids]
    return _set_state(store, record, ACTIVE, touched, current_epoch=transition.new_epoch, pending_scale=None)


# ---- truncate ----------------------------------------------------------------------------------
def truncate_stream(store: Store, scope: str, stream: str, stream_cut: StreamCut) -> bool:
    """Move the stream's head to ``stream_cut`` and delete the data before it.

    Commits: (1) the row ACTIVE -> TRUNCATING with the new head and truncation record (from here
    on reads below the head raise ``TruncatedDataError``); (2) a TRUNCATE record at each open cut
    segment's new start; (3) DELETE of the whole segments; (4) DELETE of the records below the
    cut's offsets; (5) the row -> ACTIVE with the record completed. (2)-(5) are idempotent: a crash
    after (1) is finished by the next state change of the stream (scale, seal, update, truncate)
    or retention run. Appends go on during the truncation. Truncating at the current head changes
    nothing.

    Raises:
        InvalidStreamCutError: the cut is invalid or not equal to or after the current head.
        StreamSealedError: the stream is sealed.
    """
    if not isinstance(stream_cut, StreamCut) or stream_cut.is_unbounded:
        raise InvalidStreamCutError(f"stream_cut must be a bounded StreamCut, got {stream_cut!r}")

    def attempt() -> StreamRecord | None:
        record = recover(store, existing_stream(store, scope, stream))
        if record.state in (SEALING, SEALED):
            raise StreamSealedError(f"stream {record.scoped_name} is sealed")
        records = store.segment_records(scope, stream)
        previous = stream_cut_helper.truncation(record, records)
        if stream_cut.stream != record.scoped_name:
            raise InvalidStreamCutError(f"cut of {stream_cut.stream} used with stream {record.scoped_name}")
        if previous.stream_cut == stream_cut:
            return None
        if not stream_cut_equal_or_after(stream_cut, previous.stream_cut, records):
            raise InvalidStreamCutError(f"cannot truncate at {stream_cut!r}: it is not equal to or after the "
                                        f"current head {previous.stream_cut!r}")
        stream_cut_helper.check_cuts(store, record, records, [stream_cut])
        lengths = stream_cut_helper.tail(store, record, records).positions
        truncation = compute_truncation_record(previous, stream_cut, records, lengths)
        started = record.transition(TRUNCATING, utc_now(), head_stream_cut=stream_cut.as_text(),
                                    truncation=truncation.to_json())
        if not store.compare_and_set_stream(record, started):
            raise _delta.Retry("stream row changed")
        return started

    started = _delta.retrying(attempt, f"truncate {scope}/{stream}")
    if started is None:
        log.info("truncate_stream %s/%s: already at %r", scope, stream, stream_cut)
        return True
    failpoint("truncate:after_start")
    _finishing(started, "truncation", lambda: complete_truncation(store, started))
    return True


def complete_truncation(store: Store, record: StreamRecord) -> tuple[StreamRecord, dict]:
    """Commits (2)-(5) of ``truncate_stream``; the new row and what was deleted."""
    truncation = TruncationRecord.from_json(record.truncation)
    open_ids = {s.segment_id for s in active_segments(store.segment_records(record.scope, record.stream))}
    starts = partial_truncations(truncation)
    store.mark_truncation_starts(record.scope, record.stream, {s: o for s, o in starts.items() if s in open_ids})
    failpoint("truncate:after_marks")
    whole = store.delete_segments(record.scope, record.stream, truncation.to_delete)
    failpoint("truncate:after_segments")
    rows = store.delete_below(record.scope, record.stream, starts)
    failpoint("truncate:after_rows")
    done = _set_state(store, record, ACTIVE, truncation=truncation.completed().to_json())
    report = {"head": truncation.stream_cut, "segments_deleted": list(truncation.to_delete),
              "size_till": truncation.size_till,
              "files_removed": whole.get("numRemovedFiles") + rows.get("numRemovedFiles"),
              "files_rewritten": whole.get("numAddedFiles") + rows.get("numAddedFiles"),
              "versions": [v for v in (whole.version, rows.version) if v is not None]}
    log.info("truncate_stream %s: head %r, deleted segments %s, rows below the head deleted in %s, "
             "%d bytes truncated in total, files removed %d / rewritten %d (events versions %s)",
             record.scoped_name, truncation.stream_cut, list(truncation.to_delete), sorted(starts),
             truncation.size_till, report["files_removed"], report["files_rewritten"], report["versions"])
    return done, report
