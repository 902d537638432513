"""The append path shared by every writer of events (Pravega's ``SegmentSelector`` plus the
segment output streams it feeds): routing and framing, the files of a write, the fenced attempt
on the events table, the open segments and their tails, retries, and placing files at commit.

One ``Appender`` per writer id and stream, with its own Spark session (``WRITER_CONF``).
``EventStreamWriter`` appends through it; ``TransactionalEventStreamWriter`` writes its staged
files and commits them through it; ``LargeEventWriter`` fences its commit with it. One append is
one Delta commit, all-or-nothing: its events get contiguous offsets after each segment's tail, and
the commit is fenced on the segments it writes to (see docs/ARCHITECTURE.md section 3) so that a
concurrent append or seal of one of them makes it retry from fresh tails, and a scale makes it
re-route to the successors.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from .. import _delta
from .._delta import SESSION_CONF
from .._failpoints import failpoint
from ..controller.client import Controller
from ..errors import EventTooLargeError, InvalidConfigError, InvalidEventError
from ..store.schema import (
    EVENTS_PARTITION,
    EVENTS_PARTITIONS,
    EVENTS_SCHEMA,
    EVENTS_STATS_COLUMNS,
    HEADER_SIZE,
    MAX_EVENT_SIZE,
    RECORD_EVENT,
    RECORD_STAGED,
    UNPLACED,
)
from ..stream.segments import SegmentRecord, epoch_members
from ..stream.stream_cut import StreamCut
from .routing import (
    PendingFile,
    key_position,
    place_files,
    with_absolute_offsets,
    with_event_checks,
    with_key_position,
    with_relative_offsets,
    with_segment_id,
)
from .task_files import TASK_OUTPUT_DDL, TaskStorage, task_storage, write_task_files, write_time_of

log = logging.getLogger("pravega_spark")


# Settings of each appender's own session (they apply to its writes only).
WRITER_CONF = {
    # a write is one pass with no shuffle (``with_relative_offsets``): nothing for adaptive
    # execution to re-plan, and the offsets' UDF must see the same partitions as the file writer
    "spark.sql.adaptive.enabled": "false",
    # one file per task and segment: a task's offsets are relative to its extent in the segment
    # (several files per task would still be placed correctly, see ``place_files``)
    "spark.sql.files.maxRecordsPerFile": "0",
    # the write's tasks frame and write their rows in Python (``task_files``; else the offsets'
    # UDF sees (segment id, size) pairs): batches of at most 50,000 rows and 8 MiB (measured
    # at 1 KiB events: 8 MiB 0.85x raw, 4 MiB 0.60x, 16 MiB 0.76x, 50,000 rows alone 0.70x)
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    "spark.sql.execution.arrow.maxBytesPerBatch": str(8 << 20),
    # offsets are unique and payloads opaque: a dictionary would be filled, then abandoned
    "parquet.enable.dictionary#rel_offset": "false",
    "parquet.enable.dictionary#rel_next_offset": "false",
    "parquet.enable.dictionary#event": "false",
    # nothing filters on payloads, keys or writer ids inside a file: no per-page min/max for them
    "parquet.column.statistics.enabled#event": "false",
    "parquet.column.statistics.enabled#routing_key": "false",
    "parquet.column.statistics.enabled#writer_id": "false",
    "parquet.size.statistics.enabled": "false",
    # application versions (idempotent write numbers, transaction states) are read from each
    # commit's checksum file: keep them listed there (Delta's default stops at 100)
    **SESSION_CONF,
}

# How many commits after its own a writer replays from the log to keep using its known tails.
HINT_REPLAY_LIMIT = 50

# The application id under which a writer's write numbers are recorded in the events table's log.
WRITER_APP_PREFIX = "pravega-writer/"
# a write of one event from this process (``write_event``): the columns ``write_events`` reads
EVENT_INPUT_SCHEMA = StructType([StructField("routing_key", StringType()), StructField("event", BinaryType())])


@dataclass(frozen=True)
class WriteResult:
    """What one write committed.

    Attributes:
        event_count: events appended (0 for an empty write or a skipped idempotent retry).
        byte_count: framed bytes appended (8-byte header + payload per event).
        version: the events table's Delta version of the commit (None if nothing was written).
            Over Spark Connect a commit does not return it: it is found on first access (one
            query of the table's log), then kept.
        tail_stream_cut: the stream's tail right after the commit.
        segments: framed bytes appended per segment id.
        retries: attempts that lost to a concurrent commit (a conflict on a segment written to,
            or a scale in progress) before this one succeeded.
    """

    event_count: int
    byte_count: int
    found_version: int | None | Callable[[], int | None] = field(repr=False)
    tail_stream_cut: StreamCut
    segments: dict[int, int] = field(default_factory=dict)
    retries: int = 0

    @property
    def version(self) -> int | None:
        if callable(self.found_version):  # found once, on first access (a frozen result keeps it)
            object.__setattr__(self, "found_version", self.found_version())
        return self.found_version

    def __repr__(self) -> str:
        return (f"WriteResult(events={self.event_count}, bytes={self.byte_count}, "
                f"version={self.version}, tail={self.tail_stream_cut!r}, retries={self.retries})")


class Appender:
    """The append path of one writer id on one stream.

    Attributes:
        controller: the store's read side (rows, segments, tails).
        scope, stream, writer_id: what it appends to, and as whom.
        session: its own Spark session (``WRITER_CONF``), sharing the cluster.
        retry: the policy of its fenced commits.
        task_files: whether a write's Spark tasks write its files themselves (``task_files``:
            for stores on a local or mounted file system and S3), rather than Delta's writer after an
            offsets' UDF.
    """

    def __init__(self, controller: Controller, scope: str, stream: str, writer_id: str,
                 retry: _delta.RetryPolicy | None = None) -> None:
        self.controller = controller
        self.store = controller.store
        self.scope = scope
        self.stream = stream
        self.writer_id = writer_id
        # the append engine, chosen once: files placed at their tails by one fenced commit where
        # the backend can place files; else the rows inserted at the tails by one guarded append
        self.places_files = controller.store.backend.places_files
        self._append = self._append_placing_files if self.places_files else self._append_at_tails
        self.session = controller.store.backend.writer_session(WRITER_CONF)
        self.backend = _delta.backend_for(self.session)  # the writer session's (commits run in it)
        self.retry = retry or _delta.RetryPolicy(attempts=40, max_backoff=3.0)
        self.task_files = True
        # open segments and tails after our last commit, its version and the table's id: exact
        # while no later commit touched those segments (checked against each new snapshot)
        self._hint: tuple[list[SegmentRecord], dict[int, int], int, str] | None = None
        # the end of this writer's latest write in each segment it wrote (watermarks)
        self._position: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"Appender({self.scoped_name}, writer_id={self.writer_id!r})"

    @property
    def scoped_name(self) -> str:
        return f"{self.scope}/{self.stream}"

    @property
    def position(self) -> dict[int, int]:
        """The end of this writer's latest write in each segment it wrote."""
        return dict(self._position)

    def transaction(self) -> _delta.TableTransaction:
        """A new transaction on the stream's events table, in this appender's session."""
        return self.backend.transaction(self.store.events_path(self.scope, self.stream))

    def forget_tails(self) -> None:
        """Drop the tails known from the last commit (the next append reads them again)."""
        self._hint = None

    def append(self, df: DataFrame, routing_key: str = "routing_key", event: str = "event",
               order_by: str | list[str] | None = None, write_number: int | None = None) -> WriteResult:
        """``EventStreamWriter.write_events``: every row of ``df`` as an event, in one commit."""
        return self._append(df, routing_key, event, order_by, check_write_number(write_number))

    def _append_placing_files(self, df: DataFrame, routing_key: str, event: str, order_by,
                              number: int | None) -> WriteResult:
        guard = None if number is None else self.idempotence_guard(number)
        files_of = self.files_of(self.routed(df, routing_key, event, order_by))
        return self.retrying(lambda: self.attempt(files_of, guard), f"append to {self.scoped_name}")

    def _append_at_tails(self, df: DataFrame, routing_key: str, event: str, order_by,
                         number: int | None) -> WriteResult:
        events = self.prepare(df, routing_key, event, order_by)
        names = [order_by] if isinstance(order_by, str) else list(order_by or [])
        small, events = small_events(events, names)  # a few in-memory rows: placed in this process
        source = events if small is None else small
        return self.retrying(lambda: self.attempt_at_tails(source, names, number), f"append to {self.scoped_name}")

    def _finish(self, segments: list[SegmentRecord], lengths: dict[int, int], grown: dict[int, int],
                version: int | None | Callable[[], int | None], table_id: str | None, count: int) -> WriteResult:
        """What both engines do after their commit: remember the tails (the next append's hint)
        and this writer's positions, and report the write. ``version`` may be a function that
        finds it (``WriteResult.version``: found on first access)."""
        known = None if callable(version) else version
        self._hint = (segments, lengths, known, table_id)
        self._position = {sid: off for sid, off in self._position.items() if sid in lengths}
        self._position.update({sid: lengths[sid] for sid in grown})
        result = WriteResult(count, sum(grown.values()), version, StreamCut(self.scoped_name, lengths), grown)
        log.info("%s wrote %d events (%d bytes) to %s at version %s", self.writer_id,
                 result.event_count, result.byte_count, self.scoped_name,
                 "(found when asked)" if known is None and callable(version) else known)
        return result

    def version_finder(self, segment_id: int, base_offset: int) -> Callable[[], int | None]:
        """A function finding the version of this writer's commit that placed rows at
        ``base_offset`` of ``segment_id`` (a write at that tail: see ``version_adding``), for a
        commit that did not return its version (the public-API backend's)."""
        path = self.store.events_path(self.scope, self.stream)
        backend = self.backend
        return functools.partial(backend.version_adding, path,
                                 {EVENTS_PARTITION: int(segment_id), "base_offset": int(base_offset)})

    def append_bytes(self, event: bytes, routing_key: str | None, write_number: int | None = None) -> WriteResult:
        """One event from this process, as a local relation whose size Spark knows (the small path)."""
        df = _delta.local_frame(self.session, [(routing_key, bytes(event))], EVENT_INPUT_SCHEMA, arrow=True)
        return self.append(df, write_number=write_number)

    def routed(self, df: DataFrame, routing_key: str, event: str, order_by) -> DataFrame | list:
        """A write's events in append order: a few in-memory rows as a list (``small_events``,
        routed and framed in this process), else the DataFrame (sorted by ``order_by`` when
        given: the tasks' order and each task's row order are then the order asked for)."""
        events = self.prepare(df, routing_key, event, order_by)
        names = [order_by] if isinstance(order_by, str) else list(order_by or [])
        small, events = small_events(events, names)
        if small is not None:
            return small
        return events.orderBy(*[F.col(c) for c in names], F.col("__seq")) if names else events

    def open_segments_settling(self, txn: _delta.TableTransaction) -> tuple[list[SegmentRecord], dict[int, int]]:
        """``open_segments``; when a scale is half done, finish it (or raise ``StreamSealedError``)
        before the retry the ``Retry`` asks for."""
        try:
            return self.open_segments(txn)
        except _delta.Retry:
            self.controller.active_stream(self.scope, self.stream)  # finishes the pending scale
            raise

    def moved_to(self, tails: dict[int, int], segment_id: int, end: int) -> None:
        """Record a commit made outside ``attempt`` (a large event) that ended ``segment_id`` at
        ``end``: the position keeps only the open segments."""
        self._position = {**{s: o for s, o in self._position.items() if s in tails}, segment_id: end}

    # ---- internals ---------------------------------------------------------------------------
    def prepare(self, df: DataFrame, routing_key: str, event: str, order_by) -> DataFrame:
        if not (hasattr(df, "columns") and hasattr(df, "sparkSession")):
            raise InvalidEventError(f"the events must be a DataFrame, got {type(df).__name__}")
        df = self.backend.in_session(df)
        missing = [c for c in [routing_key, event, *([order_by] if isinstance(order_by, str) else (order_by or []))]
                   if c not in df.columns]
        if missing:
            raise InvalidConfigError(f"columns {missing} not in the DataFrame (columns: {df.columns})")
        payload_type = df.schema[event].dataType
        if isinstance(payload_type, StringType):
            payload = F.encode(F.col(event), "UTF-8")
        elif isinstance(payload_type, BinaryType):
            payload = F.col(event)
        else:
            raise InvalidEventError(f"event column {event!r} must be binary or string, got {payload_type.simpleString()}")
        extra = [F.col(c) for c in ([order_by] if isinstance(order_by, str) else (order_by or []))
                 if c not in (routing_key, event)]
        return df.select(F.col(routing_key).cast("string").alias("routing_key"),
                         payload.alias("event"), *extra,
                         F.monotonically_increasing_id().alias("__seq"))

    def open_segments(self, txn: _delta.TableTransaction) -> tuple[list[SegmentRecord], dict[int, int]]:
        """The open segments and their tails as of ``txn``'s snapshot of the events table."""
        if self._hint is not None and self._hint[3] == txn.table_id and self._hint[2] <= txn.read_version:
            segments, tails, version, _ = self._hint
            if version == txn.read_version:
                return segments, tails  # nothing was committed since our own last write
            # later commits that touched none of these segments (transaction steps, appends to
            # other streams' ... ) leave the tails exact; a seal, truncation or append would show
            later = txn.partition_files_since(EVENTS_PARTITION, list(tails), version, limit=HINT_REPLAY_LIMIT)
            if later is not None and not later[0] and not later[1]:
                return segments, tails
        record, records = self.controller.active_with_segments(self.scope, self.stream)
        current = epoch_members(records, record.current_epoch)
        ids = [s.segment_id for s in current]
        tails = self.store.segment_tails_in(txn, self.scope, self.stream, ids)
        if any(t.sealed for t in tails.values()):
            raise _delta.Retry("segments sealed by a scale in progress")
        return current, {sid: t.length for sid, t in tails.items()}

    def idempotence_guard(self, number: int):
        app_id = WRITER_APP_PREFIX + self.writer_id

        def guard(txn: _delta.TableTransaction):
            last = txn.app_version(app_id)
            if last >= number:
                log.info("%s: write number %d skipped (already applied: last is %d)", self.writer_id, number, last)
                return None
            return [txn.set_app_version(app_id, number)]

        return guard

    def retrying(self, attempt, what: str) -> WriteResult:
        """``attempt()`` under this writer's retry policy; the result counts the lost attempts."""
        attempts = 0

        def step() -> WriteResult:
            nonlocal attempts
            attempts += 1
            return attempt()

        result = _delta.retrying(step, what, self.retry)
        if attempts > 1:
            log.info("%s: %s took %d attempts", self.writer_id, what, attempts)
        return replace(result, retries=attempts - 1)

    def files_of(self, events) -> _WriteOnce:
        """``files_of(txn, segments)``: the write's files, routed to ``segments`` (written on the
        first call). A retry after a conflict reuses them: their contents do not depend on the
        tails, only their bases do. They are written again only if a scale sealed a segment they
        were routed to."""
        return _WriteOnce(self, events)

    def attempt(self, files_of, guard=None) -> WriteResult:
        """One attempt of an append: a fenced Delta transaction on the events table.

        ``files_of(txn, segments)`` gives the write's files (see ``_files_of``); their bases are
        fixed here, after the tails of this transaction's snapshot. ``guard(txn)`` (optional) runs
        first against the snapshot: it returns the extra actions to commit with the events (None:
        the write is already applied, skip it).
        """
        for fresh in (False, True):
            txn = self.transaction()
            extra: list = []
            if guard is not None:
                extra = guard(txn)
                if extra is None:  # already applied: report the current tail, write nothing
                    return WriteResult(0, 0, None, StreamCut(self.scoped_name, self.open_segments(txn)[1]))
            segments, tails = self.open_segments_settling(txn)
            self._hint = None
            writes = getattr(files_of, "writes", 0)
            files = files_of(txn, segments)
            if fresh or getattr(files_of, "writes", 0) == writes:
                break
            # the files were just written (a Spark job): commit from a fresh snapshot, so that the
            # window in which a concurrent commit can beat ours is the commit's, not the job's
        if not files and not extra:
            self._hint = (segments, tails, txn.read_version, txn.table_id)
            return WriteResult(0, 0, None, StreamCut(self.scoped_name, tails))
        placements, lengths = place_files(files, tails)
        # in offset order per segment, with times in that order (Delta's streaming source reads a
        # commit's files in action order and a snapshot in time order: ``_delta.commit_times``)
        ordered = sorted(zip(files, placements, strict=True), key=lambda fp: (fp[0].segment_id, fp[1][0]))
        times = _delta.commit_times([(f.segment_id, base) for f, (base, _) in ordered])
        adds = [f.entry.placed({"base_offset": base, "end_offset": end}, modification_time=t)
                for (f, (base, end)), t in zip(ordered, times, strict=True)]
        # the fence: only the segments written to. A commit adding files to one of them (an
        # append, a seal, a truncation marker) or removing some after our snapshot makes ours
        # fail; writers of other segments of the stream go on in parallel.
        written = sorted({f.segment_id for f in files})
        if written:
            txn.fence_partitions(EVENTS_PARTITION, written)
        failpoint("append:before_commit")
        version = txn.commit(adds, EVENTS_PARTITIONS, extra)
        failpoint("append:after_commit")
        if getattr(files_of, "owned", False):  # the names the files had before their place was known
            self.backend.delete_files(txn.path, txn.unplaced_names)
        lengths = self._lengths_after(txn, version, lengths, written)
        grown = {sid: lengths[sid] - tails[sid] for sid in written if lengths[sid] != tails[sid]}
        return self._finish(segments, lengths, grown, version, txn.table_id, sum(f.num_records for f in files))

    def attempt_at_tails(self, events, order: list[str], number: int | None, guard=None) -> WriteResult:
        """One attempt of an append over Spark Connect: the events placed at the tails (from this
        writer's last commit, else read), inserted by one guarded append (``_delta.sql``) that
        inserts nothing if the tails moved or a segment was sealed. A write number rides in the
        same append as the writer's write mark (``_delta.sql_writes.MARKS_SEGMENT``): a number not above
        the mark's is skipped, with nothing written.

        ``guard(txn)`` (optional, instead of a number) runs first: it returns the marks to set in
        the same append (compare-and-sets of what it read), or None when the write is applied
        already. ``events`` may be a function of no argument giving the DataFrame: it is then
        called after the guard's read (a source read from the table sees at least what it saw).
        """
        txn = self.transaction()
        marks = None
        if guard is not None:
            marks = guard(txn)
            if marks is None:  # applied already: report the current tail, write nothing
                return WriteResult(0, 0, None, StreamCut(self.scoped_name, self.open_segments(txn)[1]))
        if self._hint is not None and guard is None:
            segments, tails = self._hint[0], self._hint[1]
            txn.fence_partitions(EVENTS_PARTITION, list(tails))
            txn.expect_tails(EVENTS_PARTITION, tails)
        else:
            segments, tails = self.open_segments_settling(txn)
        self._hint = None
        events = events() if callable(events) else events
        known: dict[int, int] | None = None  # the lengths written per segment, when placed here
        if isinstance(events, list):  # ``small_events``: placed here, so their ends are known
            placed, known = self._placed_small(events, segments, tails)
        else:
            placed = self._placed_frame(events, segments, tails, order)
        if marks is None:
            marks = [] if number is None else [txn.set_app_version(WRITER_APP_PREFIX + self.writer_id, number)]
        failpoint("append:before_commit")
        try:
            inserted = txn.insert_frame(placed, marks)
        except Exception as exc:  # the job's raise_error surfaces as a Spark error
            self._raise_event_error(exc)
            raise
        failpoint("append:after_commit")
        if inserted < 0:
            log.info("%s: write number %d skipped (already applied)", self.writer_id, number)
            return WriteResult(0, 0, None, StreamCut(self.scoped_name, tails))
        if not inserted:
            grown = {}
        elif known is not None:
            grown = known
        else:
            grown = {sid: end - tails[sid] for sid, end in txn.ends_of_insert().items()}
        lengths = {sid: tails[sid] + grown.get(sid, 0) for sid in tails}
        version = txn.committed_version
        written = sorted(sid for sid, size in grown.items() if size)
        if version is None and written:  # found on first access (one query), not on every write
            version = self.version_finder(written[0], tails[written[0]])
        return self._finish(segments, lengths, grown, version, None, inserted)

    def _placed_frame(self, events: DataFrame, segments, tails: dict[int, int], order: list[str]) -> DataFrame:
        """``events`` routed, checked and numbered at the tails by Spark (a window per segment)."""
        return (events
                  .transform(with_key_position)
                  .transform(with_segment_id, segments=segments)
                  .transform(with_event_checks)
                  .transform(with_absolute_offsets, tails, order=[*order, "__seq"])
                  .select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in EVENTS_SCHEMA.fields
                            if f.name not in ("record_type", "writer_id", "write_time", "rel_event_offset")],
                          F.lit(RECORD_EVENT).alias("record_type"), F.lit(self.writer_id).alias("writer_id"),
                          F.current_timestamp().alias("write_time"),
                          F.lit(None).cast("long").alias("rel_event_offset"))
                  .select(*EVENTS_SCHEMA.fieldNames()))

    def _placed_small(self, events: list, segments, tails: dict[int, int]) -> tuple[DataFrame, dict[int, int]]:
        """``small_events`` routed, framed and placed at the tails in this process
        (``frame_small``) as a local relation, and the lengths written per segment: the ends of
        what the append inserts are known, so no query follows it."""
        rows, lengths = frame_small(events, segments, self.writer_id, datetime.now(timezone.utc), tails)
        # the server's clock stamps the rows, as it does the DataFrame path's
        placed = (_delta.local_frame(self.session, rows, EVENTS_SCHEMA)
                  .withColumn("write_time", F.current_timestamp())
                  .select(*EVENTS_SCHEMA.fieldNames()))
        return placed, lengths

    def stage_rows(self, events: DataFrame, order: list[str], partition: int, rank: int, guard) -> int:
        """Stage ``prepare``d events as rows of ``partition`` (a transaction's staging partition:
        readers never see it), in one guarded append whose marks ``guard(txn)`` gives (compare-and-sets of
        what it read: a concurrent decision fails it, and ``guard`` raises on the next attempt).
        Each row keeps its place in the write's order (``rel_offset``) and the write's ``rank``
        (``base_offset``), so that a commit can replay them in order. Returns the rows staged.

        Raises:
            EventTooLargeError: an event exceeds 8 MiB (nothing is staged).
        """
        ordered = events.orderBy(*[F.col(c) for c in order], F.col("__seq")) if order else events
        position = F.monotonically_increasing_id() if order else F.col("__seq")
        values = {"segment_id": F.lit(int(partition)), "base_offset": F.lit(int(rank)),
                  "end_offset": F.lit(int(rank)), "rel_offset": position, "rel_next_offset": F.lit(0),
                  "record_type": F.lit(RECORD_STAGED), "routing_key": F.col("routing_key"), "event": F.col("event"),
                  "writer_id": F.lit(self.writer_id), "write_time": F.current_timestamp(),
                  "rel_event_offset": F.lit(None)}
        staged = ordered.transform(with_event_checks).select(
            *[values[f.name].cast(f.dataType).alias(f.name) for f in EVENTS_SCHEMA.fields])

        def attempt() -> int:
            txn = self.transaction()
            try:
                return txn.insert_frame(staged, guard(txn))
            except Exception as exc:
                self._raise_event_error(exc)
                raise

        return _delta.retrying(attempt, f"stage events in {self.scoped_name}", self.retry)

    def _lengths_after(self, txn: _delta.TableTransaction, version: int, lengths: dict[int, int],
                       written: list[int]) -> dict[int, int]:
        """Each open segment's length right after our commit at ``version``. A written segment's
        is the end of what we wrote (the fence kept everyone else out of it). The others' are our
        snapshot's, unless someone committed between our snapshot and our commit: then they are
        read again at ``version`` (from the log; no Spark job)."""
        untouched = [sid for sid in lengths if sid not in written]
        if untouched and version != txn.read_version + 1:
            fresh = self.store.segment_tails(self.scope, self.stream, untouched, version)
            lengths = {**lengths, **{sid: t.length for sid, t in fresh.items()}}
        return lengths

    def write_with_spark(self, txn: _delta.TableTransaction, events: DataFrame, segments) -> list[PendingFile]:
        """Route, frame and write ``events`` in one Spark job with no shuffle: each task writes
        one file per segment, its offsets relative to the task's extent there. The tasks write
        the files themselves (``task_files``) when they can reach the table's storage as
        files; otherwise Delta's writer does, after a running-sum UDF."""
        if is_small(events):
            # a few events (a notebook's handful, a write_event): one task, so one file per segment
            events = events.coalesce(1)
        storage = (task_storage(txn.path, self.backend.pyarrow_s3_options(txn.path))
                   if self.task_files else None)
        if storage is not None:
            return self._write_task_files(events, segments, storage)
        prepared = (events
                    .transform(with_key_position)
                    .transform(with_segment_id, segments=segments)
                    .transform(with_event_checks)
                    .transform(with_relative_offsets)
                    .select("segment_id", "base_offset", "end_offset", "rel_offset", "rel_next_offset",
                            F.lit(RECORD_EVENT).alias("record_type"), "routing_key", "event",
                            F.lit(self.writer_id).alias("writer_id"),
                            F.current_timestamp().alias("write_time"),
                            F.lit(None).cast("long").alias("rel_event_offset")))
        try:
            files = txn.write(prepared, EVENTS_PARTITIONS)
        except Exception as exc:  # the job's raise_error surfaces as a Spark or Py4J error
            self._raise_event_error(exc)
            raise
        return [pending_file(f) for f in files]

    def _write_task_files(self, events: DataFrame, segments, storage: TaskStorage) -> list[PendingFile]:
        """``write_with_spark`` with the files written by the job's tasks (pyarrow)."""
        write_time = write_time_of(datetime.now(timezone.utc))
        task = functools.partial(write_task_files, storage=storage, writer_id=self.writer_id,
                                 write_time_us=int(write_time.timestamp() * 1_000_000))
        routed = (events
                  .transform(with_key_position)
                  .transform(with_segment_id, segments=segments)
                  .select("segment_id", "routing_key", "event"))
        try:
            adds = [row["add"] for row in routed.mapInArrow(task, TASK_OUTPUT_DDL).collect()]
        except Exception as exc:  # the tasks' ValueError surfaces as a Spark or Py4J error
            self._raise_event_error(exc)
            raise
        return [pending_file(_delta.FileEntry.from_json(add)) for add in adds]

    def _write_small(self, txn: _delta.TableTransaction, events: list, segments) -> list[PendingFile]:
        """The same layout as ``write_with_spark`` for a few events already in this process:
        routed and framed here, written by ``DeltaTransaction.write_rows`` (no Spark job)."""
        rows, _ = frame_small(events, segments, self.writer_id, datetime.now(timezone.utc))
        if not rows:
            return []
        return [pending_file(f) for f in txn.write_rows(rows, EVENTS_SCHEMA, EVENTS_PARTITIONS, EVENTS_STATS_COLUMNS)]

    @staticmethod
    def _raise_event_error(exc: BaseException) -> None:
        text = str(exc)
        if "EventTooLarge:" in text:
            detail = text[text.index("EventTooLarge:") + len("EventTooLarge:"):].splitlines()[0]
            raise EventTooLargeError(detail.strip().rstrip(".") + "; nothing was written") from None
        if "NullEvent:" in text:
            raise InvalidEventError("an event payload is null; nothing was written") from None



class _WriteOnce:
    """The files of one write, written on first use and reused by its retries (see
    ``Appender.files_of``); ``writes`` counts the Spark jobs that wrote them (the
    in-process path for a few events takes milliseconds and does not count)."""

    owned = True  # no one else knows of its files: their names before the commit can go after it

    def __init__(self, appender: Appender, events) -> None:
        self._appender = appender
        self._events = events
        self._files: list[PendingFile] | None = None
        self.writes = 0

    def __call__(self, txn: _delta.TableTransaction, segments: list[SegmentRecord]) -> list[PendingFile]:
        open_ids = {seg.segment_id for seg in segments}
        if self._files is None or any(f.segment_id not in open_ids for f in self._files):
            w = self._appender
            if self._files is not None:
                log.info("%s: a scale sealed segments this write was routed to: writing it again", w.writer_id)
            if isinstance(self._events, list):
                self._files = w._write_small(txn, self._events, segments)
            else:
                self._files = w.write_with_spark(txn, self._events, segments)
                self.writes += 1
        return self._files


def pending_file(added: _delta.FileEntry, first_rank: int = 0) -> PendingFile:
    """A written file awaiting its base: its segment, its rank (``first_rank``, then the task that
    wrote it, from its placeholder ``base_offset``) and its relative extent (statistics)."""
    return PendingFile(added.int_partition(EVENTS_PARTITION), (first_rank, UNPLACED - added.int_partition("base_offset")),
                       int(added.min_values.get("rel_offset", 0)), int(added.max_values["rel_next_offset"]),
                       added.num_records, added)


def check_write_number(write_number: int | None) -> int | None:
    """A write number is a non-negative int (or None: not an idempotent write)."""
    if write_number is None:
        return None
    if isinstance(write_number, bool) or not isinstance(write_number, int) or write_number < 0:
        raise InvalidConfigError(f"write_number must be a non-negative int, got {write_number!r}")
    return write_number


# At most this many events held in this process's memory (a local relation, or an RDD of local data:
# ``createDataFrame`` of a list, a pandas or an Arrow table) are routed and framed here and written
# without a Spark job; anything else is written by one Spark job (``write_with_spark``).
SMALL_WRITE_ROWS = 1000
# (Spark Connect's client sends local data above a few MiB ahead of the plan, as chunks the
# server caches: ``ChunkedCachedLocalRelation``)
IN_MEMORY_LEAVES = ("LocalRelation", "LogicalRDD", "ChunkedCachedLocalRelation")


def small_events(events: DataFrame, order_by: list[str]) -> tuple[list[tuple] | None, DataFrame]:
    """``events`` (from ``_prepare``) as ``(routing_key, payload, key_position)`` in append order
    (``order_by``, then the DataFrame's own order), if it is at most ``SMALL_WRITE_ROWS`` rows of
    in-memory data; else None. One small Spark query computes the key positions (Spark's
    ``xxhash64``) of at most ``SMALL_WRITE_ROWS + 1`` rows; its plan does not change from one
    write to the next, unlike a write's, whose tails are literals compiled into new code.

    Also returns the events to write with Spark otherwise. Rows fed by Python workers (an RDD,
    e.g. ``createDataFrame`` of a list) are first read whole into a local checkpoint: a limit
    over them would stop the workers mid-stream (each then printed a ``BrokenPipeError``
    traceback), and the write reads the checkpoint instead of running them again."""
    names = _delta.backend_for(events.sparkSession).plan_leaves(events)
    if not names or any(name not in IN_MEMORY_LEAVES for name in names):
        return None, events
    if "LogicalRDD" in names:
        events = events.localCheckpoint()
    rows = (events.select("routing_key", "event", key_position("routing_key").alias("__position"),
                          *order_by, "__seq")
            .limit(SMALL_WRITE_ROWS + 1).collect())
    if len(rows) > SMALL_WRITE_ROWS:
        return None, events

    def order(row) -> tuple:  # ascending, nulls first: Spark's default sort order
        return (*((row[c] is not None, row[c]) for c in order_by), row["__seq"])

    return [(r["routing_key"], None if r["event"] is None else bytes(r["event"]), r["__position"])
            for r in sorted(rows, key=order)], events


def frame_small(events: list, segments, writer_id: str, now: datetime,
                tails: Mapping[int, int] | None = None) -> tuple[list[tuple], dict[int, int]]:
    """``small_events`` as rows of ``EVENTS_SCHEMA``, routed to ``segments`` and framed in
    this process: one part per segment, its offsets relative to the part. With ``tails`` each
    part is placed at its segment's tail (``base_offset`` the tail, ``end_offset`` the tail plus
    the part's length); else its bases are ``UNPLACED`` (files placed at commit). Returns the
    rows and each written segment's part length.

    Raises:
        EventTooLargeError, InvalidEventError: an event is null or over the size limit.
    """
    ordered = sorted(segments, key=lambda seg: seg.key_start)
    lengths: dict[int, int] = {}
    framed = []
    for routing_key, payload, position in events:
        check_event(payload)
        sid = next((seg.segment_id for seg in ordered[:-1] if position < seg.key_end), ordered[-1].segment_id)
        offset = lengths.get(sid, 0)
        lengths[sid] = offset + HEADER_SIZE + len(payload)
        framed.append((sid, offset, lengths[sid], routing_key, payload))

    def placed(sid: int) -> tuple[int, int]:
        return (UNPLACED, UNPLACED) if tails is None else (int(tails[sid]), int(tails[sid]) + lengths[sid])

    rows = [(sid, *placed(sid), offset, end, RECORD_EVENT, key, payload, writer_id, now, None)
            for sid, offset, end, key, payload in framed]
    return rows, lengths


def check_event(payload: bytes | None) -> None:
    """``with_event_checks`` for one payload in this process."""
    if payload is None:
        raise InvalidEventError("an event payload is null; nothing was written")
    if len(payload) > MAX_EVENT_SIZE:
        raise EventTooLargeError(f"an event of {len(payload)} bytes exceeds the {MAX_EVENT_SIZE}-byte limit; "
                                 "nothing was written")


# Inputs whose plan estimates at most this many bytes are written by one task without a shuffle.
# Spark knows the size of local relations (``createDataFrame`` of a pandas or Arrow table, SQL
# ``VALUES``) and of file scans; a DataFrame made from a Python list is an RDD of unknown size.
SMALL_WRITE_BYTES = 1 << 20


def is_small(df: DataFrame) -> bool:
    """Whether Spark's own size estimate of ``df``'s plan (no job) is at most SMALL_WRITE_BYTES:
    exact for local data (``createDataFrame``), the files' size for a scan."""
    size = _delta.backend_for(df.sparkSession).estimated_size(df)
    return size is not None and size <= SMALL_WRITE_BYTES
