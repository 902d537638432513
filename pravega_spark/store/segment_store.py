"""The segment store: each stream's events table, read by offset and committed under fences.

Pravega's segment store holds a segment's bytes and answers reads by offset, its length and
whether it is sealed. Here a segment is the rows of one ``segment_id`` partition of the stream's
events table: ``SegmentStore`` reads them (with absolute offsets: ``events_view``), summarises
their tails from the log, seals segments and truncates them, each as one Delta commit.
``store.Store`` builds the metadata store on it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import _delta
from .._failpoints import failpoint
from .clock import utc_now
from .schema import (
    CHUNK_TYPES,
    EVENTS_PARTITION,
    EVENTS_PARTITIONS,
    EVENTS_SCHEMA,
    EVENTS_STATS_COLUMNS,
    RECORD_EVENT,
    RECORD_SEAL,
    RECORD_TRUNCATE,
)

# Seals compete with every appender of the stream: give them more attempts than a single append.
SEAL_RETRY = _delta.RetryPolicy(attempts=80, max_backoff=2.0)


@dataclass(frozen=True)
class SegmentTail:
    """A segment's length (its tail offset) and whether a seal record closes it."""

    length: int
    sealed: bool


def segment_tail(summary: _delta.PartitionSummary) -> SegmentTail:
    """A segment's tail from its files' summary: the largest ``end_offset``, and sealed if a seal
    record (the only positive record type) is among its rows."""
    return SegmentTail(summary.end, summary.high is not None and summary.high > RECORD_EVENT)


def control_row(segment_id: int, offset: int, record_type: int, now: datetime) -> tuple:
    """An events-table row (``EVENTS_SCHEMA`` order) of a control record at ``offset``: a file of
    its own whose base and end are that offset."""
    return (segment_id, offset, offset, 0, 0, record_type, None, None, None, now, None)


def events_view(raw: DataFrame) -> DataFrame:
    """The events table's rows with absolute offsets (``base_offset`` plus the relative ones):
    ``EVENTS_VIEW_COLUMNS``. The same expression works in plain SQL::

        SELECT segment_id, base_offset + rel_offset AS offset, event FROM delta.`.../events`
        WHERE record_type = 0
    """
    return raw.selectExpr("segment_id", "base_offset + rel_offset AS offset",
                          "base_offset + rel_next_offset AS next_offset", "record_type", "routing_key",
                          "event", "writer_id", "write_time", "base_offset + rel_event_offset AS event_offset",
                          "base_offset", "end_offset")


class SegmentStore:
    """The events tables of one store root (see the module docstring)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark = spark
        self.root = root.rstrip("/")
        self.backend = _delta.backend_for(spark)
        # (segment, offset) pairs known to be event boundaries, per stream (events path and
        # creation time: a stream deleted and created again is another one): a fact that never
        # changes once true, so each is checked against the data once per process
        self._boundaries: dict[tuple[str, object], set[tuple[int, int]]] = {}
        # whether data that never changes (``may_hold_chunks``' ``fixed`` key) may hold chunks
        self._chunk_answers: dict[tuple[str, Hashable], bool] = {}
        # per thread, inside ``one_read``: summaries of pinned versions already asked for
        self._pinned = threading.local()

    def stream_dir(self, scope: str, stream: str) -> str:
        return f"{self.root}/{scope}/{stream}"

    def events_path(self, scope: str, stream: str) -> str:
        """The stream's events table: the stream itself, ``root/<scope>/<stream>``."""
        return self.stream_dir(scope, stream)

    # ---- events ------------------------------------------------------------------------------
    def events(self, scope: str, stream: str, version: int | None = None) -> DataFrame:
        """The events table (at ``version``) with absolute offsets: ``EVENTS_VIEW_COLUMNS``."""
        return events_view(self.backend.read(self.events_path(scope, stream), version))

    def data_files(self, scope: str, stream: str, version: int | None = None
                   ) -> tuple[int | None, dict[int, list[tuple[int, int]]] | None]:
        """The events table's version to read (``version``, else the latest) and each segment's
        data files there (``[base_offset, end_offset)``, control records' files left out), when
        the log lists them without a Spark job; else ``(version, None)``, asking nothing of a
        backend that reads no log."""
        if not self.backend.reads_log_changes:
            return version, None
        state = self.backend.table_state(self.events_path(scope, stream), version)
        if state.files is None:
            return version, None
        extents: dict[int, list[tuple[int, int]]] = {}
        for f in state.files:
            sid, base, end = (f.int_partition(c) for c in EVENTS_PARTITIONS)
            if sid >= 0 and end > base:
                extents.setdefault(sid, []).append((base, end))
        return state.version, extents

    def events_version(self, scope: str, stream: str) -> int:
        return self.backend.version(self.events_path(scope, stream))

    def empty_events_commit(self, scope: str, stream: str) -> int:
        """Commit nothing to the events table (a version no reader or writer sees a change in);
        returns its version: a start position that exists for Delta's streaming source."""
        return self.backend.transaction(self.events_path(scope, stream)).commit(None)

    def known_boundaries(self, scope: str, stream: str, creation_time: object) -> set[tuple[int, int]]:
        """The (mutable) set of positions of the stream created at ``creation_time`` known to be
        event boundaries (no request: the stream's row, read anyway, names it)."""
        return self._boundaries.setdefault((self.events_path(scope, stream), creation_time), set())

    @contextmanager
    def one_read(self) -> Iterator[None]:
        """Within the block (one read, in this thread), ``segment_summary`` of a pinned version
        answers from an earlier answer at that version when it covered the segments asked for:
        a version's data never changes. Outside it nothing is kept (a table deleted and created
        again reuses version numbers)."""
        outer = getattr(self._pinned, "memo", None)
        self._pinned.memo = {} if outer is None else outer
        try:
            yield
        finally:
            self._pinned.memo = outer

    def segment_summary(self, scope: str, stream: str, segment_ids: Iterable[int],
                        version: int | None = None) -> dict[int, _delta.PartitionSummary]:
        """Per segment with files: its largest ``end_offset`` and its rows' ``record_type`` range,
        at the events table's latest version (or ``version``), from the log: the checksum file's
        file list (no Spark job), else one query over the snapshot's file list. Known per
        version: asking again before the table changes costs a look at its log (inside
        ``one_read``, nothing for a pinned version)."""
        ids = sorted({int(s) for s in segment_ids})
        path = self.events_path(scope, stream)
        memo = getattr(self._pinned, "memo", None) if version is not None else None
        if memo is not None and (path, version) in memo and set(ids) <= memo[path, version][0]:
            found = memo[path, version][1]
            return {sid: found[sid] for sid in ids if sid in found}
        found = self.backend.summarize(path, EVENTS_PARTITION, ids, "end_offset", "record_type", version)
        if memo is not None:
            covered, known = memo.get((path, version), (set(), {}))
            memo[path, version] = (covered | set(ids), {**known, **found})
        return found

    def segment_tails(self, scope: str, stream: str, segment_ids: Iterable[int],
                      version: int | None = None) -> dict[int, SegmentTail]:
        """Length of each segment (0 if empty) and whether it is sealed, at the events table's
        latest version (or ``version``): ``segment_summary``."""
        ids = sorted(set(segment_ids))
        summary = self.segment_summary(scope, stream, ids, version) if ids else {}
        return {sid: segment_tail(summary[sid]) if sid in summary else SegmentTail(0, False) for sid in ids}

    def may_hold_chunks(self, scope: str, stream: str, segment_ids: Iterable[int], version: int | None = None,
                        fixed: Hashable | None = None) -> bool:
        """Whether the segments may hold large-event chunk rows at the events table's latest
        version (or ``version``): False only if none of these segments' files has a
        ``record_type`` as low as a chunk's, by their statistics (``segment_summary``).

        ``fixed``: a key naming data that never changes (a stream's creation time and the
        ranges between two bounded cuts); the answer for it is kept. Either answer stays right:
        False means no chunk lies in that data, and True only costs an assembly that finds none.
        """
        ids = sorted(set(segment_ids))
        if not ids:
            return False
        key = (self.events_path(scope, stream), fixed)
        if fixed is not None and key in self._chunk_answers:
            return self._chunk_answers[key]
        summary = self.segment_summary(scope, stream, ids, version)
        answer = any(m.low is None or m.low <= max(CHUNK_TYPES) for m in summary.values())
        if fixed is not None:
            self._chunk_answers[key] = answer
        return answer

    def segment_tails_in(self, txn: _delta.TableTransaction, scope: str, stream: str,
                         segment_ids: Sequence[int]) -> dict[int, SegmentTail]:
        """Like ``segment_tails``, as of ``txn``'s snapshot of the events table, from file
        statistics (the data is aggregated only if a file has none)."""
        summary = txn.summarize(EVENTS_PARTITION, list(segment_ids), "end_offset", "record_type")
        return {sid: segment_tail(summary[sid]) if sid in summary else SegmentTail(0, False) for sid in segment_ids}

    def seal_segments(self, scope: str, stream: str, segment_ids: Sequence[int]) -> dict[int, int]:
        """Close each segment with a seal record at its length (idempotent); returns sealed sizes.

        The seal commit is fenced like an append: it fails if an append lands in one of the
        segments meanwhile, so an append and a seal never both succeed for the same bytes.
        """
        path = self.events_path(scope, stream)
        ids = sorted({int(s) for s in segment_ids})

        def attempt() -> dict[int, int]:
            txn = self.backend.transaction(path)
            txn.fence_partitions(EVENTS_PARTITION, ids)
            tails = self.segment_tails_in(txn, scope, stream, ids)
            todo = {sid: t.length for sid, t in tails.items() if not t.sealed}
            if todo:
                now = utc_now()
                markers = [control_row(sid, size, RECORD_SEAL, now) for sid, size in todo.items()]
                failpoint("seal:before_commit")
                txn.commit(txn.write_rows(markers, EVENTS_SCHEMA, EVENTS_PARTITIONS, EVENTS_STATS_COLUMNS),
                           EVENTS_PARTITIONS)
            return {sid: t.length for sid, t in tails.items()}

        return _delta.retrying(attempt, f"seal segments {ids} of {scope}/{stream}", SEAL_RETRY)

    # ---- truncation --------------------------------------------------------------------------
    def mark_truncation_starts(self, scope: str, stream: str, starts: Mapping[int, int]) -> int:
        """Make sure each segment of ``starts`` has a TRUNCATE record at its new start offset.

        The record keeps the segment's length known once every event below the offset is deleted
        (a cut may sit at an open segment's tail). It claims no new bytes (the offset is at or
        below the tail), so it is a plain append; an append racing with it retries on its fence.
        Returns the number of records added (0 when a previous attempt already added them).
        """
        if not starts:
            return 0
        txn = self.backend.transaction(self.events_path(scope, stream))
        files = txn.all_files()
        if files is not None:  # a marker is always a file of its own: its statistics say so
            present = set()
            for f in files:
                low, high = f.min_values, f.max_values
                if low.get("record_type") == high.get("record_type") == RECORD_TRUNCATE:
                    present.add((f.int_partition(EVENTS_PARTITION), f.int_partition("base_offset") + low.get("rel_offset")))
        else:
            present = {(r[0], r[1]) for r in self.events(scope, stream, txn.read_version)
                       .where(F.col("segment_id").isin(list(starts)) & (F.col("record_type") == RECORD_TRUNCATE))
                       .select("segment_id", "offset").collect()}
        now = utc_now()
        rows = [control_row(sid, off, RECORD_TRUNCATE, now)
                for sid, off in sorted(starts.items()) if (sid, off) not in present]
        if rows:  # a blind append: it claims no bytes, so it needs no fence
            txn.commit(txn.write_rows(rows, EVENTS_SCHEMA, EVENTS_PARTITIONS, EVENTS_STATS_COLUMNS),
                       EVENTS_PARTITIONS)
        return len(rows)

    def delete_segments(self, scope: str, stream: str, segment_ids: Sequence[int]) -> _delta.CommitMetrics:
        """Delete whole segments: one DELETE commit that removes their files and rewrites none."""
        if not segment_ids:
            return _delta.CommitMetrics(None, {})
        path, below = self.events_path(scope, stream), {int(s): None for s in segment_ids}
        return _delta.retrying(lambda: self.backend.truncate(path, EVENTS_PARTITION, below),
                               f"delete segments of {scope}/{stream}")

    def delete_below(self, scope: str, stream: str, starts: Mapping[int, int]) -> _delta.CommitMetrics:
        """Delete the records below each segment's new start offset (files holding only such
        records are removed, files straddling the offset are rewritten without them)."""
        if not starts:
            return _delta.CommitMetrics(None, {})
        path, below = self.events_path(scope, stream), {int(s): int(o) for s, o in starts.items()}
        return _delta.retrying(lambda: self.backend.truncate(path, EVENTS_PARTITION, below),
                               f"truncate segments of {scope}/{stream}")
