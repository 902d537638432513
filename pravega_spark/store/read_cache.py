"""What a read over Spark Connect knows of a stream before its scan: the stream's row and segment
records, kept per process for a few seconds, and the check that makes the scan fail when they
are stale.

Over Spark Connect every request is a round trip, and a read that asks for the stream's row
before its scan pays one each time. So ``read_events`` there takes the row from this cache and
resolves ``"latest"`` when Spark evaluates the DataFrame (SPEC, ``read_events``). Whatever
another client changes in between (a scale, a seal, a truncation, an update, a deletion and a
re-creation) changes the row's ``row_version`` or its creation time, and the scan's own plan
compares them with the cached ones (``stale_check``: a scalar subquery over the streams table):
a stale row fails the action with ``StaleReadError``'s message, never a wrong or partial result.

An entry serves reads for ``FRESH_SECONDS`` after it was fetched; then the next read fetches
the row again. A read made while a stale read's error is being handled (in an ``except`` block, or after a notebook cell failed with it) fetches
the row at once, so reading again after the error always sees the change. This process's own
changes to a stream's row drop its entry (``forget``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..errors import STALE_READ_MARKER
from ..stream.record import StreamRecord
from ..stream.segments import SegmentRecord
from .schema import CHUNK_TYPES

FRESH_SECONDS = 10.0  # how long a fetched row serves reads


def row_token(record: StreamRecord) -> str:
    """What identifies one state of a stream's row: its creation time (in microseconds) and its
    ``row_version`` (pure)."""
    micros = int(record.creation_time.timestamp()) * 1_000_000 + record.creation_time.microsecond
    return f"{micros}:{int(record.row_version)}"


def stale_check(stream_rows: DataFrame, record: StreamRecord) -> Column:
    """A condition that is true while the stream's row is still ``record`` and raises
    ``StaleReadError``'s message otherwise (the row changed, or the stream is gone).

    ``stream_rows``: the streams table's rows of this stream. The condition is a scalar
    subquery that raises by itself: Spark runs it once per evaluation, before the scan's first
    row, whether or not any row is left to scan (a per-row comparison would never run on a scan
    that stale segment ranges pruned to nothing). Keep it in a filter (``where``), where column
    pruning cannot drop it."""
    token = F.max(F.concat(F.unix_micros("creation_time").cast("string"), F.lit(":"),
                           F.col("row_version").cast("string")))
    message = (f"{STALE_READ_MARKER}: stream {record.scoped_name} changed after read_events was called "
               "(a scale, seal, truncation, update or re-creation by another client): call read_events again")
    return stream_rows.select(F.when(token == F.lit(row_token(record)), F.lit(True)).otherwise(
        F.raise_error(F.lit(message)).cast("boolean"))).scalar()


def no_chunks_check(record: StreamRecord) -> Column:
    """A row condition for a read that skips assembling large events because none was there when
    the entry was fetched: true for every other row, and ``StaleReadError``'s message on a chunk
    row (a large event committed since, by another client)."""
    message = (f"{STALE_READ_MARKER}: a large event was committed to stream {record.scoped_name} after "
               "read_events was called: call read_events again")
    return F.when(F.col("record_type").isin(*CHUNK_TYPES), F.raise_error(F.lit(message)).cast("boolean")
                  ).otherwise(F.lit(True))


@dataclass
class _Entry:
    record: StreamRecord
    records: list[SegmentRecord]
    chunks: bool | None = None  # whether the stream's segments may hold large-event chunks, once asked
    fetched: float = field(default=0.0, repr=False)  # time.monotonic() when fetched


Fetch = Callable[[str, str], tuple[StreamRecord, list[SegmentRecord]]]


def stale_error_seen(scoped_name: str) -> bool:
    """Whether this thread is handling a stale read's error for the stream, or the interactive
    interpreter's last error was one (a notebook cell that failed with it) (``sys`` only)."""
    marker = f"{STALE_READ_MARKER}: stream {scoped_name} "
    chunk_marker = f"committed to stream {scoped_name} after"
    for exc in (sys.exc_info()[1], getattr(sys, "last_value", None)):
        seen = exc
        while seen is not None:
            text = str(seen)
            if STALE_READ_MARKER in text and (marker in text or chunk_marker in text):
                return True
            seen = seen.__cause__ or seen.__context__
    return False


class StreamReadCache:
    """Per process, per stream: the settled row and segment records a Connect read starts from."""

    def __init__(self, fresh_seconds: float = FRESH_SECONDS) -> None:
        self.fresh_seconds = fresh_seconds
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._answered: set[int] = set()  # ids of the interpreter's last errors already acted on
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StreamReadCache({len(self._entries)} streams, fresh for {self.fresh_seconds:g} s)"

    def get(self, scope: str, stream: str, fetch: Fetch) -> _Entry:
        """The stream's entry: the cached one while fresh, else ``fetch(scope, stream)`` (a
        settled row and its records, finishing what a crash left half-done)."""
        key = (scope, stream)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and (time.monotonic() - entry.fetched > self.fresh_seconds or self._after_error(entry)):
            entry = None
        if entry is None:
            entry = _Entry(*fetch(scope, stream), fetched=time.monotonic())
            with self._lock:
                self._entries[key] = entry
        return entry

    def _after_error(self, entry: _Entry) -> bool:
        last = getattr(sys, "last_value", None)
        if not stale_error_seen(entry.record.scoped_name):
            return False
        if last is not None and sys.exc_info()[1] is None:  # a notebook's last error: acted on once
            if id(last) in self._answered:
                return False
            self._answered = {id(last)}
        return True

    def forget(self, scope: str, stream: str) -> None:
        """Drop the stream's entry (this process changed its row, or wrote large events)."""
        with self._lock:
            self._entries.pop((scope, stream), None)
