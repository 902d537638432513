"""Stream invariants, checked with Great Expectations (``StreamManager.validate_stream``).

Each invariant is stated once, in :data:`INVARIANTS`: the prepared table it is stated on and the
SQL predicate of a row that breaks it. The prepared tables come from the stream's Delta tables:

- ``segments``: one row per segment, with the part of its key range its successors cover;
- ``epochs``: one row per (epoch, member segment), with where the neighbouring members end and
  start (an epoch with no member gets a row with a null segment);
- ``events``: one row per row of the events table, with its neighbours in its segment (a window
  per segment ordered by offset), the segment's readable start (the head) and sealed size: a pure
  DataFrame transformation, the one that reads the data;
- ``stream_cuts``: the head, each subscriber's cut, each retention record and each watermark, with
  the cut comparisons that need the segment history (made in Python by ``stream_cut``).

The three small tables are built on the driver (Python over the rows Delta's checksums list): a
Spark job costs a few hundred milliseconds here however small its input.

``with_violations`` adds to a prepared table one boolean column per invariant: whether the row
breaks it. Great Expectations then runs two suites (``gx_suites.py``), ``events`` and ``metadata`` (the
three small tables in one batch): one expectation per invariant, all fed by one metric, so each
batch costs one Spark aggregation however many invariants it has.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from time import monotonic
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from .. import _delta
from ..controller.client import Controller
from ..errors import InvalidStreamCutError
from ..store import segment_ranges
from ..store.schema import (
    CHUNK_TYPES,
    HEADER_SIZE,
    MARKS_SEGMENT,
    RECORD_CHUNK,
    RECORD_EVENT,
    RECORD_SEAL,
    RECORD_STAGED,
    RECORD_TRUNCATE,
    RECORD_WRITE_MARK,
    SHARD_KINDS,
    STREAM_KEY,
    VIOLATION_PREFIX,
    WATERMARKS_TABLE,
)
from ..store.store import CATALOG, stream_key
from ..stream.cut_algorithms import stream_cut_equal_or_after, validate_stream_cut
from ..stream.record import SCALING, SEALING, UPDATING, StreamRecord
from ..stream.segments import SegmentRecord
from ..stream.stream_cut import StreamCut
from ..tables.kv_router import partition_column
from ..tables.table_entries import KeyValueTableConfiguration
from ..writers.transactions import (
    epoch_ms,
    remove_decided_staging,
    staging_partition,
    transaction_states,
)

log = logging.getLogger("pravega_spark")

SEGMENTS, EPOCHS, EVENTS, STREAM_CUTS = "segments", "epochs", "events", "stream_cuts"
PLACEMENT = "placement"
KV_ENTRIES = "kv_entries"
METADATA = "metadata"
# the prepared tables each batch checks
BATCH_TABLES = {METADATA: (SEGMENTS, EPOCHS, STREAM_CUTS, PLACEMENT), EVENTS: (EVENTS,), KV_ENTRIES: (KV_ENTRIES,)}
# the tables a format-2 stream kept beside (or as) its events: none may hold a log in format 3
LEGACY_STREAM_TABLES = ("events", "segments", "retention_set", "subscribers", "writer_marks", "watermarks",
                        "autoscale", "transient")
# successors' key ranges are compared by the length they cover: allow float rounding, not a gap
KEY_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Invariant:
    """One invariant: ``violated_when`` is a SQL predicate over ``table``'s prepared columns."""

    name: str
    table: str
    violated_when: str
    description: str


_READABLE = f"record_type IN ({RECORD_EVENT}, {', '.join(map(str, CHUNK_TYPES))}) AND segment_id >= 0"
_STARTS_EVENT = f"(record_type = {RECORD_EVENT} OR (record_type IN {CHUNK_TYPES} AND offset = event_offset))"

INVARIANTS: tuple[Invariant, ...] = (
    # ---- segments
    Invariant("segment_id_encoding", SEGMENTS,
              "segment_id <> (shiftleft(CAST(creation_epoch AS BIGINT), 32) | segment_number) "
              "OR segment_number < 0 OR creation_epoch < 0",
              "a segment's id is Pravega's creation_epoch << 32 | segment_number"),
    Invariant("segment_key_range", SEGMENTS,
              "NOT (key_start >= 0 AND key_start < key_end AND key_end <= 1) "
              "OR (sealed_epoch IS NOT NULL AND (sealed_epoch <= creation_epoch OR sealed_size IS NULL))",
              "a segment's key range is a non-empty part of [0, 1); it is sealed after its creation epoch, "
              "with a sealed size"),
    Invariant("successors_cover_sealed_range", SEGMENTS,
              f"sealed_epoch IS NOT NULL AND abs(successor_coverage - (key_end - key_start)) > {KEY_TOLERANCE}",
              "a segment sealed by a scale has successors (segments created in its sealed epoch) covering "
              "its key range"),
    # ---- epochs
    Invariant("epoch_covers_key_space", EPOCHS,
              "segment_id IS NULL OR key_start <> expected_key_start OR key_end <> expected_key_end",
              "every epoch's segments cover [0, 1) with no gap and no overlap"),
    # ---- events
    Invariant("offsets_contiguous", EVENTS,
              f"{_READABLE} AND known_segment AND offset > coalesce(previous_next_offset, readable_from)",
              "in every segment, events follow each other with no gap, from the head's offset (or 0)"),
    Invariant("offsets_unique", EVENTS,
              f"{_READABLE} AND offset < previous_next_offset",
              "no two rows of a segment share an offset or overlap"),
    Invariant("event_framing", EVENTS,
              f"{_READABLE} AND next_offset <> offset + header_size + payload_size",
              f"next_offset = offset + {HEADER_SIZE} + len(event) (a large event's header in its first chunk only)"),
    Invariant("large_events_complete", EVENTS,
              f"{_READABLE} AND ("
              f"(record_type IN {CHUNK_TYPES} AND offset <> event_offset AND "
              f"(previous_record_type IS DISTINCT FROM {RECORD_CHUNK} OR previous_event_offset IS DISTINCT FROM event_offset)) "
              f"OR ({_STARTS_EVENT} AND previous_record_type <=> {RECORD_CHUNK}) "
              f"OR (record_type = {RECORD_CHUNK} AND following_record_type IS NULL) "
              f"OR (record_type IN {CHUNK_TYPES} AND event_offset IS NULL))",
              "a large event's chunks are contiguous, from its first chunk to its last (no orphan or "
              "uncommitted chunk is readable)"),
    Invariant("nothing_beyond_seal", EVENTS,
              f"{_READABLE} AND sealed_size IS NOT NULL AND next_offset > sealed_size",
              "nothing lies beyond a sealed segment's sealed size"),
    Invariant("nothing_below_head", EVENTS,
              f"{_READABLE} AND known_segment AND (readable_from IS NULL OR offset < readable_from)",
              "no readable row lies below the head (nor in a segment deleted by truncation)"),
    Invariant("seal_records_at_sealed_size", EVENTS,
              f"record_type = {RECORD_SEAL} AND segment_id >= 0 AND "
              "((sealed_size IS NOT NULL AND offset <> sealed_size) OR (sealed_size IS NULL AND NOT workflow_pending))",
              "a seal record sits at its segment's sealed size (or belongs to a scale or seal in progress)"),
    Invariant("records_in_their_files", EVENTS,
              f"segment_id >= 0 AND ((({_READABLE}) AND NOT data_file) "
              f"OR (record_type IN ({RECORD_SEAL}, {RECORD_TRUNCATE}) AND data_file))",
              "in a segment, events and chunks lie in data files (end_offset > base_offset) and control "
              "records in files of their own (base_offset = end_offset): reads pick files by partition values"),
    Invariant("rows_in_stream_segments", EVENTS,
              "segment_id >= 0 AND NOT known_segment",
              "every row of a segment partition belongs to one of the stream's segments"),
    Invariant("staged_data_hidden", EVENTS,
              f"(segment_id < 0 AND (record_type <> {RECORD_STAGED} OR NOT staging_open) "
              f"AND NOT (segment_id = {MARKS_SEGMENT} AND record_type = {RECORD_WRITE_MARK}) "
              f"AND NOT (segment_id < {MARKS_SEGMENT} AND record_type IN ({', '.join(map(str, CHUNK_TYPES))}))) "
              f"OR (segment_id >= 0 AND record_type NOT IN ({RECORD_EVENT}, {RECORD_SEAL}, {RECORD_TRUNCATE}, "
              f"{', '.join(map(str, CHUNK_TYPES))}))",
              "staged transaction data stays staged (never an event, never in a segment) and only for "
              "undecided transactions; write marks and large events' staged chunks stay in their partitions"),
    # ---- stream cuts
    Invariant("head_matches_truncation_record", STREAM_CUTS,
              "kind = 'head' AND NOT matches_truncation_record",
              "the head cut is the truncation record's cut (epoch 0 at offset 0 before any truncation)"),
    Invariant("head_at_or_before_tail", STREAM_CUTS,
              "kind = 'head' AND NOT tail_at_or_after",
              "head <= tail"),
    Invariant("subscriber_cuts_valid", STREAM_CUTS,
              "kind = 'subscriber' AND NOT valid",
              "every subscriber cut is a valid cut of the stream"),
    Invariant("subscriber_cuts_not_behind_head", STREAM_CUTS,
              "kind = 'subscriber' AND valid AND NOT at_or_after_head",
              "no subscriber cut is behind the head"),
    Invariant("retention_set_increasing", STREAM_CUTS,
              "kind = 'retention_record' AND (time <= previous_time OR size < previous_size)",
              "the retention set's records increase in recording time and size"),
    Invariant("watermarks_monotone", STREAM_CUTS,
              "kind = 'watermark' AND (time < previous_time OR upper_time < previous_upper_time "
              "OR NOT at_or_after_previous)",
              "watermarks (in emission order) never go back in time or position"),

    # ---- placement (format 3: where the stream's rows and tables are)
    Invariant("rows_in_their_shard", PLACEMENT,
              "kind = 'shard_table' AND holds_rows AND NOT expected",
              "the stream's rows of every kind are only in the shard table of its key"),
    Invariant("one_stream_row", PLACEMENT,
              "kind = 'catalog' AND size <> 1",
              "the stream's catalogue shard holds exactly one row of it"),
    Invariant("stream_is_one_table", PLACEMENT,
              "kind = 'stream_table' AND size > 0",
              "the stream is one Delta table: no table of the format-2 layout under it"),

    # ---- key-value tables (``kv_entries``: one row per entry of a KVT's entries table)
    Invariant("kv_one_live_entry_per_key", KV_ENTRIES,
              "same_version_entries > 1",
              "a key has one entry per version, so one live entry (its newest)"),
    Invariant("kv_versions_increase_per_key", KV_ENTRIES,
              "(previous_version IS NOT NULL AND version <= previous_version) OR version > row_commit_version "
              "OR version < 1",
              "a key's versions increase in the order the log added its entries (each at most the version "
              "of the commit that added it)"),
    Invariant("kv_key_in_its_partition", KV_ENTRIES,
              "partition <> expected_partition OR key_hash <> expected_key_hash",
              "every key lies in the partition its primary key hashes to, with its key hash"),
    Invariant("kv_key_length", KV_ENTRIES,
              "key_length <> expected_key_length OR (NOT removed AND value_length IS NULL)",
              "every key has exactly the table's primary + secondary key length; only tombstones lack a value"),)




def with_violations(df: DataFrame, *, tables: Sequence[str]) -> DataFrame:
    """Adds one boolean column ``violates_<invariant>`` per invariant of ``tables``: whether the
    row (a row of that invariant's table, by its ``table`` column) breaks it."""

    def broken(i: Invariant):
        return (F.coalesce(F.col("table") == F.lit(i.table), F.lit(False))
                & F.coalesce(F.expr(i.violated_when), F.lit(False))).alias(VIOLATION_PREFIX + i.name)

    return df.select("*", *[broken(i) for i in INVARIANTS if i.table in tables])


# ---- prepared tables ---------------------------------------------------------------------------
# the small tables share one schema (each row fills its own table's columns): they are checked as
# one batch, ``metadata``
METADATA_DDL = (
    "table string, kind string, name string, "
    # segments
    "segment_id bigint, segment_number int, creation_epoch int, key_start double, key_end double, "
    "sealed_epoch int, sealed_size bigint, successor_coverage double, "
    # epochs (segment_id, key_start, key_end as above)
    "epoch int, expected_key_start double, expected_key_end double, "
    # stream cuts
    "stream_cut string, time timestamp, previous_time timestamp, upper_time timestamp, "
    "previous_upper_time timestamp, size bigint, previous_size bigint, valid boolean, "
    "matches_truncation_record boolean, tail_at_or_after boolean, at_or_after_head boolean, "
    "at_or_after_previous boolean, "
    # placement (size as above: rows of the stream in a catalogue, tables nested in the stream's)
    "holds_rows boolean, expected boolean")
METADATA_COLUMNS = [c.strip().split(" ")[0] for c in METADATA_DDL.split(",")]


def segment_rows(segments: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The ``segments`` table from the segments table's rows as stored: each segment plus
    ``successor_coverage``, the length of its key range that the segments created in its sealed
    epoch cover (null while open)."""
    created: dict[int, list[Mapping[str, Any]]] = {}
    for t in segments:
        created.setdefault(t["creation_epoch"], []).append(t)
    out = []
    for s in segments:
        coverage = None
        if s["sealed_epoch"] is not None:
            coverage = sum(max(0.0, min(t["key_end"], s["key_end"]) - max(t["key_start"], s["key_start"]))
                           for t in created.get(s["sealed_epoch"], []))
        out.append({"table": SEGMENTS, "kind": "segment", "name": str(s["segment_id"]),
                    **{c: s[c] for c in ("segment_id", "segment_number", "creation_epoch", "key_start", "key_end",
                                         "sealed_epoch", "sealed_size")},
                    "successor_coverage": coverage})
    return out


def epoch_rows(segments: Sequence[Mapping[str, Any]], current_epoch: int) -> list[dict]:
    """The ``epochs`` table: one row per (epoch, member segment) for epochs ``0..current_epoch``,
    with ``expected_key_start`` (where the previous member by key ends, 0 for the first) and
    ``expected_key_end`` (where the next one starts, 1 for the last). An epoch with no member gets
    one row with a null segment."""
    out = []
    for epoch in range(current_epoch + 1):
        members = sorted((s["key_start"], s["key_end"], s["segment_id"]) for s in segments
                          if s["creation_epoch"] <= epoch and (s["sealed_epoch"] is None or s["sealed_epoch"] > epoch))
        row = {"table": EPOCHS, "kind": "epoch_member", "name": str(epoch), "epoch": epoch}
        if not members:
            out.append({**row, "expected_key_start": 0.0, "expected_key_end": 1.0})
        for i, (start, end, sid) in enumerate(members):
            out.append({**row, "segment_id": sid, "key_start": start, "key_end": end,
                        "expected_key_start": members[i - 1][1] if i else 0.0,
                        "expected_key_end": members[i + 1][0] if i + 1 < len(members) else 1.0})
    return out


def _long_map(values: Mapping[int, int | None]) -> Any:
    if not values:
        return F.create_map().cast("map<bigint,bigint>")
    pairs = [c for k, v in sorted(values.items()) for c in (F.lit(k).cast("bigint"), F.lit(v).cast("bigint"))]
    return F.create_map(*pairs)


def event_walk(events: DataFrame, *, readable_from: Mapping[int, int | None], sealed_sizes: Mapping[int, int],
               undecided_staging: Iterable[int], workflow_pending: bool) -> DataFrame:
    """Each row of the events table with what its invariants need (pure; one window per segment),
    as the ``events`` table.

    Args:
        events: the events table.
        readable_from: for every segment of the stream, the first readable offset (the head's
            offset, 0 after the head) or None for a segment deleted by truncation.
        sealed_sizes: the sealed size of each sealed segment.
        undecided_staging: the staging partitions of transactions not yet committed or aborted.
        workflow_pending: a scale or seal is in progress (its seal records may precede the
            segments table's sealed sizes).
    """
    order = Window.partitionBy("segment_id", "readable").orderBy("offset", "next_offset")
    starts = _long_map(readable_from)
    staging = sorted(int(s) for s in undecided_staging)
    record_type = F.col("record_type")
    first_chunk = record_type.isin(*CHUNK_TYPES) & (F.col("offset") == F.col("event_offset"))
    kind = (F.when(F.col("segment_id") < 0, "staged").when(record_type == RECORD_EVENT, "event")
            .when(record_type.isin(*CHUNK_TYPES), "chunk").when(record_type == RECORD_SEAL, "seal")
            .when(record_type == RECORD_TRUNCATE, "truncate").otherwise("other"))
    rows = events.select("segment_id", "offset", "next_offset", "record_type", "event_offset",
                         F.coalesce(F.length("event"), F.lit(0)).cast("bigint").alias("payload_size"),
                         F.expr(_READABLE).alias("readable"),
                         (F.col("end_offset") > F.col("base_offset")).alias("data_file"))
    return rows.select(
        F.lit(EVENTS).alias("table"), kind.alias("kind"), "*",
        F.when((record_type == RECORD_EVENT) | first_chunk, HEADER_SIZE).otherwise(0).alias("header_size"),
        F.lag("offset").over(order).alias("previous_offset"),
        F.lag("next_offset").over(order).alias("previous_next_offset"),
        F.lag("record_type").over(order).alias("previous_record_type"),
        F.lag("event_offset").over(order).alias("previous_event_offset"),
        F.lead("record_type").over(order).alias("following_record_type"),
        F.map_contains_key(starts, F.col("segment_id")).alias("known_segment"),
        F.try_element_at(starts, F.col("segment_id")).alias("readable_from"),
        F.try_element_at(_long_map(sealed_sizes), F.col("segment_id")).alias("sealed_size"),
        (F.col("segment_id").isin(staging) if staging else F.lit(False)).alias("staging_open"),
        F.lit(bool(workflow_pending)).alias("workflow_pending"))


@dataclass
class StreamCutFacts:
    """What the ``stream_cuts`` table is built from (read by ``StreamManager.validate_stream``)."""

    head: StreamCut
    truncation_cut: StreamCut | None  # the truncation record's cut; None if never truncated
    stored_head: StreamCut | None     # the stream row's head; None if never truncated
    tail: StreamCut
    records: Sequence[SegmentRecord]
    subscribers: list[tuple[str, str, StreamCut | None, bool]] = field(default_factory=list)  # name, text, cut, valid
    retention_records: list[tuple[datetime, int, StreamCut]] = field(default_factory=list)  # time order
    watermarks: list[tuple[datetime, datetime, StreamCut]] = field(default_factory=list)  # emission order


def stream_cut_rows(facts: StreamCutFacts) -> list[dict]:
    """The ``stream_cuts`` table: the head, subscriber cuts, retention records (time order) and
    watermarks (emission order), each with its previous one's values and the cut comparisons
    (made with the segment history)."""
    records = facts.records

    def after(cut1: StreamCut, cut2: StreamCut) -> bool:
        return stream_cut_equal_or_after(cut1, cut2, records)

    def row(kind: str, name: str, cut_text: str, **values) -> dict:
        return {"table": STREAM_CUTS, "kind": kind, "name": name, "stream_cut": cut_text, **values}

    matches = facts.stored_head == facts.truncation_cut if facts.truncation_cut is not None else facts.stored_head is None
    rows = [row("head", "head", facts.head.as_text(), matches_truncation_record=matches,
                tail_at_or_after=after(facts.tail, facts.head))]
    for name, text, cut, valid in facts.subscribers:
        rows.append(row("subscriber", name, text, valid=valid,
                        at_or_after_head=valid and cut is not None and after(cut, facts.head)))
    previous = None
    for i, (time, size, cut) in enumerate(facts.retention_records):
        rows.append(row("retention_record", str(i), cut.as_text(), time=time, size=size,
                        previous_time=previous and previous[0], previous_size=previous and previous[1]))
        previous = (time, size)
    previous = None
    for i, (lower, upper, cut) in enumerate(facts.watermarks):
        rows.append(row("watermark", str(i), cut.as_text(), time=lower, upper_time=upper,
                        previous_time=previous and previous[0], previous_upper_time=previous and previous[1],
                        at_or_after_previous=previous is None or after(cut, previous[2])))
        previous = (lower, upper, cut)
    return rows


def metadata_table(spark: SparkSession, rows: Iterable[Mapping[str, Any]]) -> DataFrame:
    """The small tables as one local DataFrame with their ``violates_*`` columns (evaluated by
    Spark on the driver, then held as a local relation that GX's metric counts without a job)."""
    df = spark.createDataFrame([tuple(r.get(c) for c in METADATA_COLUMNS) for r in rows], METADATA_DDL)
    flagged = df.transform(with_violations, tables=(SEGMENTS, EPOCHS, STREAM_CUTS, PLACEMENT))
    return spark.createDataFrame(flagged.collect(), flagged.schema)


# ---- the result ----------------------------------------------------------------------------------
class ExpectationResult(NamedTuple):
    """One expectation's outcome: the invariant's name, whether it held, and the details (its
    table and description, rows checked, rows breaking it and up to 5 of them)."""

    expectation: str
    success: bool
    details: dict


class StreamValidation:
    """The outcome of ``StreamManager.validate_stream``.

    Attributes:
        stream: the scoped stream name.
        success: every expectation held.
        results: one ``ExpectationResult(expectation, success, details)`` per expectation.
        counts: rows checked, by kind (``segment``, ``epoch_member``, ``event``, ``chunk``,
            ``seal``, ``truncate``, ``staged``, ``head``, ``subscriber``, ``retention_record``,
            ``watermark``), and the numbers of epochs and expectations.
    """

    def __init__(self, stream: str, results: list[ExpectationResult], counts: dict[str, int], gx_run=None) -> None:
        self.stream = stream
        self.results = results
        self.counts = counts
        self.success = all(r.success for r in results)
        self._gx_run = gx_run

    @property
    def failures(self) -> list[ExpectationResult]:
        """The expectations that did not hold."""
        return [r for r in self.results if not r.success]

    def __bool__(self) -> bool:
        return self.success

    def __repr__(self) -> str:
        failed = ", ".join(r.expectation for r in self.failures)
        return (f"StreamValidation({self.stream}, success={self.success}, {len(self.results)} expectations"
                + (f", failed: {failed}" if failed else "") + f", events={self.counts.get('event', 0)})")

    def __str__(self) -> str:
        lines = [repr(self)]
        for r in self.failures:
            lines.append(f"  FAILED {r.expectation}: {r.details.get('unexpected_count')} of "
                         f"{r.details.get('element_count')} {r.details.get('table')} rows: {r.details.get('description')}")
            lines.extend(f"    {example}" for example in r.details.get("examples", [])[:3])
        return "\n".join(lines)

    def to_df(self, spark: SparkSession) -> DataFrame:
        """One row per expectation (``expectation, table, success, unexpected_count,
        element_count, description, examples``), for ``display()``."""
        rows = [(r.expectation, r.details.get("table"), r.success, r.details.get("unexpected_count"),
                 r.details.get("element_count"), r.details.get("description"),
                 [str(e) for e in r.details.get("examples", [])]) for r in self.results]
        return spark.createDataFrame(rows, "expectation string, table string, success boolean, "
                                           "unexpected_count bigint, element_count bigint, description string, "
                                           "examples array<string>")

    def to_html(self, path: str) -> str:
        """Write Great Expectations Data Docs of this validation into the folder ``path``;
        returns the index page's path."""
        if self._gx_run is None:
            raise ValueError("this result holds no Great Expectations run")
        return self._gx_run.build_data_docs(path)


# ---- validate_stream -----------------------------------------------------------------------------
def _subscriber_cuts(controller: Controller, record: StreamRecord, records, readable_from: Mapping[int, int | None]) -> list:
    """``(subscriber, cut text, cut or None, valid)`` for each subscriber that published a cut.

    A cut is valid if its structure is (``validate_stream_cut``) and each offset above its
    segment's readable start is an event boundary (below the head the data is gone: a cut there
    is judged by ``subscriber_cuts_not_behind_head``, not as invalid)."""
    parsed = []  # (subscriber, text, cut or None when its structure is invalid)
    for row in controller.store.subscriber_rows(record.scope, record.stream):
        positions = {int(e["segment_id"]): int(e["offset"]) for e in row["stream_cut"] or []}
        if not positions:
            continue  # subscribed, nothing published yet
        try:
            cut = StreamCut(record.scoped_name, positions)
            validate_stream_cut(cut, records, None)
            parsed.append((row["subscriber"], cut.as_text(), cut))
        except (InvalidStreamCutError, TypeError, ValueError):
            parsed.append((row["subscriber"], ",".join(f"{s}:{o}" for s, o in sorted(positions.items())), None))

    def above_head(cut: StreamCut) -> list[tuple[int, int]]:
        return [(s, o) for s, o in cut.positions.items() if readable_from.get(s) is not None and o > readable_from[s]]

    # one boundary probe for every subscriber's offsets
    boundary = segment_ranges.event_boundary_checker(controller.store.events(record.scope, record.stream),
                                             [p for _, _, cut in parsed if cut is not None for p in above_head(cut)])
    return [(name, text, cut, cut is not None and all(boundary(s, o) for s, o in above_head(cut)))
            for name, text, cut in parsed]


def _watermarks(controller: Controller, scope: str, stream: str) -> list[tuple[datetime, datetime, StreamCut]]:
    """The emitted watermarks in emission order."""
    rows = sorted(controller.store.shard_rows(WATERMARKS_TABLE, scope, stream),
                  key=lambda r: (r["emit_time"], r["lower_time_bound"]))
    return [(r["lower_time_bound"], r["upper_time_bound"], StreamCut.from_text(r["stream_cut"])) for r in rows]


def _undecided_staging(controller: Controller, scope: str, stream: str) -> list[int]:
    """The staging partitions of transactions neither committed nor aborted (a timed-out one
    keeps its staged rows until the timeout job aborts it)."""
    txn = controller.store.backend.transaction(controller.store.events_path(scope, stream))
    return [staging_partition(uuid.UUID(t["txn_id"])) for t in transaction_states(txn, epoch_ms())
            if t["status"] == "OPEN" or t["timed_out"]]


def _quiet_version(controller: Controller, scope: str, stream: str, attempts: int = 20) -> tuple[StreamRecord, int]:
    """The settled stream row and an events-table version read while that row did not change."""
    remove_decided_staging(controller.store.backend, controller.store.events_path(scope, stream), epoch_ms())
    for _ in range(attempts):
        record = controller.recover(controller.stream_record(scope, stream))
        version = controller.store.events_version(scope, stream)
        if controller.stream_record(scope, stream).row_version == record.row_version:
            return record, version
    raise RuntimeError(f"{scope}/{stream} kept changing while being validated ({attempts} attempts)")


def prepared_batches(controller: Controller, scope: str, stream: str) -> tuple[dict[str, DataFrame], int]:
    """The stream's two GX batches, ``metadata`` (segments, epochs and stream cuts) and ``events``,
    with their ``violates_*`` columns; and its number of epochs.

    A workflow a crashed process left half-done is completed first, as the next operation on the
    stream would (a truncation's deletes included). The events are read at one version, taken
    while the stream row stayed unchanged: no scale, truncation or seal moved on meanwhile."""
    store = controller.store
    record, version = _quiet_version(controller, scope, stream)
    records = store.segment_records(scope, stream)
    truncation = controller.truncation(record, records)
    head, tail = controller.head(record, records), controller.tail(record, records)
    deleted = set(truncation.deleted_segments) | set(truncation.to_delete)
    readable_from = {r.segment_id: None if r.segment_id in deleted else max(head.positions.get(r.segment_id, 0), 0)
                     for r in records}
    facts = StreamCutFacts(
        head=head, truncation_cut=truncation.stream_cut if record.truncation else None,
        stored_head=StreamCut.from_text(record.head_stream_cut) if record.head_stream_cut else None,
        tail=tail, records=records,
        subscribers=[(name, text, cut, valid) for name, text, cut, valid
                     in _subscriber_cuts(controller, record, records, readable_from)],
        retention_records=[(r.recording_time, r.recording_size, r.stream_cut)
                           for r in store.retention_records(scope, stream)],
        watermarks=_watermarks(controller, scope, stream))
    # the row's segments as stored (read without a Spark job), not the parsed records
    segments = store.segment_rows(scope, stream)
    walk = event_walk(store.events(scope, stream, version), readable_from=readable_from,
                      sealed_sizes={r.segment_id: r.sealed_size for r in records if r.sealed_size is not None},
                      undecided_staging=_undecided_staging(controller, scope, stream),
                      workflow_pending=record.state in (SCALING, SEALING, UPDATING))
    metadata = (segment_rows(segments) + epoch_rows(segments, record.current_epoch) + stream_cut_rows(facts)
                + placement_rows(store, scope, stream))
    return {METADATA: metadata_table(controller.spark, metadata),
            EVENTS: walk.transform(with_violations, tables=(EVENTS,))}, record.current_epoch + 1


def placement_rows(store, scope: str, stream: str) -> list[dict]:
    """The ``placement`` table: every existing shard table of every kind (whether it holds rows of
    the stream, and whether it is the one that should), the stream's catalogue rows, and the
    format-2 tables found under the stream's own. From the shard logs (no data read while a
    shard is small; one query for them all on the public-API backend)."""
    key = stream_key(scope, stream)
    paths = [(kind, path) for kind in (CATALOG, *SHARD_KINDS) for path in store.existing_shards(kind)]
    found = store.backend.read_rows_together([(path, STREAM_KEY, key) for _, path in paths]) if paths else []
    if found is None:
        found = [store.table_rows(path, STREAM_KEY, key) for _, path in paths]
    rows = []
    for (kind, path), held in zip(paths, found, strict=True):
        mine = [r for r in held if r.get(STREAM_KEY) == key]
        rows.append({"table": PLACEMENT, "kind": "shard_table", "name": path, "holds_rows": bool(mine),
                     "expected": path == store.shard_path(kind, key)})
        if kind == CATALOG and path == store.shard_path(kind, key):
            rows.append({"table": PLACEMENT, "kind": "catalog", "name": path,
                         "size": sum(r["scope"] == scope and r["stream"] == stream for r in mine)})
    nested = [n for n in LEGACY_STREAM_TABLES if store.backend.exists(f"{store.stream_dir(scope, stream)}/{n}")]
    rows.append({"table": PLACEMENT, "kind": "stream_table", "name": ",".join(nested) or "-", "size": len(nested)})
    return rows


def _gx_module():
    try:
        from . import gx_suites
    except ImportError as exc:  # the `quality` extra is not installed
        raise ImportError(f"validation needs Great Expectations 1.x: pip install 'pravega-spark[quality]' "
                          f"({exc})") from exc
    return gx_suites


def run_suites(name: str, batches: Mapping[str, DataFrame], counts: dict[str, int]) -> StreamValidation:
    """Run the Great Expectations suite of each prepared batch (its tables' invariants)."""
    run = _gx_module().GxRun(name)
    results: list[ExpectationResult] = []
    by_name = {i.name: i for i in INVARIANTS}
    for batch, df in batches.items():
        started = monotonic()
        invariants = [i for i in INVARIANTS if i.table in BATCH_TABLES[batch]]
        outcome = run.validate(batch, df, invariants)
        for invariant, success, result in outcome:
            results.append(ExpectationResult(invariant, success, {
                "table": by_name[invariant].table, "description": by_name[invariant].description,
                "element_count": result.get("element_count"), "unexpected_count": result.get("unexpected_count"),
                "examples": result.get("partial_unexpected_list") or []}))
            counts.update(result.get("rows_by_kind") or {})
        broken = [n for n, ok, _ in outcome if not ok]
        log.info("validate %s: %s: %s rows, %d expectations, %s (%.1f s)", name, batch,
                 outcome[0][2].get("element_count") if outcome else 0, len(outcome),
                 f"FAILED {broken}" if broken else "all hold", monotonic() - started)
    counts["expectations"] = len(results)
    validation = StreamValidation(name, results, counts, run)
    (log.info if validation.success else log.warning)("%r", validation)
    return validation


def validate_stream(controller: Controller, scope: str, stream: str) -> StreamValidation:
    """Run the Great Expectations suites of the stream's invariants (see the module docstring)."""
    _gx_module()
    batches, epochs = prepared_batches(controller, scope, stream)
    return run_suites(f"{scope}/{stream}", batches, {"epochs": epochs})


# ---- key-value tables ------------------------------------------------------------------------------
def kv_entry_walk(entries: DataFrame, *, config: KeyValueTableConfiguration) -> DataFrame:
    """A KVT's entries (with ``row_commit_version``: the commit that added each, null once the log
    no longer holds it) prepared for its
    invariants: each entry with its key's previous entry in the log's order, the number of its
    key's entries at its version, and where its key belongs."""
    by_key = Window.partitionBy("key").orderBy("row_commit_version", "version")
    return (entries
            .withColumn("previous_version", F.lag("version").over(by_key))
            .withColumn("same_version_entries", F.count(F.lit(1)).over(Window.partitionBy("key", "version")))
            .withColumn("expected_partition", partition_column("key", primary_key_length=config.primary_key_length,
                                                               partition_count=config.partition_count))
            .withColumn("expected_key_hash", F.xxhash64("key"))
            .withColumn("key_length", F.length("key"))
            .withColumn("expected_key_length", F.lit(config.key_length))
            .withColumn("value_length", F.length("value"))
            .select(F.lit(KV_ENTRIES).alias("table"),
                    F.when(F.col("removed"), F.lit("tombstone")).otherwise(F.lit("entry")).alias("kind"),
                    F.hex("key").alias("key"), "partition", "key_hash", "version", "removed", "row_commit_version",
                    "previous_version", "same_version_entries", "expected_partition", "expected_key_hash",
                    "key_length", "expected_key_length", "value_length"))


def validate_key_value_table(kvt) -> StreamValidation:
    """Run the Great Expectations suite of a ``KeyValueTable``'s invariants (``kv_*``) over its
    entries table: one live entry per key, versions increasing per key in the log's order, every
    key in its hash partition, key lengths."""
    _gx_module()
    entries = kvt.entries_log().select("*", F.col("_metadata.file_name").alias("file_name"))
    added = _delta.backend_for(kvt.spark).added_in(kvt.path)  # file name -> the version of the commit that added it
    entries = entries.join(added, "file_name", "left").withColumnRenamed("added_in", "row_commit_version")
    prepared = entries.transform(kv_entry_walk, config=kvt.config).transform(with_violations, tables=(KV_ENTRIES,))
    return run_suites(f"{kvt.scope}/{kvt.name}", {KV_ENTRIES: prepared}, {})
