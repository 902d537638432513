"""Watermarks: writer marks and Pravega's ``PeriodicWatermarking``.

Per stream, two kinds of rows in the store's shard tables (``Store.shard_rows``):

- ``writer_marks`` (a partition per writer: ``writer_key``, a hash of the writer id): each writer's latest ``note_time`` — its time,
  its position (the end of its latest write in each segment it wrote), whether it is alive
  (``close()`` clears it), when it noted, and since when the watermark job has seen it stale.
- ``watermarks``: the emitted watermarks, each a lower and upper time bound and a stream cut that
  is an upper bound of the participating writers' positions.

One round (``compute_round``), as Pravega's ``filterWritersAndComputeWatermark``:

1. A writer *participates* if its time is after the previous watermark's lower bound. A writer
   that does not is tracked from the first round that sees it stale (``stale_since``, persisted);
   it stays *active* while alive and stale for less than the stream's
   ``timestamp_aggregation_timeout``. Inactive writers are removed.
2. No active writer, or an active writer that does not participate: no watermark this round.
3. Otherwise ``lower = min(time)``, ``upper = max(time)`` over the active writers; nothing is
   emitted unless ``lower`` is after the previous lower bound.
4. The cut is the positional upper bound of their positions (``upper_bound``), folded with the
   previous watermark's cut (so it never goes back), and completed with segments of the highest
   epoch at offset 0 where a key range is missing (``complete_cut``).

The pure parts (``upper_bound``, ``missing_ranges``, ``complete_cut``, ``time_window``) are plain
Python over segment records; the rest reads and commits the two kinds of rows.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame

from ..errors import InvalidWriterMarkError, StreamNotFoundError
from ..store.clock import as_utc
from ..store.schema import (
    WATERMARKS_SCHEMA,
    WATERMARKS_TABLE,
    WRITER_KEY,
    WRITER_MARKS_SCHEMA,
    WRITER_MARKS_TABLE,
)
from ..stream.cut_algorithms import stream_cut_equal_or_after
from ..stream.segments import SegmentRecord, epoch_members
from ..stream.stream_cut import StreamCut
from .client import Controller

log = logging.getLogger("pravega_spark")

# Pravega's StreamConfiguration default (0: a stale writer is not waited for).
DEFAULT_AGGREGATION_TIMEOUT = timedelta(0)

@dataclass(frozen=True)
class WriterMark:
    """A writer's latest noted time and position (Pravega's ``WriterMark``)."""

    writer_id: str
    time: datetime
    position: dict[int, int]
    is_alive: bool
    stale_since: datetime | None = None


@dataclass(frozen=True)
class Watermark:
    """An emitted watermark: every event after ``stream_cut`` has a time above ``lower_time_bound``
    (as noted by its writers); ``upper_time_bound`` is the newest time among them."""

    lower_time_bound: datetime
    upper_time_bound: datetime
    stream_cut: StreamCut

    def __repr__(self) -> str:
        return (f"Watermark([{self.lower_time_bound.isoformat()}, {self.upper_time_bound.isoformat()}], "
                f"{self.stream_cut.as_text()})")


@dataclass(frozen=True)
class TimeWindow:
    """Pravega's ``TimeWindow`` for a reader position: every event after it was noted at or after
    ``lower_time_bound``; ``upper_time_bound`` bounds the events before it. None: unknown."""

    lower_time_bound: datetime | None
    upper_time_bound: datetime | None


# ---- pure computation ----------------------------------------------------------------------------
def _overlap(a: SegmentRecord, b: SegmentRecord) -> bool:
    return a.key_start < b.key_end and a.key_end > b.key_start


def upper_bound(positions: Sequence[Mapping[int, int]], records: Sequence[SegmentRecord],
                start: Mapping[int, int] | None = None) -> dict[int, int]:
    """The positional upper bound of ``positions`` (Pravega's ``addToUpperBound``, in order).

    A segment already in the bound takes the max offset; a segment with a successor (a later
    overlapping segment) already in the bound is skipped; adding a segment removes its
    predecessors (earlier overlapping segments).
    """
    by_id = {r.segment_id: r for r in records}
    bound: dict[int, int] = dict(start or {})
    for position in positions:
        for sid, offset in position.items():
            if sid in bound:
                bound[sid] = max(bound[sid], offset)
                continue
            segment = by_id[sid]
            if any(_overlap(segment, by_id[x]) and sid < x for x in bound):
                continue
            for x in [x for x in bound if _overlap(segment, by_id[x]) and sid > x]:
                del bound[x]
            bound[sid] = offset
    return bound


def missing_ranges(bound: Mapping[int, int], records: Sequence[SegmentRecord]) -> list[tuple[float, float]]:
    """The key ranges the bound's segments leave uncovered (Pravega's ``findMissingRanges``)."""
    by_id = {r.segment_id: r for r in records}
    segments = sorted((by_id[s] for s in bound), key=lambda r: r.key_start)
    if not segments:
        return [(0.0, 1.0)]
    out = []
    if segments[0].key_start > 0.0:
        out.append((0.0, segments[0].key_start))
    for prev, nxt in zip(segments, segments[1:], strict=False):
        if prev.key_end != nxt.key_start:
            out.append((prev.key_end, nxt.key_start))
    if segments[-1].key_end < 1.0:
        out.append((segments[-1].key_end, 1.0))
    return out


def complete_cut(bound: Mapping[int, int], previous: Mapping[int, int] | None,
                 records: Sequence[SegmentRecord]) -> dict[int, int]:
    """``bound`` folded with the previous watermark's cut, then completed with segments of the
    highest epoch (at offset 0) until it covers the key space (Pravega's ``computeStreamCut``)."""
    cut = dict(bound)
    missing = missing_ranges(cut, records)
    if previous:
        cut = upper_bound([previous], records, start=cut)
    by_id = {r.segment_id: r for r in records}
    while missing:
        # (an empty bound, from writers that wrote nothing yet, starts from the current epoch)
        highest = max((by_id[s].creation_epoch for s in cut), default=max(r.creation_epoch for r in records))
        members = epoch_members(records, highest)
        for lo, hi in missing:
            cut = upper_bound([{s.segment_id: 0 for s in members if s.key_start < hi and s.key_end > lo}],
                              records, start=cut)
        missing = missing_ranges(cut, records)
    return cut


def compute_watermark(marks: Sequence[WriterMark], previous: Watermark | None,
                      records: Sequence[SegmentRecord], scoped_name: str) -> Watermark | None:
    """The watermark of these (active) writers' marks, or None if time did not advance."""
    if not marks:
        return None
    lower = min(m.time for m in marks)
    upper = max(m.time for m in marks)
    if previous is not None and lower <= previous.lower_time_bound:
        return None
    bound = upper_bound([m.position for m in marks], records)
    cut = complete_cut(bound, previous.stream_cut.positions if previous else None, records)
    return Watermark(lower, upper, StreamCut(scoped_name, cut))


def classify_writers(marks: Sequence[WriterMark], previous: Watermark | None, now: datetime,
                     timeout: timedelta) -> tuple[list[WriterMark], list[WriterMark], dict[str, datetime | None]]:
    """(active, inactive, new stale_since per writer whose tracking changes), as Pravega's
    ``isWriterActive`` / ``isWriterParticipating``."""
    active, inactive, stale = [], [], {}
    for mark in marks:
        if previous is None or mark.time > previous.lower_time_bound:
            active.append(mark)
            if mark.stale_since is not None:
                stale[mark.writer_id] = None
            continue
        since = mark.stale_since or now
        if mark.stale_since is None:
            stale[mark.writer_id] = now
        if mark.is_alive and now - since < timeout:
            active.append(mark)
        else:
            inactive.append(mark)
    return active, inactive, stale


def all_participating(active: Sequence[WriterMark], previous: Watermark | None) -> bool:
    return all(previous is None or m.time > previous.lower_time_bound for m in active)


def time_window(position: StreamCut, watermarks: Sequence[Watermark],
                records: Sequence[SegmentRecord]) -> TimeWindow:
    """The time window of a reader at ``position`` (Pravega's ``WatermarkReaderImpl``): the lower
    bound of the newest watermark the position is at or past, and the upper bound of the oldest
    watermark at or ahead of it."""
    lower = upper = None
    for wm in sorted(watermarks, key=lambda w: w.lower_time_bound):
        if stream_cut_equal_or_after(position, wm.stream_cut, records):
            lower = wm.lower_time_bound
        elif upper is None and stream_cut_equal_or_after(wm.stream_cut, position, records):
            upper = wm.upper_time_bound
    return TimeWindow(lower, upper)


# ---- tables --------------------------------------------------------------------------------------
def writer_key(writer_id: str) -> str:
    """The writer marks table's partition value of a writer: 16 hex digits of SHA-1 of its id."""
    return hashlib.sha1(writer_id.encode()).hexdigest()[:16]


def _utc(ts: datetime) -> datetime:
    if not isinstance(ts, datetime):
        raise InvalidWriterMarkError(f"a time is a datetime, got {type(ts).__name__}")
    return as_utc(ts)


def _mark_of(row) -> WriterMark:
    return WriterMark(row["writer_id"], _utc(row["time"]),
                      {int(e["segment_id"]): int(e["offset"]) for e in row["position"]},
                      bool(row["is_alive"]), _utc(row["stale_since"]) if row["stale_since"] else None)


def writer_marks(controller: Controller, scope: str, stream: str) -> list[WriterMark]:
    return [_mark_of(r) for r in controller.store.shard_rows(WRITER_MARKS_TABLE, scope, stream)]


def note_writer_mark(controller: Controller, scope: str, stream: str, writer_id: str, ts: datetime,
                     position: Mapping[int, int]) -> WriterMark:
    """Record (``ts``, ``position``) as ``writer_id``'s mark: one commit on its partition, which
    reads it, so a concurrent note of the same writer conflicts and is checked again."""
    ts = _utc(ts)
    controller.stream_record(scope, stream)
    key = writer_key(writer_id)

    def change(rows: list[dict]):
        mine = [r for r in rows if r["writer_id"] == writer_id]
        if mine:
            old = _mark_of(mine[0])
            if ts < old.time:
                raise InvalidWriterMarkError(f"writer {writer_id!r}: time {ts.isoformat()} is before its "
                                             f"last noted time {old.time.isoformat()}")
            behind = {s: o for s, o in position.items() if o < old.position.get(s, -1)}
            if behind:
                raise InvalidWriterMarkError(f"writer {writer_id!r}: position went backwards in {behind}")
        new = {WRITER_KEY: key, "writer_id": writer_id, "time": ts,
               "position": [{"segment_id": int(s), "offset": int(o)} for s, o in sorted(position.items())],
               "is_alive": True, "note_time": datetime.now(timezone.utc), "stale_since": None}
        return controller.store.as_tuples([*(r for r in rows if r["writer_id"] != writer_id), new],
                                          WRITER_MARKS_SCHEMA)

    controller.store.rewrite_shard_rows(WRITER_MARKS_TABLE, scope, stream, change,
                                        f"note time of {writer_id} on {scope}/{stream}", {WRITER_KEY: key})
    log.info("%s noted %s at %s on %s/%s", writer_id, ts.isoformat(), dict(position), scope, stream)
    return WriterMark(writer_id, ts, dict(position), True)


def shut_down_writer(controller: Controller, scope: str, stream: str, writer_id: str) -> bool:
    """Mark ``writer_id`` shut down (Pravega's ``writerShutdown``); False if it had no live mark."""
    def live(rows: list[dict]) -> bool:
        return any(r["writer_id"] == writer_id and r["is_alive"] for r in rows)

    if not live(controller.store.shard_rows(WRITER_MARKS_TABLE, scope, stream)):
        return False

    def change(rows: list[dict]):
        if not live(rows):
            return None
        return controller.store.as_tuples(
            [{**r, "is_alive": False} if r["writer_id"] == writer_id else r for r in rows], WRITER_MARKS_SCHEMA)

    return controller.store.rewrite_shard_rows(WRITER_MARKS_TABLE, scope, stream, change,
                                               f"shut down writer {writer_id} on {scope}/{stream}",
                                               {WRITER_KEY: writer_key(writer_id)})


def watermark_list(controller: Controller, scope: str, stream: str) -> list[Watermark]:
    rows = sorted(controller.store.shard_rows(WATERMARKS_TABLE, scope, stream), key=lambda r: r["lower_time_bound"])
    return [Watermark(_utc(r["lower_time_bound"]), _utc(r["upper_time_bound"]), StreamCut.from_text(r["stream_cut"]))
            for r in rows]


def watermarks_df(controller: Controller, scope: str, stream: str) -> DataFrame:
    return controller.store.shard_frame(WATERMARKS_TABLE, scope, stream).orderBy("lower_time_bound")


def compute_round(controller: Controller, scope: str, stream: str, now: datetime) -> Watermark | None:
    """One watermarking round for one stream; returns the emitted watermark (or None)."""
    record = controller.stream_record(scope, stream)
    marks = writer_marks(controller, scope, stream)
    if not marks:
        return None
    timeout = record.configuration.timestamp_aggregation_timeout or DEFAULT_AGGREGATION_TIMEOUT
    existing = watermark_list(controller, scope, stream)
    previous = existing[-1] if existing else None
    active, inactive, stale = classify_writers(marks, previous, now, timeout)
    _track_stale(controller, scope, stream, stale)
    if inactive:
        gone = {m.writer_id for m in inactive}
        controller.store.rewrite_shard_rows(
            WRITER_MARKS_TABLE, scope, stream,
            lambda rows: controller.store.as_tuples([r for r in rows if r["writer_id"] not in gone],
                                                    WRITER_MARKS_SCHEMA),
            f"remove inactive writers of {scope}/{stream}")
        log.info("watermarks %s/%s: removed inactive writers %s", scope, stream, [m.writer_id for m in inactive])
    if not active or not all_participating(active, previous):
        return None
    records = controller.store.segment_records(scope, stream)
    watermark = compute_watermark(active, previous, records, record.scoped_name)
    if watermark is None:
        return None
    schema = WATERMARKS_SCHEMA
    new = {"lower_time_bound": watermark.lower_time_bound, "upper_time_bound": watermark.upper_time_bound,
           "stream_cut": watermark.stream_cut.as_text(), "emit_time": now}

    def change(rows: list[dict]):
        # The round decided against ``previous``: if another round (a concurrent run) emitted
        # since, this one emits nothing, so each watermark follows the one it was computed from.
        # Of two rounds committing at once one conflicts, and its retry lands here.
        newest = max((_utc(r["lower_time_bound"]) for r in rows), default=None)
        if newest != (previous.lower_time_bound if previous is not None else None):
            return None
        # emission order is ``emit_time`` order, even when this round's ``now`` was taken
        # before the newest watermark's
        emitted = max([now, *(_utc(r["emit_time"]) for r in rows)])
        return controller.store.as_tuples([*rows, {**new, "emit_time": emitted}], schema)

    if not controller.store.rewrite_shard_rows(WATERMARKS_TABLE, scope, stream, change,
                                               f"emit a watermark on {scope}/{stream}"):
        return None
    log.info("watermarks %s/%s: emitted %r", scope, stream, watermark)
    return watermark


def _track_stale(controller: Controller, scope: str, stream: str, stale: Mapping[str, datetime | None]) -> None:
    if not stale:
        return

    def change(rows: list[dict]):
        return controller.store.as_tuples(
            [{**r, "stale_since": stale[r["writer_id"]]} if r["writer_id"] in stale else r for r in rows],
            WRITER_MARKS_SCHEMA)

    controller.store.rewrite_shard_rows(WRITER_MARKS_TABLE, scope, stream, change,
                                        f"track stale writers of {scope}/{stream}")


def compute_watermarks(controller: Controller, scope: str | None, stream: str | None,
                       now: datetime) -> dict[str, Watermark]:
    """``StreamManager.compute_watermarks``: one round on each stream (all, a scope's, or one);
    a stream deleted meanwhile is skipped."""
    out = {}
    for s, t in controller.stream_names(scope, stream):
        try:
            watermark = compute_round(controller, s, t, now)
        except StreamNotFoundError:
            continue
        if watermark is not None:
            out[f"{s}/{t}"] = watermark
    return out


def reader_time_window(controller: Controller, scope: str, stream: str, position: StreamCut | None) -> TimeWindow:
    """``StreamManager.time_window``: the window of a reader at ``position`` (default: the tail)."""
    record = controller.settled(scope, stream)
    records = controller.segment_records(scope, stream)
    if position is None:
        cut = controller.tail(record, records)
    else:
        controller.check_cuts(record, records, [position])
        cut = position
    return time_window(cut, watermark_list(controller, scope, stream), records)
