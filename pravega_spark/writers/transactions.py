"""Transactions: Pravega's ``TransactionalEventStreamWriter`` and ``Transaction``.

A transaction lives in its stream's events table, so that every one of its steps is one Delta
commit and every decision is fenced by Delta itself:

- **Staged events** are data files written once, by the same one-pass write as an append (routed
  to the current epoch's segments, offsets relative to each write task's extent), but not added
  to the table. As in Pravega, a handle buffers its writes until ``flush()`` or ``commit()``:
  ``flush()`` commits a *manifest* of them: one row per staged file (its add action as JSON,
  ``record_type = STAGED``) in a partition of the transaction's own (its *staging partition*, a
  negative ``segment_id`` derived from the transaction id: Pravega's transaction segment), which
  every handle's commit includes. Readers read only real segments, so nothing staged is visible.
- **The state** is an application version in the events table's log (Delta's ``SetTransaction``,
  app id ``pravega-txn/<txn_id>``): ``lease_expiry_ms << 2 | state``. Every step reads it, so two
  concurrent commits that both change it (commit vs abort, commit vs timeout, ping vs commit) can
  never both succeed: Delta fails the second with ``ConcurrentTransactionException`` and the
  retry sees the first's outcome.
- **Commit** is one commit of the events table that rewrites nothing (Pravega's metadata-only
  merge of a transaction segment): the add actions of the flushed files and of the handle's
  buffered ones, with their base offsets fixed after each segment's tail (in staging order), and
  the COMMITTED state: a pure append. Only files routed to a segment that a scale sealed since
  are read and written again (to its successors). If there were manifests, a second commit
  removes them (``dataChange=false``). **Abort** is one commit: the
  manifests' removal and the ABORTED state; the staged files are then deleted. A decision cannot
  be half-applied, so there is nothing to recover after a crash: a retry sees the outcome
  (COMMITTING and ABORTING are never stored); left-over manifests of a decided transaction are
  removed by the timeout job.
- The maximum execution time (Pravega: ``min(1000 x lease, 1 day)``) is fixed at ``begin_txn`` and
  carried in the transaction id's top 48 bits (Pravega carries the epoch there).

On the public-API backend (``_delta.sql``: no file can be written there without being
committed) a write stages *rows* in the staging partition at once, in one guarded append that also touches
the state (its write mark, a compare-and-set: a decision taken meanwhile fails the write), so
``flush()`` has nothing left to do. The commit is one guarded append that reads the staged rows back,
routes them by the current segments, numbers them from the current tails in staging order, and
sets COMMITTED as a compare-and-set of the state it read; a DELETE of the staging partition
follows. Abort, ping and the timeout job set the state the same way.

A lease that expired makes the transaction ABORTED at once for every reader of its state; the
timeout job (``StreamManager.abort_timed_out_transactions``) then commits the abort and removes the
staged data (physically at the next ``VACUUM``).
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import _delta
from ..controller.client import Controller
from ..errors import (
    InvalidEventError,
    StreamSealedError,
    TxnFailedError,
    TxnNotFoundError,
)
from ..store.clock import from_ms
from ..store.schema import (
    EVENTS_PARTITION,
    EVENTS_PARTITIONS,
    EVENTS_SCHEMA,
    EVENTS_STATS_COLUMNS,
    MARKS_SEGMENT,
    RECORD_STAGED,
)
from .appender import EVENT_INPUT_SCHEMA, WriteResult, pending_file
from .event_writer import EventStreamWriter
from .routing import PendingFile
from .transaction_state import (  # noqa: F401 - re-exported: callers import them from here
    DEFAULT_LEASE,
    MAX_EXECUTION_FACTOR,
    MAX_EXECUTION_TIME,
    MAX_LEASE,
    MIN_LEASE,
    STATE_ABORTED,
    STATE_COMMITTED,
    STATE_OPEN,
    TRANSACTIONS_DDL,
    TXN_APP_PREFIX,
    TxnStatus,
    begin_version,
    check_lease,
    decode_state,
    encode_state,
    epoch_ms,
    max_execution_expiry_ms,
    new_txn_id,
    parse_txn_id,
    ping_expiry,
    staging_partition,
    transaction_states,
)

log = logging.getLogger("pravega_spark")

# Ranks (``routing.place_files``) of the commit's files: flushed files rank by their staging
# version (below 2**40); a handle's buffered files come after them, files routed again last.
UNFLUSHED_RANK = 1 << 61


class _LeaseExpired(Exception):
    pass


# ---- handles -------------------------------------------------------------------------------------
class Transaction:
    """One transaction on a stream (Pravega's ``Transaction``).

    Created by ``TransactionalEventStreamWriter.begin_txn`` or ``get_txn``. Writes are staged
    (invisible to readers); ``commit()`` makes all of them visible in one Delta commit, appended
    contiguously at each segment's tail; ``abort()`` discards them.

    Example:
        >>> txn = manager.create_transactional_writer("iot", "sensors", "ingest-1").begin_txn()  # doctest: +SKIP
        >>> txn.write_events(df, routing_key="device_id", event="payload")  # doctest: +SKIP
        >>> txn.commit()  # doctest: +SKIP
    """

    def __init__(self, writer: TransactionalEventStreamWriter, txn_id: uuid.UUID) -> None:
        self._writer = writer
        self._id = txn_id
        self._app = TXN_APP_PREFIX + str(txn_id)
        self._partition = staging_partition(txn_id)
        self._closed: TxnStatus | None = None  # set once this handle saw the txn decided
        self._unflushed: list[PendingFile] = []  # written by this handle, not yet recorded
        self._writes = 0  # this handle's writes so far: orders its buffered files
        self._rank = 0  # the public-API backend's rank of this handle's latest staged write


    @classmethod
    def resumed(cls, writer: TransactionalEventStreamWriter, txn_id: uuid.UUID) -> Transaction:
        """A handle on an existing transaction: closed at once if it is committed already.

        Raises:
            TxnNotFoundError: no such transaction on the writer's stream.
        """
        handle = cls(writer, txn_id)
        if handle.check_status() is TxnStatus.COMMITTED:
            handle._closed = TxnStatus.COMMITTED
        return handle

    @property
    def app_id(self) -> str:
        """The Delta application id that records this transaction's state in the events table."""
        return self._app
    def __repr__(self) -> str:
        return f"Transaction({self._writer.scoped_name}, txn_id={self.txn_id!r})"

    @property
    def txn_id(self) -> str:
        return str(self._id)

    @property
    def max_execution_expiry(self) -> datetime:
        """When the transaction can no longer be pinged (fixed at ``begin_txn``)."""
        return from_ms(max_execution_expiry_ms(self._id))

    # ---- writes ------------------------------------------------------------------------------
    def write_event(self, event: bytes | bytearray | str, routing_key: str | None = None) -> int:
        """Stage one event (``str`` is UTF-8 encoded); see ``write_events``."""
        df = _delta.local_frame(self._writer._appender.session, [(routing_key, _as_bytes(event))],
                                EVENT_INPUT_SCHEMA, arrow=True)
        return self.write_events(df)

    def write_events(self, df: DataFrame, routing_key: str = "routing_key", event: str = "event",
                     order_by: str | list[str] | None = None) -> int:
        """Write every row of ``df`` as an event of this transaction (invisible until committed).

        As in Pravega, the events are buffered by this handle until ``flush()`` or ``commit()``:
        the data files are written now (one Spark job, routed to the current segments), and
        recorded in the stream by the next ``flush()`` (then other handles of the transaction,
        in any process, see them) or by this handle's ``commit()``, which adds them without a
        commit of their own. Events of a handle that is never flushed nor committed are lost
        with it, and the transaction times out. Per routing key, the transaction's events are
        committed in the order they were written (this call's rows in ``order_by`` order, else
        the DataFrame's own order); events written through different handles have no order
        among themselves.

        Returns:
            The number of events written.

        Raises:
            TxnFailedError: the transaction is committed, aborted or its lease expired.
            EventTooLargeError: an event exceeds 8 MiB (nothing is written).
        """
        self._check_handle_open()
        appender = self._writer._appender
        if not appender.places_files:
            return self._stage_rows(df, routing_key, event, order_by)
        files_of = appender.files_of(appender.routed(df, routing_key, event, order_by))

        def attempt() -> list[PendingFile]:
            txn = appender.transaction()
            self._require_open(txn)
            segments, _ = appender.open_segments_settling(txn)  # finishes a pending scale
            return files_of(txn, segments)

        files = _delta.retrying(attempt, f"write to {self!r}", appender.retry)
        self._writes += 1
        self._unflushed += [PendingFile(f.segment_id, (UNFLUSHED_RANK, self._writes, *f.rank[1:]), f.low, f.high,
                                        f.num_records, f.entry) for f in files]
        count = sum(f.num_records for f in files)
        log.info("%r wrote %d events in %d files (buffered until flush or commit)", self, count, len(files))
        return count

    def flush(self) -> None:
        """Record this handle's buffered events in the stream (one Delta commit of their
        manifest), so that a commit through any handle, in any process, includes them
        (Pravega's ``Transaction.flush``). A no-op when nothing is buffered.

        Raises:
            TxnFailedError: the transaction is committed, aborted or its lease expired.
        """
        self._check_handle_open()
        if self._unflushed:
            _delta.retrying(self._stage, f"flush {self!r}", self._writer._appender.retry)
            self._unflushed = []

    def _stage(self) -> int:
        """Commit the manifest of the buffered files: one row per file, in this handle's order."""
        txn = self._writer._transaction()
        self._require_open(txn)
        now = datetime.now(timezone.utc)
        manifest = [(self._partition, txn.read_version, txn.read_version, rank, f.rank[1], RECORD_STAGED, None,
                     f.entry.to_json().encode(), self._writer.writer_id, now, None)
                    for rank, f in enumerate(self._unflushed)]
        version = txn.commit(txn.write_rows(manifest, EVENTS_SCHEMA, EVENTS_PARTITIONS, EVENTS_STATS_COLUMNS),
                             EVENTS_PARTITIONS)
        count = sum(f.num_records for f in self._unflushed)
        log.info("%r flushed %d events in %d files at version %d", self, count, len(self._unflushed), version)
        return count

    def _stage_rows(self, df: DataFrame, routing_key: str, event: str, order_by) -> int:
        """The public-API backend's staged write (no file can be written there without being
        committed): the events become rows of the staging partition at once, in one guarded append that
        also touches the transaction's state, so a concurrent commit, abort or ping fails one of
        the two (``TxnFailedError`` here if the transaction was decided). Nothing stays buffered:
        ``flush()`` has nothing to do."""
        appender = self._writer._appender
        names = [order_by] if isinstance(order_by, str) else list(order_by or [])
        events = appender.prepare(df, routing_key, event, order_by)
        self._writes += 1
        self._rank = max(self._rank + 1, epoch_ms() << 12)

        def guard(txn: _delta.TableTransaction) -> list:
            self._require_open(txn)
            return [txn.set_app_version(self._app, txn.app_version(self._app))]

        count = appender.stage_rows(events, names, self._partition, self._rank, guard)
        log.info("%r staged %d events", self, count)
        return count

    # ---- state -------------------------------------------------------------------------------
    def check_status(self) -> TxnStatus:
        """The transaction's status now (ABORTED once its lease expired, even before the
        timeout job ran)."""
        return self._status(self._writer._transaction())[0]

    def ping(self, lease: timedelta = DEFAULT_LEASE) -> TxnStatus:
        """Extend the lease to ``now + lease`` (Pravega's ``pingTxn``).

        Returns:
            OPEN when extended; COMMITTED or ABORTED (unchanged) for a decided transaction.

        Raises:
            InvalidConfigError: ``lease`` outside [10 s, 600 s] (Pravega: LEASE_TOO_LARGE).
            PingFailedError: ``now + lease`` passes the max execution time
                (Pravega: MAX_EXECUTION_TIME_EXCEEDED); the lease is unchanged.
        """
        lease_ms = check_lease(lease)

        def attempt() -> TxnStatus:
            txn = self._writer._transaction()
            status, _ = self._status(txn)
            if status is not TxnStatus.OPEN:
                return status
            expiry = ping_expiry(epoch_ms(), lease_ms, max_execution_expiry_ms(self._id))
            txn.commit(None, (), [txn.set_app_version(self._app, encode_state(STATE_OPEN, expiry))])
            return TxnStatus.OPEN

        return _delta.retrying(attempt, f"ping {self!r}")

    def commit(self, timestamp: datetime | None = None) -> WriteResult:
        """Make every event of the transaction visible, atomically: one Delta commit adds the
        files written by this handle (buffered or flushed) and by flushed writes of other
        handles, at the current segments' tails (contiguously per segment). It writes no data,
        unless a scale sealed a segment some files were routed to (those are routed again).
        Flushed writes' manifests are then removed in a commit of their own.

        A second commit of a committed transaction is a no-op (``event_count == 0``).
        ``timestamp`` (optional) is noted as the writer's time at the commit's position, for
        watermarks (Pravega's ``commit(timestamp)``).

        Raises:
            TxnFailedError: the transaction was aborted, its lease expired (it is aborted now),
                the stream is sealed, or another handle committed it without this handle's
                buffered events.
        """
        if self._closed is TxnStatus.COMMITTED:
            # a process stopped between the commit and its clean-up leaves the manifests
            self._remove_staging()
            return WriteResult(0, 0, None, self._writer._controller.tail_stream_cut(
                self._writer.scope, self._writer.stream))
        self._check_handle_open()
        appender = self._writer._appender
        if not appender.places_files:
            return self._commit_rows(timestamp)
        manifests: list = []

        def guard(txn: _delta.TableTransaction):
            if self._committed_already(txn):
                if self._unflushed:
                    raise TxnFailedError(f"{self!r} was committed by another handle without the "
                                         f"{sum(f.num_records for f in self._unflushed)} events this handle "
                                         "did not flush")
                return None
            manifests[:] = self._staged_files(txn)
            return [txn.set_app_version(self._app, encode_state(STATE_COMMITTED, epoch_ms()))]

        result = self._run_commit(lambda: appender.attempt(self._staged_files_of(manifests), guard))
        self._unflushed = []
        if manifests:  # their clean-up: a commit of its own, so that the commit above is a pure append
            self._remove_staging()
        self._closed = TxnStatus.COMMITTED
        log.info("%r committed: %d events, %d bytes at version %s", self, result.event_count,
                 result.byte_count, result.version)
        if timestamp is not None:
            self._writer._events.note_time(timestamp)
        return result

    def _committed_already(self, txn: _delta.TableTransaction) -> bool:
        """For a commit's guard: True when the transaction is committed already.

        Raises:
            TxnFailedError: it was aborted.
            _LeaseExpired: its lease expired and nobody aborted it yet.
        """
        status, _ = self._status(txn)
        if status is TxnStatus.ABORTED:
            raise _LeaseExpired() if self._expired_open(txn) else TxnFailedError(
                f"{self!r} was aborted; it cannot be committed")
        return status is TxnStatus.COMMITTED

    def _run_commit(self, attempt) -> WriteResult:
        """``attempt()`` under the writer's retries, its failures as Pravega reports them: an
        expired lease aborts the transaction, a sealed stream refuses it (``TxnFailedError``)."""
        try:
            return self._writer._appender.retrying(attempt, f"commit {self!r}")
        except _LeaseExpired:
            self._abort()
            raise TxnFailedError(f"{self!r}: its lease expired, it was aborted; it cannot be committed") from None
        except StreamSealedError as exc:
            raise TxnFailedError(f"{self!r} cannot be committed: {exc}") from None

    def _commit_rows(self, timestamp: datetime | None) -> WriteResult:
        """The public-API backend's commit: one guarded append inserts the staged rows at the tails
        current then (routed by the current segments, in staging order per key) and sets the
        state COMMITTED, compared with the state read (a staged write since changes it, so none
        can be left out); then the staging partition is deleted (a commit of its own)."""
        appender = self._writer._appender
        backend = appender.backend
        path = appender.store.events_path(self._writer.scope, self._writer.stream)

        def guard(txn: _delta.TableTransaction):
            if self._committed_already(txn):
                return None
            return [txn.set_app_version(self._app, encode_state(STATE_COMMITTED, epoch_ms()))]

        def staged() -> DataFrame:
            return (backend.read(path).where(F.col(EVENTS_PARTITION) == self._partition)
                    .select("routing_key", "event", F.col("base_offset").alias("__write"),
                            F.col("rel_offset").alias("__seq")))

        result = self._run_commit(lambda: appender.attempt_at_tails(staged, ["__write"], None, guard))
        self._remove_staging()
        self._closed = TxnStatus.COMMITTED
        log.info("%r committed: %d events, %d bytes", self, result.event_count, result.byte_count)
        if timestamp is not None:
            self._writer._events.note_time(timestamp)
        return result

    def _remove_staging(self) -> None:
        """Remove the staging partition's manifests (files placed by hand) or rows (the
        public-API backend); safe to repeat."""
        appender = self._writer._appender
        if appender.places_files:
            remove_manifests(self._writer._transaction, [self._partition])
        else:
            remove_staged_rows(appender.backend, appender.store.events_path(self._writer.scope, self._writer.stream),
                               [self._partition])

    def _staged_files_of(self, manifests: list):
        """``files_of(txn, segments)`` for ``Appender.attempt``: the staged files listed
        by ``manifests`` (filled by the commit's guard), in staging order, then this handle's
        buffered files in the order it wrote them. Files routed to a
        segment that is no longer open (a scale sealed it) are read and written again, routed to
        the current segments, once per commit call."""
        rewritten: dict = {}

        def files_of(txn: _delta.TableTransaction, segments) -> list[PendingFile]:
            staged = staged_pending_files(txn, manifests) + self._unflushed
            open_ids = {seg.segment_id for seg in segments}
            kept = [f for f in staged if f.segment_id in open_ids]
            moved = [f for f in staged if f.segment_id not in open_ids]
            if not moved:
                return kept
            key = tuple(sorted(f.entry.path for f in moved))
            if rewritten.get("key") != key or any(f.segment_id not in open_ids for f in rewritten["files"]):
                log.info("%r: %d staged files were routed to sealed segments: routing them again", self, len(moved))
                rows = staged_rows(txn, moved)
                files = self._writer._appender.write_with_spark(txn, rows, segments)
                rewritten.update(key=key, files=[PendingFile(f.segment_id, (1 << 62, *f.rank), f.low, f.high,
                                                             f.num_records, f.entry) for f in files])
            return kept + rewritten["files"]

        return files_of

    def abort(self) -> None:
        """Discard the staged events (one Delta commit); a no-op if already aborted.

        Raises:
            TxnFailedError: the transaction is committed.
        """
        self._abort()

    def _abort(self) -> None:
        places_files = self._writer._appender.places_files

        def attempt() -> bool:
            txn = self._writer._transaction()
            status, _ = self._status(txn)
            if status is TxnStatus.COMMITTED:
                raise TxnFailedError(f"{self!r} is committed; it cannot be aborted")
            if status is TxnStatus.ABORTED and not self._expired_open(txn):
                return False
            if not places_files:  # the decision, then the staged rows go (a commit of its own)
                txn.commit(None, (), [txn.set_app_version(self._app, encode_state(STATE_ABORTED, epoch_ms()))])
                return True
            files = self._staged_files(txn)
            aborted[:] = staged_data_paths(txn, files) + [f.entry.path for f in self._unflushed]
            txn.commit(None, (), manifest_removals(files) + [txn.set_app_version(self._app, encode_state(STATE_ABORTED, epoch_ms()))])
            return True

        aborted: list[str] = []
        decided = _delta.retrying(attempt, f"abort {self!r}")
        if not places_files:  # also after an abort elsewhere whose clean-up did not follow
            self._remove_staging()
            log.info("%r aborted (staged rows deleted)", self)
        elif decided:
            appender = self._writer._appender
            deleted = _delta.backend_for(appender.session).delete_files(appender.store.events_path(
                self._writer.scope, self._writer.stream), aborted)
            log.info("%r aborted (%d staged files deleted)", self, deleted)
        self._unflushed = []
        self._closed = TxnStatus.ABORTED

    def _staged_files(self, txn: _delta.TableTransaction) -> list:
        """The staging partition's files in ``txn``'s snapshot, which ``txn`` now depends on (a
        concurrent staged write makes it fail). Replayed from the JSON log since the begin
        version (no Spark job); from the snapshot's file list if that log is gone."""
        start = begin_version(self._id)
        listed = None if start is None else txn.partition_files_since(EVENTS_PARTITION, [self._partition], start)
        if listed is None:
            return txn.files_in(EVENTS_PARTITION, [self._partition])
        txn.fence_partitions(EVENTS_PARTITION, [self._partition])
        return listed[0]

    def _status(self, txn: _delta.TableTransaction) -> tuple[TxnStatus, int]:
        status, ms = decode_state(txn.app_version(self._app), epoch_ms())
        if status is TxnStatus.UNKNOWN:
            raise TxnNotFoundError(f"{self!r} is unknown (never begun, or forgotten after Delta's "
                                   "application-version retention)")
        return status, ms

    def _expired_open(self, txn: _delta.TableTransaction) -> bool:
        """Whether the stored state is OPEN (an expired lease, not yet aborted by anyone)."""
        return (txn.app_version(self._app) & 3) == STATE_OPEN

    def _require_open(self, txn: _delta.TableTransaction) -> None:
        status, _ = self._status(txn)
        if status is not TxnStatus.OPEN:
            if status is TxnStatus.ABORTED and self._expired_open(txn):
                raise TxnFailedError(f"{self!r}: its lease expired; it cannot be written to")
            self._closed = status
            raise TxnFailedError(f"{self!r} is {status.value}; it cannot be written to")

    def _check_handle_open(self) -> None:
        if self._closed is not None:
            raise TxnFailedError(f"{self!r} is {self._closed.value}; the handle is closed")


class TransactionalEventStreamWriter:
    """Begins and resumes transactions on one stream (Pravega's ``TransactionalEventStreamWriter``).

    Created by ``StreamManager.create_transactional_writer``. Committed events carry this
    writer's ``writer_id``.
    """

    def __init__(self, controller: Controller, scope: str, stream: str, writer_id: str | None = None) -> None:
        self._controller = controller
        self._events = EventStreamWriter(controller, scope, stream, writer_id)
        self._appender = self._events.appender
        self.scope = scope
        self.stream = stream
        self.writer_id = self._events.writer_id

    def __repr__(self) -> str:
        return f"TransactionalEventStreamWriter({self.scoped_name}, writer_id={self.writer_id!r})"

    @property
    def scoped_name(self) -> str:
        return f"{self.scope}/{self.stream}"

    def begin_txn(self, lease: timedelta = DEFAULT_LEASE) -> Transaction:
        """Begin a transaction (one Delta commit recording it OPEN until ``now + lease``).

        Raises:
            InvalidConfigError: ``lease`` outside Pravega's bounds [10 s, 600 s].
            StreamSealedError: the stream is sealed.
        """
        lease_ms = check_lease(lease)
        self._controller.active_stream(self.scope, self.stream)
        now = epoch_ms()
        max_expiry = now + min(MAX_EXECUTION_FACTOR * lease_ms, int(MAX_EXECUTION_TIME / timedelta(milliseconds=1)))

        def attempt() -> Transaction:
            txn = self._transaction()
            handle = Transaction(self, uuid.UUID(new_txn_id(max_expiry, txn.read_version)))
            txn.app_version(handle.app_id)
            txn.commit(None, (), [txn.set_app_version(handle.app_id, encode_state(STATE_OPEN, now + lease_ms))])
            return handle

        handle = _delta.retrying(attempt, f"begin a transaction on {self.scoped_name}")
        log.info("%s began %r (lease %s)", self.writer_id, handle, lease)
        return handle

    def get_txn(self, txn_id: str | uuid.UUID) -> Transaction:
        """A handle on an existing transaction (e.g. begun by another process). A decided
        transaction's handle is closed: writes and commits raise ``TxnFailedError`` (a commit of a
        committed one is a no-op).

        Raises:
            TxnNotFoundError: no such transaction on this stream.
        """
        return Transaction.resumed(self, parse_txn_id(txn_id))

    def close(self) -> None:
        self._events.close()

    def _transaction(self) -> _delta.TableTransaction:
        return self._appender.transaction()


def _as_bytes(event) -> bytes:
    if isinstance(event, str):
        return event.encode("utf-8")
    if isinstance(event, (bytes, bytearray)):
        return bytes(event)
    raise InvalidEventError(f"an event is bytes or str, got {type(event).__name__}")


# ---- staged data ---------------------------------------------------------------------------------
def staged_pending_files(txn: _delta.TableTransaction, manifests: list) -> list[PendingFile]:
    """The staged files listed by these manifest files, ranked in staging order: (the staging
    commit's read version, the manifest, the write task)."""
    out = []
    for manifest in manifests:
        for row in txn.rows([manifest]):
            if row["record_type"] != RECORD_STAGED:
                continue
            staged = pending_file(_delta.FileEntry.from_json(bytes(row["event"]).decode()))
            # (the staging version, the manifest, the handle's write, the write task)
            rank = (int(row["base_offset"]), manifest.path, int(row["rel_next_offset"]), *staged.rank[1:])
            out.append(PendingFile(staged.segment_id, rank, staged.low, staged.high, staged.num_records, staged.entry))
    return out


def staged_rows(txn: _delta.TableTransaction, files: list[PendingFile]) -> DataFrame:
    """The events of staged files as ``(routing_key, event)`` rows, globally sorted in staging
    order (file rank, then offset): the input of a write routing them again."""
    ranked = sorted(files, key=lambda f: (f.rank, f.low))
    parts = [txn.read_files([f.entry]).select("routing_key", "event", "rel_offset", F.lit(i).alias("__rank"))
             for i, f in enumerate(ranked)]
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    return rows.orderBy("__rank", "rel_offset").select("routing_key", "event")


def staged_data_paths(txn: _delta.TableTransaction, manifests: list) -> list[str]:
    """The (table-relative) paths of the staged data files these manifests list."""
    return [f.entry.path for f in staged_pending_files(txn, manifests)]


def remove_manifests(txn_factory, partitions: list[int]) -> int:
    """Remove the manifest files of these staging partitions (``dataChange=false``: no event
    changes); returns how many. Safe to repeat and to race."""

    def attempt() -> int:
        txn = txn_factory()
        files = txn.read_files_in(EVENTS_PARTITION, partitions)
        if files:
            txn.commit(None, (), _delta.removals(files, data_change=False))
        return len(files)

    return _delta.retrying(attempt, f"remove staging manifests {partitions}")


def remove_staged_rows(backend, path: str, partitions: list[int]) -> None:
    """Delete the public-API backend's staged rows of these staging partitions (one DELETE on
    partition values: no file is read; safe to repeat and to race)."""
    if partitions:
        backend.delete_partitions(path, EVENTS_PARTITION, sorted(partitions))


def staging_partitions_present(backend, path: str) -> set[int]:
    """The staging partitions that hold rows (the public-API backend): one query that reads only
    the staging partitions' files."""
    rows = (backend.read(path).where((F.col(EVENTS_PARTITION) < 0) & (F.col(EVENTS_PARTITION) > MARKS_SEGMENT))
        .select(EVENTS_PARTITION).distinct().collect())
    return {int(r[0]) for r in rows}


def remove_decided_manifests(txn_factory, now_ms: int) -> int:
    """Remove the manifests that decided transactions left behind (a process stopped between a
    commit and its clean-up); returns how many. Their staged files stay: a committed
    transaction's are its events, an aborted one's are orphans for VACUUM."""
    txn = txn_factory()
    decided = {staging_partition(uuid.UUID(s["txn_id"])) for s in transaction_states(txn, now_ms)
               if s["status"] in ("COMMITTED", "ABORTED") and not s["timed_out"]}
    if not decided:
        return 0
    left = sorted({f.int_partition(EVENTS_PARTITION) for f in txn.files_where(f"{EVENTS_PARTITION} < 0")}
                  & decided)
    return remove_manifests(txn_factory, left) if left else 0


def remove_decided_staging(backend, path: str, now_ms: int) -> int:
    """What decided transactions left staged (a process stopped between a decision and its
    clean-up): manifests where files are placed by hand, staged rows on the public-API backend.
    Returns how many staging partitions (or manifests) were removed."""
    if backend.places_files:
        return remove_decided_manifests(lambda: backend.transaction(path), now_ms)
    decided = {staging_partition(uuid.UUID(s["txn_id"])) for s in transaction_states(backend.transaction(path), now_ms)
               if s["status"] in ("COMMITTED", "ABORTED") and not s["timed_out"]}
    left = staging_partitions_present(backend, path) & decided if decided else set()
    remove_staged_rows(backend, path, sorted(left))
    return len(left)


def manifest_removals(files: list[_delta.FileEntry]) -> list[_delta.Removal]:
    return _delta.removals(files, data_change=False)


def transactions_df(controller: Controller, scope: str, stream: str, now: datetime | None = None) -> DataFrame:
    """``StreamManager.transactions``: the stream's transactions with their status as of ``now``."""
    controller.stream_record(scope, stream)
    txn = controller.store.backend.transaction(controller.store.events_path(scope, stream))
    rows = [tuple(s.values()) for s in transaction_states(txn, epoch_ms(now))]
    return controller.spark.createDataFrame(rows, TRANSACTIONS_DDL)
