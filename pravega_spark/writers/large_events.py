"""Large events (up to 1 GiB): Pravega's large-event writes, on Delta tables.

Pravega writes an event over 8 MiB into a *transient segment*, chunk by chunk, then merges that
segment into the target segment atomically. Here:

- **Staging.** ``EventStreamWriter.stream_event(routing_key)`` returns a ``LargeEventWriter``, a
  writable binary file. It holds at most one chunk (8 MiB by default) in memory: each full chunk is
  written once, as a one-row data file of the events table (under ``events/transient=<id>/``,
  framed relative to the chunk: the event's header before the first chunk), and a manifest row
  naming that file is appended to the stream's ``transient`` table, in a partition of the event's
  own (its *transient id*: Pravega's ``<segment>#transient.<writer>.<id>``). Staged chunks survive
  the process; readers never see them (the events table does not reference them yet).
- **Commit** is one Delta commit of the events table that writes no data (Pravega's merge of a
  transient segment): the chunk files' add actions, placed in the segment that owns the event's
  key *now* (after a scale, the successor) at its tail, contiguously, as one event (one 8-byte
  header, the whole payload's length), and the decision ``pravega-large/<transient id> =
  COMMITTED`` (a Delta application version). Then the manifests are removed from the transient
  table (a second, idempotent commit). An event that stayed within 8 MiB and staged nothing is
  written as a regular event instead.
- **Abort** (``abort()``, ``close()`` without ``commit()``, an oversized event, or the clean-up of
  idle transient data) commits ``ABORTED`` for the transient id in the events table, then removes
  manifests and deletes the staged chunk files. Commit and abort both read the decision, so Delta lets only one of them
  succeed: a commit racing the clean-up either lands whole or fails with ``LargeEventFailedError``.
- **On the public-API backend** (no uncommitted files there), each chunk is staged as a row of
  the event's own partition of the events table (``transient_partition``, below the write marks),
  after its manifest row; the commit is one guarded append that copies those rows to the tail,
  placed by the same rule, with the decision as a compare-and-set (an abort decided meanwhile
  fails it); DELETEs of the staged rows and manifests follow.
- **Reading** is ``readers.large_event_reader``'s: one rule for a complete event, used by batch
  reads, streaming and ``open_event``.

Only the first chunk's offset and the last chunk's end are event boundaries, so stream cuts,
truncation and reads never split a large event.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import _delta
from .._failpoints import failpoint
from ..controller.client import Controller
from ..errors import (
    EventTooLargeError,
    InvalidConfigError,
    LargeEventFailedError,
)
from ..store.clock import as_utc, utc_now
from ..store.schema import (
    EVENTS_PARTITION,
    EVENTS_PARTITIONS,
    EVENTS_SCHEMA,
    EVENTS_STATS_COLUMNS,
    HEADER_SIZE,
    MARKS_SEGMENT,
    MAX_EVENT_SIZE,
    MAX_LARGE_EVENT_SIZE,
    RECORD_CHUNK,
    RECORD_CHUNK_END,
    STREAM_KEY,
    TRANSIENT_PARTITION,
    TRANSIENT_PARTITIONS,
    TRANSIENT_STATS_COLUMNS,
    TRANSIENT_TABLE_SCHEMA,
    UNPLACED,
)
from ..store.shard_store import stream_key
from ..stream.stream_cut import StreamCut
from .appender import WRITER_CONF, Appender, WriteResult
from .routing import key_position

log = logging.getLogger("pravega_spark")

DEFAULT_CHUNK_SIZE = MAX_EVENT_SIZE
MIN_CHUNK_SIZE = 1024
# Pravega deletes a transient segment 30 s after its writer's connection closes; a writer here has
# no connection, so idleness (no chunk staged) is what times it out, with a more generous default.
DEFAULT_IDLE_TIMEOUT = timedelta(minutes=10)

LARGE_APP_PREFIX = "pravega-large/"
STATE_COMMITTED, STATE_ABORTED = 1, 2


# ---- pure: framing of chunk rows, assembly -------------------------------------------------------
def chunk_framing(event_offset: int, position: int, length: int) -> tuple[int, int]:
    """``(offset, next_offset)`` of the chunk holding payload bytes ``[position, position +
    length)`` of a large event starting at ``event_offset``: the event's 8-byte header precedes
    its first chunk's bytes."""
    start = event_offset if position == 0 else event_offset + HEADER_SIZE + position
    return start, event_offset + HEADER_SIZE + position + length


def chunk_row(position: int, chunk: bytes, last: bool, routing_key: str | None, writer_id: str,
              write_time: datetime) -> tuple:
    """The events-table row (``EVENTS_SCHEMA`` order) of one staged chunk, before its commit
    places it: its offsets relative to the event's start, where ``chunk_framing`` puts it (the
    first chunk carries the event's header). Every chunk file of an event gets the event's
    ``[start, end)`` as its ``base_offset``/``end_offset`` at commit, so they share one partition
    directory (a reader of one chunk finds the others beside it) and ``rel_event_offset`` is 0.
    (Events committed before #47 have each chunk at its own base, ``rel_offset`` 0 and
    ``rel_event_offset`` pointing back to the event's start: the same absolute offsets.)"""
    start, end = chunk_framing(0, position, len(chunk))
    return (UNPLACED, UNPLACED, UNPLACED, start, end, RECORD_CHUNK_END if last else RECORD_CHUNK,
            routing_key, chunk, writer_id, write_time, 0)


def transient_app_id(transient_id: str) -> str:
    return LARGE_APP_PREFIX + transient_id


def transient_partition(transient_id: str) -> int:
    """The events-table partition of a large event's staged chunks on the public-API backend:
    below the write marks' (``MARKS_SEGMENT``), so below every transaction's staging partition."""
    return MARKS_SEGMENT - 1 - (int(transient_id, 16) & ((1 << 61) - 1))


def check_chunk_size(chunk_size: int) -> int:
    """A chunk size in ``[MIN_CHUNK_SIZE, MAX_EVENT_SIZE]`` (a chunk row is at most an event)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not (
            MIN_CHUNK_SIZE <= chunk_size <= MAX_EVENT_SIZE):
        raise InvalidConfigError(f"chunk_size must be an int in [{MIN_CHUNK_SIZE}, {MAX_EVENT_SIZE}], "
                                 f"got {chunk_size!r}")
    return chunk_size


def _segment_for(segments, position: float):
    ordered = sorted(segments, key=lambda s: s.key_start)
    return next((s for s in ordered[:-1] if position < s.key_end), ordered[-1])


# ---- writing -------------------------------------------------------------------------------------
class LargeEventWriter(io.RawIOBase):
    """One large event being written: a writable binary file (Pravega's large-event write).

    Created by ``EventStreamWriter.stream_event``. ``write`` buffers at most one chunk; each full
    chunk is staged (durably, invisibly) in the stream's transient table. ``commit()`` appends the
    whole event atomically; ``abort()`` or ``close()`` without ``commit()`` discards it. Used as a
    context manager, leaving the block without ``commit()`` (or with an exception) aborts.

    Example:
        >>> with writer.stream_event("cam-1") as event:  # doctest: +SKIP
        ...     for block in frames:
        ...         event.write(block)
        ...     event.commit()
        WriteResult(events=1, bytes=314572808, version=12, tail=...)
    """

    def __init__(self, appender: Appender, routing_key: str | None, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        super().__init__()
        self._appender = appender
        self._places_files = appender.places_files
        self._store = appender.store
        self._controller = appender.controller
        self.routing_key = routing_key
        self.chunk_size = check_chunk_size(chunk_size)
        self.transient_id = uuid.uuid4().hex
        self._app = transient_app_id(self.transient_id)
        if self._places_files:
            self._session = appender.session.newSession()
            for key, value in WRITER_CONF.items():
                self._session.conf.set(key, value)
        else:  # the public-API backend sets no session setting (and a Connect session has no newSession)
            self._session = appender.session
        # fixed for the event's chunks (a null key gets one random position for the whole event)
        self.key_position = float(self._session.range(1).select(
            key_position(F.lit(routing_key).cast("string"))).first()[0])
        self._buffer = bytearray()
        self._staged: list[int] = []  # position of each staged chunk
        self._chunks: dict[int, tuple[int, str]] = {}  # position -> (size, its file's add action)
        self._staged_bytes = 0
        self._size = 0
        self._started: datetime | None = None
        self._result: WriteResult | None = None

    def __repr__(self) -> str:
        state = "committed" if self._result is not None else "closed" if self.closed else "open"
        return (f"LargeEventWriter({self._appender.scoped_name}, key={self.routing_key!r}, "
                f"id={self.transient_id}, {self._size} bytes, {len(self._staged)} chunks staged, {state})")

    @property
    def size(self) -> int:
        """Payload bytes written so far."""
        return self._size

    @property
    def staged_chunks(self) -> int:
        return len(self._staged)

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        """Append ``data`` (bytes-like) to the event; returns the number of bytes taken.

        Raises:
            EventTooLargeError: the event would exceed 1 GiB (it is aborted: staged data discarded).
        """
        self._checkClosed()
        view = memoryview(data).cast("B")
        if self._size + len(view) > MAX_LARGE_EVENT_SIZE:
            self._abort_quietly()
            raise EventTooLargeError(f"a large event of more than {MAX_LARGE_EVENT_SIZE} bytes; "
                                     "it was aborted and its staged data discarded")
        taken = 0
        while taken < len(view):
            if len(self._buffer) == self.chunk_size:  # full and more is coming: stage it
                self._stage(self._buffer)
                self._buffer = bytearray()
            room = self.chunk_size - len(self._buffer)
            self._buffer += view[taken:taken + room]
            taken += min(room, len(view) - taken)
        self._size += taken
        return taken

    def flush(self) -> None:
        """Nothing to do: full chunks are staged as they fill, the last one at ``commit()``."""

    def commit(self) -> WriteResult:
        """Append the event: one Delta commit, its chunks contiguous at the tail of the segment
        owning its key now. A second call returns the first one's result.

        Returns:
            A ``WriteResult`` (one event, ``8 + size`` bytes).

        Raises:
            LargeEventFailedError: the event was aborted meanwhile (by the idle clean-up).
            StreamSealedError: the stream is sealed (the event stays staged until aborted).
        """
        if self._result is not None:
            return self._result
        self._checkClosed()
        if not self._staged and self._size <= MAX_EVENT_SIZE:
            result = self._appender.append_bytes(bytes(self._buffer), self.routing_key)
        else:
            if self._buffer or not self._staged:
                self._stage(self._buffer, last=True)
                self._buffer = bytearray()
            attempt = self._commit_attempt if self._places_files else self._commit_rows_attempt
            result = _delta.retrying(attempt, f"commit {self!r}", self._appender.retry)
            self._remove_staged()
            self._store.read_cache.forget(self._appender.scope, self._appender.stream)  # chunks are there now
        self._result = result
        super().close()
        log.info("%r committed at version %s", self, result.version)
        return result

    def abort(self) -> None:
        """Discard the event and its staged chunks (a no-op once committed or aborted).

        Raises:
            LargeEventFailedError: it was committed (by an earlier ``commit()`` whose result was lost).
        """
        if self._result is not None or self.closed:
            return
        self._buffer = bytearray()
        if self._staged:
            decided = decide(self._controller, self._appender.scope, self._appender.stream,
                             [self.transient_id], STATE_ABORTED)
            if decided.get(self.transient_id) == STATE_COMMITTED:
                super().close()
                raise LargeEventFailedError(f"{self!r} was committed; it cannot be aborted")
            self._remove_staged(delete_data=True)
        super().close()
        log.info("%r aborted", self)

    def close(self) -> None:
        """Abort unless committed (Pravega: closing a transient segment's writer discards it)."""
        if not self.closed:
            self.abort()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        """Garbage collection does not abort (Spark may be gone): the clean-up job will."""

    # ---- internals ---------------------------------------------------------------------------
    def _abort_quietly(self) -> None:
        try:
            self.abort()
        except Exception:  # noqa: BLE001 - the caller raises the reason
            log.exception("%r: abort failed; the clean-up job will discard it", self)

    def _stage(self, chunk: bytearray, last: bool = False) -> None:
        """Stage one chunk: its data file, written once into the events table's directory (not
        referenced by it yet), then a manifest row naming it, appended to the transient table
        (both without a Spark job)."""
        w = self._appender
        path = self._store.ensure_transient_table(w.scope, w.stream)
        position = self._staged_bytes
        now = datetime.now(timezone.utc)
        if self._started is None:
            self._started = now  # one write time for all of the event's chunks
        if not self._places_files:
            self._stage_row(path, position, chunk, last, now)
            return
        events = _delta.backend_for(self._session).transaction(self._store.events_path(w.scope, w.stream))
        [add] = events.write_rows([chunk_row(position, chunk, last, self.routing_key, w.writer_id, self._started)],
                                  EVENTS_SCHEMA, EVENTS_PARTITIONS, EVENTS_STATS_COLUMNS,
                                  folder=f"transient={self.transient_id}")
        manifest = (stream_key(w.scope, w.stream), self.transient_id, w.writer_id, self.routing_key,
                    self.key_position, position, len(chunk), add.to_json(), now)

        def attempt() -> int:  # a blind append: nobody else writes this transient id's partition
            txn = _delta.backend_for(self._session).transaction(path)
            return txn.commit(txn.write_rows([manifest], TRANSIENT_TABLE_SCHEMA, TRANSIENT_PARTITIONS,
                                             TRANSIENT_STATS_COLUMNS), TRANSIENT_PARTITIONS)

        version = _delta.retrying(attempt, f"stage a chunk of {self!r}")
        self._chunks[position] = (len(chunk), manifest[7])
        self._staged.append(position)
        self._staged_bytes += len(chunk)
        log.debug("%r staged %d bytes at position %d (transient version %d)", self, len(chunk), position, version)

    def _stage_row(self, path: str, position: int, chunk: bytearray, last: bool, now: datetime) -> None:
        """The public-API backend's staging (no file can be written uncommitted there): the
        manifest row first, then the chunk as a row of the event's own staging partition of the
        events table (``transient_partition``: readers never see it), each one blind append.
        A process stopped between the two leaves a manifest without its chunk, which the idle
        clean-up aborts."""
        w = self._appender
        manifest = (stream_key(w.scope, w.stream), self.transient_id, w.writer_id, self.routing_key, self.key_position,
                    position, len(chunk), "", now)
        staged = (transient_partition(self.transient_id), position, position, 0, len(chunk),
                  RECORD_CHUNK_END if last else RECORD_CHUNK, self.routing_key, bytes(chunk), w.writer_id,
                  self._started, None)
        backend = _delta.backend_for(self._session)
        for table, row, schema in ((path, manifest, TRANSIENT_TABLE_SCHEMA),
                                   (self._store.events_path(w.scope, w.stream), staged, EVENTS_SCHEMA)):
            txn = backend.transaction(table)
            _delta.retrying(lambda t=txn, r=row, sc=schema: t.commit(t.write_rows([r], sc)),
                            f"stage a chunk of {self!r}")
        self._chunks[position] = (len(chunk), "")
        self._staged.append(position)
        self._staged_bytes += len(chunk)
        log.debug("%r staged %d bytes at position %d", self, len(chunk), position)

    def _commit_rows_attempt(self) -> WriteResult:
        """The public-API backend's commit: one guarded append copies the staged chunk rows to the
        tail of the segment owning the key now, placed as ``chunk_framing`` places them, with
        the decision COMMITTED (a compare-and-set: an abort decided meanwhile fails it)."""
        w = self._appender
        txn = w.transaction()
        decided = self._decided(txn)
        if decided is not None:
            return decided
        segments, tails = w.open_segments_settling(txn)
        target = _segment_for(segments, self.key_position).segment_id
        tail = tails[target]
        txn.expect_tails(EVENTS_PARTITION, {target: tail})  # the fence: the target segment only
        # each chunk row at its own place (its own partition, so Delta's writer keeps each chunk
        # in a file of its own: one file of a whole large event ran a 1 GiB server out of heap)
        position = F.col("base_offset")
        start = F.when(position == 0, F.lit(tail)).otherwise(F.lit(tail + HEADER_SIZE) + position)
        end = F.lit(tail + HEADER_SIZE) + position + F.length("event")
        values = {EVENTS_PARTITION: F.lit(target), "base_offset": start, "end_offset": end, "rel_offset": F.lit(0),
                  "rel_next_offset": end - start, "rel_event_offset": F.lit(tail) - start}
        source = (_delta.backend_for(self._session).read(self._store.events_path(w.scope, w.stream))
                  .where(F.col(EVENTS_PARTITION) == transient_partition(self.transient_id))
                  .select(*[values.get(f.name, F.col(f.name)).cast(f.dataType).alias(f.name)
                            for f in EVENTS_SCHEMA.fields]))
        failpoint("large:before_commit")
        txn.insert_frame(source, txn.set_app_version(self._app, STATE_COMMITTED))
        failpoint("large:after_commit")
        end_offset = tail + HEADER_SIZE + self._size
        w.moved_to(tails, target, end_offset)
        return WriteResult(1, HEADER_SIZE + self._size, w.version_finder(target, tail),
                           StreamCut(w.scoped_name, {**tails, target: end_offset}), {target: HEADER_SIZE + self._size})

    def _decided(self, txn: _delta.TableTransaction) -> WriteResult | None:
        """The result of a commit already decided (an earlier attempt landed but did not learn
        it), None if undecided; the decision read fences ``txn``.

        Raises:
            LargeEventFailedError: the event was aborted.
        """
        decision = txn.app_version(self._app)
        if decision == STATE_ABORTED:
            raise LargeEventFailedError(f"{self!r} was aborted (idle for longer than the clean-up's "
                                        "timeout); it cannot be committed")
        if decision == STATE_COMMITTED:
            w = self._appender
            return WriteResult(1, HEADER_SIZE + self._size, None, self._controller.tail_stream_cut(w.scope, w.stream))
        return None

    def _commit_attempt(self) -> WriteResult:
        w = self._appender
        txn = w.transaction()
        decided = self._decided(txn)
        if decided is not None:
            return decided
        segments, tails = w.open_segments_settling(txn)  # finishes a pending scale, or raises sealed
        target = _segment_for(segments, self.key_position).segment_id
        tail = tails[target]
        # the fence: an append to or seal of the target segment after our snapshot fails our commit
        txn.fence_partitions(EVENTS_PARTITION, [target])
        # the manifests are still there (from the log alone; an abort would also have decided)
        found = staged_positions(self._session, self._store.transient_path(w.scope, w.stream), self.transient_id)
        if found != self._staged:
            raise LargeEventFailedError(f"{self!r}: its staged chunks are gone (found {len(found)} of "
                                        f"{len(self._staged)}); it was aborted")
        adds = []
        end = tail + HEADER_SIZE + self._size
        places = [chunk_framing(tail, position, self._chunks[position][0]) for position in self._staged]
        times = _delta.commit_times([(target, start) for start, _ in places])
        for position, t in zip(self._staged, times, strict=True):
            # metadata only: every chunk file gets the event's place in the segment (its rows are
            # relative to the event's start), with times in offset order
            adds.append(_delta.FileEntry.from_json(self._chunks[position][1]).placed(
                {EVENTS_PARTITION: target, "base_offset": tail, "end_offset": end}, modification_time=t))
        failpoint("large:before_commit")
        version = txn.commit(adds, EVENTS_PARTITIONS, [txn.set_app_version(self._app, STATE_COMMITTED)])
        failpoint("large:after_commit")
        w.backend.delete_files(txn.path, txn.unplaced_names)  # the chunks' names before their place
        w.moved_to(tails, target, end)
        return WriteResult(1, HEADER_SIZE + self._size, version,
                           StreamCut(w.scoped_name, {**tails, target: end}), {target: HEADER_SIZE + self._size})

    def _remove_staged(self, delete_data: bool = False) -> None:
        w = self._appender
        remove_transient(self._session, self._store.transient_path(w.scope, w.stream),
                         self._store.events_path(w.scope, w.stream), [self.transient_id], delete_data)


def decide(controller: Controller, scope: str, stream: str, transient_ids: list[str], decision: int) -> dict[str, int]:
    """Record ``decision`` for the transient ids not decided yet (one events-table commit, fenced
    on their decisions); returns every id's decision afterwards."""
    path = controller.store.events_path(scope, stream)

    def attempt() -> dict[str, int]:
        txn = controller.store.backend.transaction(path)
        current = {t: txn.app_version(transient_app_id(t)) for t in transient_ids}
        todo = [t for t, v in current.items() if v < 0]
        if todo:
            txn.commit(None, (), [txn.set_app_version(transient_app_id(t), decision) for t in todo])
        return {t: (decision if v < 0 else v) for t, v in current.items()}

    return _delta.retrying(attempt, f"decide large events of {scope}/{stream}")


def staged_positions(session, path: str, transient_id: str) -> list[int]:
    """The positions of a transient id's staged chunks, in order, from the transient table's log
    (each manifest file's statistics; no data read)."""
    backend = _delta.backend_for(session)
    if not backend.places_files:  # one query (no statistics from the log there)
        return sorted(int(r[0]) for r in backend.read(path).where(F.col(TRANSIENT_PARTITION) == transient_id)
                      .select("position").collect())
    txn = backend.transaction(path)
    files = [f for f in txn.unfenced_files() if f.partition(TRANSIENT_PARTITION) == transient_id]
    return sorted(int(f.min_values["position"]) for f in files)


def remove_transient(session, path: str, events_path: str, transient_ids: list[str],
                     delete_data: bool) -> tuple[int, int]:
    """Remove the manifests of these transient ids (idempotent) and, for an aborted event
    (``delete_data``), delete its staged chunk files; returns (chunk files, their bytes)."""
    ids = ", ".join(f"'{t}'" for t in transient_ids)
    backend = _delta.backend_for(session)
    if not backend.places_files:  # staged chunks are rows: both go, committed or not (a commit copied them)
        counted = (backend.read(path).where(F.col(TRANSIENT_PARTITION).isin(list(transient_ids)))
                   .agg(F.count(F.lit(1)), F.sum("size")).collect()[0])
        backend.delete_partitions(events_path, EVENTS_PARTITION, [transient_partition(t) for t in transient_ids])
        backend.delete_partitions(path, TRANSIENT_PARTITION, list(transient_ids))
        return int(counted[0]), int(counted[1] or 0)
    found: list[dict] = []

    def attempt() -> None:
        txn = _delta.backend_for(session).transaction(path)
        files = txn.files_where(f"{TRANSIENT_PARTITION} IN ({ids})")
        found[:] = txn.rows(files)
        if files:
            txn.commit(None, TRANSIENT_PARTITIONS, txn.removals(files, data_change=False))

    _delta.retrying(attempt, f"remove transient data in {path}")
    chunks = [json.loads(m["file"]) for m in found]
    if delete_data and chunks:
        _delta.backend_for(session).delete_files(events_path, [c["path"] for c in chunks])
    return len(chunks), sum(int(c["size"]) for c in chunks)


# ---- clean-up of idle transient data -------------------------------------------------------------
@dataclass(frozen=True)
class TransientCleanup:
    """What one clean-up of a stream's transient data did.

    Attributes:
        aborted: transient ids aborted (idle, never committed).
        removed: transient ids whose staged data was removed (aborted ones, and committed ones
            whose removal was interrupted).
        files: staged files removed; bytes: their size (freed for good at the next VACUUM).
    """

    aborted: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    files: int = 0
    bytes: int = 0
    transient: Mapping[str, int] = field(default_factory=dict)


def idle_transient_ids(session, path: str, key: str, now: datetime, idle_timeout: timedelta) -> dict[str, int]:
    """The stream's (``key``) transient ids whose latest staged chunk is older than
    ``idle_timeout`` at ``now``, with their staged payload bytes (from the manifests' log
    entries and statistics)."""
    backend = _delta.backend_for(session)
    cutoff = int(now.timestamp() * 1000) - int(idle_timeout / timedelta(milliseconds=1))
    if not backend.places_files:  # one query over the manifests
        rows = (backend.read(path).where(F.col(STREAM_KEY) == key).groupBy(TRANSIENT_PARTITION)
                .agg(F.max("stage_time").alias("latest"), F.sum("size").alias("size")).collect())
        return {r[0]: int(r["size"]) for r in sorted(rows, key=lambda r: r[0])
                if int(as_utc(r["latest"]).timestamp() * 1000) <= cutoff}
    txn = backend.transaction(path)
    latest: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for f in txn.unfenced_files():  # with statistics (sizes)
        if f.partition(STREAM_KEY) != key:
            continue
        tid = f.partition(TRANSIENT_PARTITION)
        latest[tid] = max(latest.get(tid, 0), f.modification_time)
        sizes[tid] = sizes.get(tid, 0) + int(f.max_values.get("size", 0))
    return {tid: sizes[tid] for tid, ms in sorted(latest.items()) if ms <= cutoff}


def clean_transient(controller: Controller, scope: str, stream: str, now: datetime,
                    idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT) -> TransientCleanup:
    """Abort the stream's idle large events and remove their staged data.

    Safe against a concurrent commit of the same event: the abort decision is an events-table
    commit that conflicts with the commit's, so exactly one of them wins.
    """
    path = controller.store.transient_path(scope, stream)
    if not controller.store.backend.is_table(path):
        return TransientCleanup()
    idle = idle_transient_ids(controller.spark, path, stream_key(scope, stream), now, idle_timeout)
    if not idle:
        return TransientCleanup()
    decisions = decide(controller, scope, stream, list(idle), STATE_ABORTED)
    aborted = tuple(t for t, d in decisions.items() if d == STATE_ABORTED)
    events_path = controller.store.events_path(scope, stream)
    files = size = 0
    for ids, delete_data in ((list(aborted), True), ([t for t in idle if t not in aborted], False)):
        if ids:  # an aborted event's chunks are deleted; a committed one's are its event now
            n, b = remove_transient(controller.spark, path, events_path, ids, delete_data)
            files, size = files + n, size + b
    return TransientCleanup(aborted, tuple(idle), files, size, dict(idle))


def clean_transient_data(controller: Controller, scope: str | None, stream: str | None, now: datetime | None,
                         idle_timeout: timedelta | None) -> dict[str, TransientCleanup]:
    """``StreamManager.clean_transient_data``: ``clean_transient`` on every stream (all, a
    scope's, or one); only the streams where something was removed are in the result."""
    if idle_timeout is not None and (not isinstance(idle_timeout, timedelta) or idle_timeout < timedelta(0)):
        raise InvalidConfigError(f"idle_timeout must be a non-negative timedelta, got {idle_timeout!r}")
    now = as_utc(now) if now is not None else utc_now()
    idle_timeout = DEFAULT_IDLE_TIMEOUT if idle_timeout is None else idle_timeout
    out = {}
    for s, t in controller.stream_names(scope, stream):
        done = clean_transient(controller, s, t, now, idle_timeout)
        if done.removed:
            log.info("transient data of %s/%s: %d large events removed (%d aborted), %d files, %d bytes",
                     s, t, len(done.removed), len(done.aborted), done.files, done.bytes)
            out[f"{s}/{t}"] = done
    return out


def transient_data(controller: Controller, scope: str, stream: str) -> DataFrame:
    """``StreamManager.transient_data``: one row per large event being written."""
    controller.stream_record(scope, stream)
    path = controller.store.ensure_transient_table(scope, stream)
    return (controller.store.backend.read(path).where(F.col(STREAM_KEY) == stream_key(scope, stream))
            .groupBy("transient_id", "writer_id", "routing_key")
            .agg(F.count(F.lit(1)).alias("chunks"), F.sum("size").alias("bytes"),
                 F.min("stage_time").alias("first_staged"), F.max("stage_time").alias("last_staged")))
