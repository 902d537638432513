"""Compaction: a segment's runs of small consecutive files rewritten into larger ones.

Every append adds at least one file per segment it writes to, and each file carries its own base
offset (a partition value), so Delta's ``OPTIMIZE`` cannot merge them. ``compact`` does it the
layout's way (Pravega's storage writer also merges a segment's small chunks): the files of a run
are consecutive in their segment (``[base_offset, end_offset)`` of one ends where the next
begins), so their rows can be rewritten into one file whose base is the run's first base, with
every relative offset shifted by its old file's distance from that base. Absolute offsets, and so
every event, cut, tail and boundary, stay exactly as they were.

One commit per call, ``dataChange=false`` for both the new files and the removed ones (Delta's
streaming source skips it, as it skips an ``OPTIMIZE``). The commit reads the files it replaces: a
concurrent truncation that removes one of them makes it fail and retry on the new state. Appends
add files above the runs and do not conflict. Readers in the middle of a query keep reading their
snapshot (removed files stay on storage until ``VACUUM``), so they see every event once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql import functions as F

from .. import _delta
from ..errors import InvalidConfigError, SegmentNotFoundError
from .schema import EVENTS_PARTITION, EVENTS_PARTITIONS

log = logging.getLogger("pravega_spark")

# A file under half the target is small; a run stops growing at the target.
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024


@dataclass(frozen=True)
class FileExtent:
    """One data file of a segment, as the log describes it."""

    path: str
    segment_id: int
    base_offset: int
    end_offset: int
    size: int


@dataclass(frozen=True)
class CompactionResult:
    """What one ``compact`` call did.

    Attributes:
        version: the events table's commit (None if there was nothing to compact).
        runs: runs rewritten, one new file each (per writing task).
        files_removed: small files replaced; files_added: the files that replace them.
        bytes_rewritten: the removed files' bytes.
        files_moved: files of an older store named again under their partition values' directory
            (no bytes rewritten; see ``_delta.misplaced``).
    """

    version: int | None = None
    runs: int = 0
    files_removed: int = 0
    files_added: int = 0
    bytes_rewritten: int = 0
    files_moved: int = 0

    def __repr__(self) -> str:
        return (f"CompactionResult(version={self.version}, runs={self.runs}, removed={self.files_removed}, "
                f"added={self.files_added}, bytes={self.bytes_rewritten}, moved={self.files_moved})")


def plan_runs(files: Iterable[FileExtent], target_size: int = DEFAULT_TARGET_FILE_SIZE) -> list[list[FileExtent]]:
    """Runs of at least two small event files, consecutive in their segment, together at most
    about ``target_size`` bytes (pure). Control records (zero-length files: seals, truncation
    markers) are never part of a run and do not break one."""
    small = target_size // 2
    by_segment: dict[int, list[FileExtent]] = {}
    for f in files:
        if f.end_offset > f.base_offset:
            by_segment.setdefault(f.segment_id, []).append(f)
    runs: list[list[FileExtent]] = []
    for sid in sorted(by_segment):
        run: list[FileExtent] = []
        for f in sorted(by_segment[sid], key=lambda f: (f.base_offset, f.end_offset, f.path)):
            joins = (run and f.size < small and f.base_offset in (run[-1].end_offset, run[-1].base_offset)
                     and sum(r.size for r in run) + f.size <= target_size)
            if joins:
                run.append(f)
                continue
            if len(run) >= 2:
                runs.append(run)
            run = [f] if f.size < small else []
        if len(run) >= 2:
            runs.append(run)
    return runs


def extent_of(add: _delta.FileEntry) -> FileExtent:
    """A data file's ``FileExtent``."""
    return FileExtent(add.path, add.int_partition(EVENTS_PARTITION), add.int_partition("base_offset"),
                      add.int_partition("end_offset"), add.size)


def compact_stream(controller, scope: str, stream: str, segment_ids: Sequence[int] | None = None,
                   target_file_size: int | None = None) -> CompactionResult:
    """``StreamManager.compact``: the stream must exist; ``target_file_size`` is checked."""
    controller.stream_record(scope, stream)
    if segment_ids is not None:
        ids = None if isinstance(segment_ids, (str, bytes)) else list(segment_ids)
        if ids is None or not all(isinstance(s, int) and not isinstance(s, bool) for s in ids):
            raise InvalidConfigError(f"segment_ids must be segment ids (ints), got {segment_ids!r}")
        known = {r.segment_id for r in controller.store.segment_records(scope, stream)}
        unknown = sorted(set(ids) - known)
        if unknown:
            raise SegmentNotFoundError(f"segments {unknown} are not segments of {scope}/{stream}")
        segment_ids = ids
    size = DEFAULT_TARGET_FILE_SIZE if target_file_size is None else target_file_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
        raise InvalidConfigError(f"target_file_size must be an int of at least 1024 bytes, got {size!r}")
    result = compact(controller.spark, controller.store.events_path(scope, stream), segment_ids, size)
    log.info("compact %s/%s: %r", scope, stream, result)
    return result


def compact(spark, events_path: str, segment_ids: Sequence[int] | None = None,
            target_size: int = DEFAULT_TARGET_FILE_SIZE, retry: _delta.RetryPolicy = _delta.DEFAULT_RETRY) -> CompactionResult:
    """Compact the events table at ``events_path`` (only ``segment_ids`` if given): one commit.
    Where the backend places files, the runs' files are read, rewritten and committed by hand
    (each new file keeping the earliest time of those it replaces); elsewhere one ``replaceWhere``
    overwrite of the runs' regions does the same rewrite (``rewrite_by_overwrite``)."""
    backend = _delta.backend_for(spark)

    def attempt() -> CompactionResult:
        txn = backend.transaction(events_path)
        files = txn.unfenced_files()
        if segment_ids is not None:
            wanted = {int(s) for s in segment_ids}
            files = [f for f in files if f.int_partition(EVENTS_PARTITION) in wanted]
        files = [f for f in files if f.int_partition(EVENTS_PARTITION) >= 0]
        by_path = {f.path: f for f in files}
        runs = plan_runs([extent_of(f) for f in files], target_size)
        inputs = [by_path[f.path] for run in runs for f in run]
        if not backend.places_files:
            if not runs:
                return CompactionResult()
            rewrite_by_overwrite(backend, events_path, runs)
            return CompactionResult(None, len(runs), len(inputs), len(runs), sum(f.size for f in inputs))
        # files of stores written before they were named under their partition values: renamed
        # there (a hard link locally), so engines that read partition values from paths agree
        rewritten = {f.path for f in inputs}
        misplaced = [f for f in files if f.path not in rewritten and _delta.misplaced(f, EVENTS_PARTITIONS)]
        if not runs and not misplaced:
            return CompactionResult()
        txn.track_files(inputs + misplaced)  # a concurrent removal of one of them (a truncation) fails us
        moved = [f.placed(data_change=False) for f in misplaced]
        if not runs:
            version = txn.commit(moved, EVENTS_PARTITIONS, txn.removals(misplaced, data_change=False))
            return CompactionResult(version, files_moved=len(misplaced))
        parts = []
        for run in runs:
            base, end = run[0].base_offset, max(f.end_offset for f in run)
            parts.append(shifted(txn.read_files([by_path[f.path] for f in run]), F.lit(base), F.lit(end)))
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        # one task (so one file) per run
        added = txn.write(rows.repartition(len(runs), "segment_id", "base_offset"), EVENTS_PARTITIONS)
        # each run's file keeps the earliest time of the files it replaces: Delta's streaming
        # source orders a snapshot by modification time (see ``_delta.commit_times``)
        first_time = {(run[0].segment_id, run[0].base_offset): min(by_path[f.path].modification_time for f in run)
                      for run in runs}
        adds = [f.placed(data_change=False, modification_time=first_time.get(
            (f.int_partition(EVENTS_PARTITION), f.int_partition("base_offset")))) for f in added]
        version = txn.commit(adds + moved, EVENTS_PARTITIONS, txn.removals(inputs + misplaced, data_change=False))
        return CompactionResult(version, len(runs), len(inputs), len(added), sum(f.size for f in inputs), len(misplaced))

    return _delta.retrying(attempt, f"compact {events_path}", retry)


def shifted(rows, base, end):
    """Event rows moved into a file whose partition values are ``base`` and ``end`` (columns):
    every relative offset shifted by the old base's distance from the new one (pure)."""
    shift = F.col("base_offset") - base
    return rows.select(
        "segment_id", base.cast("long").alias("base_offset"), end.cast("long").alias("end_offset"),
        (F.col("rel_offset") + shift).alias("rel_offset"), (F.col("rel_next_offset") + shift).alias("rel_next_offset"),
        "record_type", "routing_key", "event", "writer_id", "write_time",
        (F.col("rel_event_offset") + shift).alias("rel_event_offset"))


def region(run: Sequence[FileExtent]) -> str:
    """The partition values of a run's files (SQL): its segment's event files from the run's first
    base to its end (files there tile the offsets, so they are the run's; control records, whose
    files are empty ranges, stay out)."""
    return (f"(segment_id = {run[0].segment_id} AND base_offset >= {run[0].base_offset} AND "
            f"end_offset <= {max(f.end_offset for f in run)} AND end_offset > base_offset)")


def rewrite_by_overwrite(backend, events_path: str, runs: list[list[FileExtent]]) -> None:
    """Every run's rows rewritten into one file per run by one ``replaceWhere`` overwrite of the
    runs' regions that changes no data: a concurrent truncation removing one of their files makes
    it conflict (and retry). Its files get a new modification time (the public API sets none)."""
    base, end = F.lit(None).cast("long"), F.lit(None).cast("long")
    for run in reversed(runs):
        inside = F.expr(region(run))
        base = F.when(inside, F.lit(run[0].base_offset)).otherwise(base)
        end = F.when(inside, F.lit(max(f.end_offset for f in run))).otherwise(end)
    condition = " OR ".join(region(run) for run in runs)
    rows = shifted(backend.read(events_path).where(condition), base, end)
    backend.rewrite_where(events_path, rows.repartition(len(runs), "segment_id", "base_offset"), condition)
