"""Structured Streaming: a stream's events as a streaming DataFrame (``manager.read_stream``).

The source is Delta's own streaming source over the stream's events table, so Spark's offset log,
exactly-once replay and admission control come with it. This module adds what the events table
needs on top, as DataFrame transformations:

- ``readable_events``: only real segments' events and large-event chunks; control records (seal,
  truncate) and staged manifests (open transactions) never show.
- ``from_start``: the rows at or after the start cut (``"earliest"`` is the head).
- ``above_head``: a scalar subquery over the stream's catalog row, read again each micro-batch,
  drops events a truncation removed after the query planned them (a query whose next data was
  truncated resumes at the head, as Pravega's reader does after ``TruncatedDataException``); the
  rows dropped are counted in an observed metric and logged as a warning by ``StreamListener``.
- ``large_event_reader.assemble_chunks``: a large event's chunks become one event inside the
  micro-batch holding its first chunk (one task, no shuffle); chunks that a rate limit left for
  the next batch are read from their files (committed together, in the event's directory).

Commit rules that keep Delta's source correct (tested): every commit that adds events is a pure
append (appends, transaction and large-event commits); compaction and manifest removals are
``dataChange=false`` (skipped by the source); truncation removes files, and its one mixed commit
(a straddling file rewritten without the rows below the head) adds only rows that the source
already delivered from the original file, so ``skipChangeCommits`` skips it correctly.

Offsets. Delta's offset ``(version, index)`` maps to a stream cut (``cut_at_version``): the end
of every segment as of the last version the batch consumed whole. ``StreamListener`` publishes it
as the reader group's subscriber cut after each committed batch and logs warnings;
``stream_progress`` maps a query's last progress to its cut and lag.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from .. import _delta
from ..controller import subscribers
from ..controller.client import Controller
from ..controller.stream_cut_helper import CutOrName
from ..errors import (
    InvalidConfigError,
    SkippedEventsError,
    StreamCutBehindError,
)
from ..store import events_log, segment_ranges
from ..store.store import stream_key
from ..stream.record import StreamRecord
from ..stream.segments import SegmentRecord, successors_with_predecessors
from ..stream.stream_cut import StreamCut
from ..stream.truncation import TruncationRecord
from .large_event_reader import assemble_chunks
from .reader_group import ReaderGroup, open_reader_group
from .reader_group_config import StreamDataRetention

log = logging.getLogger("pravega_spark")

# With only a byte limit Delta lifts its default cap of 1,000 files per batch; this byte limit is
# never reached, so without a user limit a micro-batch never ends inside a commit.
UNLIMITED_BYTES = "1048576g"
OBSERVED = "pravega_spark_read"  # the observed metrics' name prefix
HEAD_MODES = ("sink", "plan")  # who applies the head to a micro-batch: the library's sink, or the plan
# Over Spark Connect a ``head="sink"`` DataFrame names its stream in a column of its own, which
# only the library's sinks remove (``head_marker``): ``HEAD_MARKER`` + the URL-safe base64 of the
# JSON of root, scope and stream (no dot, space or quote: a plain column name)
HEAD_MARKER = "__pravega_spark_head_"
FOREACH_BATCH_SINK = "org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink"
_MAX_OFFSET = (1 << 63) - 1


# ---- source --------------------------------------------------------------------------------------
# a size as Spark reads one (``maxBytesPerTrigger="512m"``): digits and an optional unit
BYTE_SIZE = re.compile(r"[1-9][0-9]*([kmgtp]b?|b)?", re.IGNORECASE)


def source_options(max_bytes_per_trigger: int | str | None = None,
                   max_files_per_trigger: int | None = None) -> dict[str, str]:
    """Delta source options: change commits skipped (truncation's), the rate limit."""
    options = {"skipChangeCommits": "true"}
    if max_bytes_per_trigger is None and max_files_per_trigger is None:
        options["maxBytesPerTrigger"] = UNLIMITED_BYTES
    if max_bytes_per_trigger is not None:
        if isinstance(max_bytes_per_trigger, bool) or not isinstance(max_bytes_per_trigger, (int, str)) or (
                isinstance(max_bytes_per_trigger, int) and max_bytes_per_trigger <= 0) or (
                isinstance(max_bytes_per_trigger, str) and not BYTE_SIZE.fullmatch(max_bytes_per_trigger.strip())):
            raise InvalidConfigError(f"max_bytes_per_trigger must be a positive number of bytes, "
                                     f"got {max_bytes_per_trigger!r}")
        options["maxBytesPerTrigger"] = str(max_bytes_per_trigger)
    if max_files_per_trigger is not None:
        if isinstance(max_files_per_trigger, bool) or not isinstance(max_files_per_trigger, int) or \
                max_files_per_trigger <= 0:
            raise InvalidConfigError(f"max_files_per_trigger must be a positive int, got {max_files_per_trigger!r}")
        options["maxFilesPerTrigger"] = str(max_files_per_trigger)
    return options


def readable_events(raw: DataFrame) -> DataFrame:
    """The events view (absolute offsets) of a raw events-table DataFrame, keeping only real
    segments' events and large-event chunks: the data files of segment partitions, chosen by
    their partition values alone (``segment_ranges.DATA_FILES``: no row's ``record_type`` is read)."""
    return raw.where(f"segment_id >= 0 AND {segment_ranges.DATA_FILES}").selectExpr("segment_id", "base_offset + rel_offset AS offset", "base_offset + rel_next_offset AS next_offset",
        "record_type", "routing_key", "event", "writer_id", "write_time",
        "base_offset + rel_event_offset AS event_offset")


def before_cut(cut: StreamCut, records: Sequence[SegmentRecord]) -> list[int]:
    """The segments wholly before ``cut``: every known segment that is neither in the cut nor a
    (transitive) successor of one of its segments. Segments created later are all after it."""
    after = set(cut.positions)
    todo = list(after)
    while todo:
        for succ in successors_with_predecessors(records, todo.pop()):
            if succ not in after:
                after.add(succ)
                todo.append(succ)
    return sorted(r.segment_id for r in records if r.segment_id not in after)


def from_start(events: DataFrame, *, cut: StreamCut, records: Sequence[SegmentRecord]) -> DataFrame:
    """The rows at or after ``cut``: none of the segments before it, none below its offsets."""
    conditions = []
    before = before_cut(cut, records)
    if before:
        conditions.append(f"segment_id NOT IN ({', '.join(str(s) for s in before)})")
    below = [f"(segment_id = {int(s)} AND offset < {int(o)})" for s, o in sorted(cut.positions.items()) if o > 0]
    if below:
        conditions.append(f"NOT ({' OR '.join(below)})")
    return events.where(" AND ".join(conditions)) if conditions else events


def head_offsets(truncation_json: str | None) -> list[tuple[int, int]]:
    """``(segment_id, first readable offset)`` pairs from a stream row's truncation record: each
    head segment at its offset, each segment a truncation deleted (or is deleting) at "never"."""
    if not truncation_json:
        return []
    record = TruncationRecord.from_json(truncation_json)
    out = {int(sid): _MAX_OFFSET for sid in (*record.deleted_segments, *record.to_delete)}
    out.update({int(sid): max(int(offset), 0) for sid, offset in record.stream_cut.positions.items()})
    return sorted(out.items())


_TRUNCATION_SCHEMA = "struct<head: array<array<bigint>>, to_delete: array<bigint>, deleted_segments: array<bigint>>"


def head_map(streams: DataFrame, key: str, plain: bool = True):
    """A scalar subquery: the map from segment to its first readable offset (each head segment
    at its offset, each segment a truncation deleted or is deleting at "never"), from the
    stream's catalog partition. Spark evaluates it again for every micro-batch. ``plain``: the
    truncation record carries the head in plain JSON (records written before it did are parsed
    in Python)."""
    row = streams.where(F.col("stream_key") == key)
    if plain:
        t = F.from_json("truncation", _TRUNCATION_SCHEMA)
        never = F.lit(_MAX_OFFSET)

        def at_never(ids):
            return F.transform(F.coalesce(ids, F.array().cast("array<bigint>")),
                               lambda s: F.struct(s.alias("sid"), never.alias("head")))
        entries = F.concat(at_never(t["to_delete"]), at_never(t["deleted_segments"]),
                           F.transform(F.coalesce(t["head"], F.array().cast("array<array<bigint>>")),
                                       lambda p: F.struct(p[0].alias("sid"), p[1].alias("head"))))
    else:
        entries = F.udf(head_offsets, "array<struct<sid:bigint, head:bigint>>")("truncation")
    return row.select(F.map_from_entries(entries)).scalar()


def observed(events: DataFrame, *, name: str) -> DataFrame:
    """``events`` counted in the observed metric ``name``, no row dropped (``head="sink"``: the
    library's sink drops the rows below the head, and counts them)."""
    return events.observe(name, F.count(F.lit(1)).alias("rows"), F.lit(0).cast("long").alias("truncated_rows"))


def above_head(events: DataFrame, *, head, name: str) -> DataFrame:
    """Drops the rows below the stream's current head (``head_map``: a scalar subquery, cheaper
    than a join, which would copy every row), counting them in the observed metric ``name``
    (``truncated_rows``) with the batch's rows."""
    # one head expression in the plan: each copy would be planned (a Delta scan) on its own
    marked = events.select("*", (F.col("offset") < F.coalesce(F.element_at(head, F.col("segment_id")), F.lit(0))).alias("__below"))
    observed = marked.observe(name, F.count(F.lit(1)).alias("rows"), F.sum(F.col("__below").cast("long")).alias("truncated_rows"))
    return observed.where(~F.col("__below"))


# ---- the gap check (``events_log.skipped_events``) -------------------------------------------
def consumed_versions(start: DeltaOffset | None, end: DeltaOffset, first: int) -> tuple[int, int]:
    """The events-table versions whose log commits a micro-batch from ``start`` to ``end``
    consumed (``first``: where a query's log reading starts when it has no start offset yet)."""
    if end.snapshot:
        return 1, 0  # still inside the initial snapshot: no log commit read yet
    if start is None:
        lo = first
    else:
        lo = start.version + 1 if start.snapshot else start.version
    return lo, end.version if end.index >= 0 else end.version - 1


# ---- offsets and cuts --------------------------------------------------------------------------
@dataclass(frozen=True)
class DeltaOffset:
    """Delta's streaming offset: ``version``, the file ``index`` inside it (-1: none yet), and
    whether it is inside the initial snapshot taken at ``version``."""

    version: int
    index: int
    snapshot: bool

    @classmethod
    def from_json(cls, text: str | dict) -> DeltaOffset:
        if isinstance(text, str):
            try:
                data = json.loads(text)
            except json.JSONDecodeError:  # the dict's repr in some PySpark progress objects
                import ast
                data = ast.literal_eval(text)
        else:
            data = text
        return cls(int(data["reservoirVersion"]), int(data["index"]), bool(data.get("isStartingVersion", False)))

    @classmethod
    def parse(cls, text: str | dict | None) -> DeltaOffset | None:
        """``from_json``, or None for a missing offset (a query's first batch has no start)."""
        if text is None or (isinstance(text, str) and text.strip() in ("", "null", "None")):
            return None
        return cls.from_json(text)

    def consumed_version(self) -> int | None:
        """The last events-table version whose commits the query has consumed whole (None:
        the initial snapshot is not done yet)."""
        if self.snapshot:
            return None
        return self.version - 1


@dataclass(frozen=True)
class StreamProgress:
    """Where a streaming query reading a stream is: ``stream_cut`` (its position after the last
    committed micro-batch), ``unread_bytes`` (from there to the tail) and the ``batch_id``."""

    stream: str
    batch_id: int
    stream_cut: StreamCut
    unread_bytes: int

    def __repr__(self) -> str:
        return (f"StreamProgress({self.stream}, batch {self.batch_id}, {self.unread_bytes} bytes unread, "
                f"cut={self.stream_cut.positions})")


# ---- the listener ------------------------------------------------------------------------------
@dataclass
class _Source:
    """One ``read_stream`` DataFrame: its stream, start, group, events-table path, and the token
    naming its observed metric (``<OBSERVED>:<scope>/<stream>:<token>``), which tells its
    queries' progress events apart from other queries of the same stream."""

    controller: Controller
    scope: str
    stream: str
    start: StreamCut
    group: str | None
    path: str
    token: str
    first_version: int = 0  # the first events-table commit a new query reads from the log (not its snapshot)
    checked: dict = None  # query run id -> last events-table version the gap check passed
    failure: Exception | None = None
    head: str = "plan"  # who applies the head: the library's sink, or the plan (HEAD_MODES)
    applied: set = None  # head="sink": (query id, batch id) a library sink applied the head to
    head_seen: tuple | None = None  # head="sink": (catalog version, head) last read by current_head
    published: StreamCut | None = None  # with a group: the last cut this process published

    def __post_init__(self) -> None:
        self.checked = {}
        self.applied = set()

    def note_applied(self, query_id: str, batch_id: int) -> None:
        """A library sink applied the head to a micro-batch (the last 1,000 are kept)."""
        self.applied.add((query_id, int(batch_id)))
        if len(self.applied) > 1000:
            self.applied.discard(min(self.applied, key=lambda k: k[1]))

    def fail(self, query, failure: Exception) -> None:
        """Record why the query must stop (``stream_progress`` raises it), log it, and stop the
        query from another thread (never the listener's or the query's own)."""
        self.failure = failure
        log.error("query %s: %s", query.id if query is not None else "?", failure)
        if query is not None:
            threading.Thread(target=query.stop, name="pravega-spark-stop", daemon=True).start()

    @property
    def metric(self) -> str:
        return f"{OBSERVED}:{self.scope}/{self.stream}:{self.token}"


class StreamListener(StreamingQueryListener):
    """One per SparkSession: after each micro-batch of a ``read_stream`` query, publishes the
    reader group's subscriber cut and logs truncation warnings; it knows each query's source
    (``stream_progress``)."""

    _lock = threading.Lock()
    _installed: dict[int, StreamListener] = {}

    def __init__(self) -> None:
        self.sources: dict[str, _Source] = {}

    @classmethod
    def install(cls, spark) -> StreamListener:
        return _install_once(cls, spark, StreamListener)

    def register(self, source: _Source) -> None:
        self.sources[source.token] = source

    def sources_in(self, progress) -> Iterator[tuple[_Source, object, object]]:
        """``(source, source progress, observed metrics)`` of each ``read_stream`` DataFrame that
        a progress event (object or dict form) reports on."""
        metrics = _field(progress, "observedMetrics") or {}
        for name, row in metrics.items():
            source = self.sources.get(name.rsplit(":", 1)[-1]) if name.startswith(OBSERVED + ":") else None
            if source is None:
                continue
            for src in _field(progress, "sources"):
                if reads_table(_field(src, "description"), source.path) and _field(src, "endOffset"):
                    yield source, src, metric_values(row)

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        if event.exception and "FAILED_READ_FILE" in event.exception:
            log.error("TruncatedDataError: streaming query %s failed reading a data file that is gone "
                      "(truncated or compacted, then vacuumed): restart it with a new checkpoint location, from "
                      "the stream's head (start='earliest') or a stream cut", event.id)

    def onQueryProgress(self, event) -> None:
        try:
            self.progress(event.progress)
        except Exception:  # a listener must never kill the listener bus
            if any(s.controller.store.backend.is_stopped() for s in self.sources.values()):
                return  # a last progress event after the session stopped
            log.exception("pravega_spark could not handle the progress of query %s", event.progress.id)

    def progress(self, progress) -> None:
        for source, src, metrics in self.sources_in(progress):
            name = f"{source.scope}/{source.stream}"
            truncated = int(metrics["truncated_rows"] or 0)
            if truncated:
                log.warning("query %s batch %d: %d events of %s were truncated before it read them: it resumes "
                            "at the head", progress.id, progress.batchId, truncated, name)
            source.controller.store.backend.activate()
            end = DeltaOffset.from_json(_field(src, "endOffset"))
            if not self.check_head_applied(source, progress) or not self.check_gaps(source, progress, src, end):
                continue
            if source.group is not None:  # (``stream_progress`` computes positions on demand)
                source.published = publish(source.controller, source.group, name, cut_for_offset(source, end))

    def check_head_applied(self, source: _Source, progress) -> bool:
        """Stops a ``head="sink"`` query whose micro-batch reached a ``foreachBatch`` function
        that did not apply the head (not wrapped in ``ps.foreach_batch``): other sinks are
        stopped before their first batch (``HeadGuard``)."""
        if source.failure is not None:
            return False
        key = (str(_field(progress, "id")), int(_field(progress, "batchId")))
        if source.head != "sink" or key in source.applied or not _delta.foreach_batch_here(source.controller.spark):
            return True  # (over Spark Connect the sink runs on the server: ``head_marker`` guards it)
        source.fail(source.controller.spark.streams.get(str(progress.id)), InvalidConfigError(
            f"{source.scope}/{source.stream}: micro-batch {key[1]} of a head='sink' read_stream query reached a "
            "foreachBatch function that does not apply the stream's head; the query was stopped. Wrap the function "
            "in ps.foreach_batch (or use ps.idempotent_delta_sink), or read with head='plan'"))
        return False

    def check_gaps(self, source: _Source, progress, src, end: DeltaOffset) -> bool:
        """Fails the query loudly if the log commits its batch consumed skipped events
        (``skipped_events``): logs an error, stops the query, and ``stream_progress`` raises
        ``SkippedEventsError``; nothing is published past the gap."""
        if source.failure is not None:
            return False
        run = str(_field(progress, "runId"))
        start = DeltaOffset.parse(_field(src, "startOffset"))
        lo, hi = consumed_versions(start, end, source.first_version)
        lo = max(lo, source.checked.get(run, -1) + 1)
        if hi < lo:
            return True
        gaps = events_log.skipped_events(source.controller.store.backend.file_changes(source.path, lo, hi))
        source.checked[run] = hi
        if not gaps:
            return True
        source.failure = SkippedEventsError(
            f"{source.scope}/{source.stream}: the events table's commit(s) "
            + ", ".join(f"v{v} (segment {s} offsets {b}-{e})" for v, s, b, e in gaps[:5])
            + " added events that Delta's streaming source skips (a commit mixing adds and removes, or "
            "dataChange=false adds, written outside pravega-spark); the query stopped before publishing past them. "
            "Read the stream with read_events, or restart the query from a stream cut after those commits.")
        source.fail(source.controller.spark.streams.get(str(progress.id)), source.failure)
        return False


class HeadGuard(StreamingQueryListener):
    """Stops a query before its first micro-batch when it reads a ``head="sink"`` DataFrame into
    a sink other than ``foreachBatch``: such a sink would deliver rows below the stream's head.

    Spark runs ``onQueryStarted`` synchronously in the query's thread before the first batch: the
    guard reads the query's sink and plan there (``_delta.streaming_query_sink``), notes which
    ``head="sink"`` sources the query reads (``sources_of_query``: the library's sinks find them
    by the query id), and, for another sink, stops the query and waits until it is terminated, so
    it never runs a batch. Spark then drops the guard from its listener bus (it was interrupted
    while posting); a new guard takes its place."""

    _lock = threading.Lock()
    _installed: dict[int, HeadGuard] = {}

    def __init__(self, spark) -> None:
        self.spark = spark

    @classmethod
    def install(cls, spark) -> None:
        _install_once(cls, spark, lambda: HeadGuard(spark))

    def onQueryStarted(self, event) -> None:
        try:
            self.check(str(event.id))
        except Exception:  # a listener must never kill the listener bus
            log.exception("pravega_spark could not check the sink of query %s", event.id)

    def check(self, query_id: str) -> None:
        found = _delta.streaming_query_sink(self.spark, query_id)
        if found is None:
            return
        sink, plan = found
        sources = [source for source in list(_HEAD_IN_SINK.values()) if source.metric in plan]
        if not sources:
            return
        _QUERY_SOURCES[query_id] = sources
        if sink == FOREACH_BATCH_SINK:
            return
        names = ", ".join(sorted({f"{s.scope}/{s.stream}" for s in sources}))
        failure = InvalidConfigError(
            f"{names}: a read_stream DataFrame made with head='sink' is written by {sink.rsplit('.', 1)[-1]}, which "
            "does not apply the stream's head; the query was stopped before its first micro-batch. Write it with "
            "foreachBatch(ps.idempotent_delta_sink(...)) or foreachBatch(ps.foreach_batch(fn)), or read with "
            "head='plan'")
        query = self.spark.streams.get(query_id)
        _STOPPED_AT_START[query_id] = failure
        for source in sources:
            source.fail(query, failure)
        deadline = time.monotonic() + 30
        while query is not None and query.isActive and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._lock:  # Spark drops a listener interrupted while posting: a new guard takes over
            self._installed.pop(_delta.session_key(self.spark), None)
        threading.Thread(target=HeadGuard.install, args=(self.spark,), daemon=True).start()

    def onQueryProgress(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        _QUERY_SOURCES.pop(str(event.id), None)


# head="sink" sources by token, and the ones each running query reads (by query id): a batch's
# DataFrame belongs to the query's own cloned session, so these are the process's, not a session's
_HEAD_IN_SINK: dict[str, _Source] = {}
_QUERY_SOURCES: dict[str, list[_Source]] = {}
_STOPPED_AT_START: dict[str, Exception] = {}  # query id -> why HeadGuard stopped it


def sources_of_query(query_id: str | None) -> list[_Source]:
    """The ``head="sink"`` sources a running query reads (none for another query)."""
    return list(_QUERY_SOURCES.get(query_id or "", []))


def current_head(source: _Source) -> dict[int, int]:
    """The stream's head now, as ``{segment_id: first readable offset}`` (a segment a truncation
    deleted or is deleting: never readable), from the stream's catalog row: log and checksum
    reads, no Spark job; kept per version of the catalog, so an unchanged catalog costs one log
    listing."""
    source.head_seen, head = stream_head(source.controller, source.scope, source.stream, source.head_seen)
    return head


def stream_head(controller: Controller, scope: str, stream: str, seen: tuple | None) -> tuple[tuple, dict[int, int]]:
    """``current_head`` of a stream: ``(seen, head)``, where ``seen`` (its catalogue shard's
    version and id, and the head read then) is given back next time, so that an unchanged shard
    costs one look at its log."""
    version = controller.store.backend.latest(controller.store.catalog_path(stream_key(scope, stream)))
    if seen is None or seen[0] != version:
        seen = (version, dict(head_offsets(controller.stream_record(scope, stream).truncation)))
    return seen, dict(seen[1])


def _install_once(cls, spark, make):
    """The listener of class ``cls`` installed on ``spark``'s session (``cls._installed``, under
    ``cls._lock``), made with ``make()`` and added the first time."""
    with cls._lock:
        key = _delta.session_key(spark)
        listener = cls._installed.get(key)
        if listener is None:
            listener = cls._installed[key] = make()
            spark.streams.addListener(listener)
        return listener


def reads_table(description: str, path: str) -> bool:
    """Whether a progress report's source ``description`` (``DeltaSource[<path>]``, the path as
    the driver qualified it: ``file:/...`` for a local one) is the table at ``path``, which over
    Spark Connect is not qualified (``/...``)."""
    def plain(p: str) -> str:
        return p[len("file://"):] if p.startswith("file:///") else p[len("file:"):] if p.startswith("file:/") else p

    return description.startswith("DeltaSource[") and plain(description[len("DeltaSource["):-1]) == plain(path)


def metric_values(row) -> dict:
    """An observed metric's values by name: from a ``Row`` (a listener's event), or from the JSON
    form of a progress dict over Spark Connect (``query.lastProgress``: ``{"values": [...],
    "schema": {...}}``)."""
    data = row.asDict() if hasattr(row, "asDict") else dict(row)
    if set(data) == {"values", "schema"} and isinstance(data["schema"], dict):
        return dict(zip((f["name"] for f in data["schema"]["fields"]), data["values"], strict=True))
    return data


def _field(obj, name: str):
    """A field of a streaming progress object, or of its dict form."""
    return getattr(obj, name) if hasattr(obj, name) else obj[name]


def cut_for_offset(source: _Source, offset: DeltaOffset) -> StreamCut:
    """The stream cut a query at ``offset`` has reached: the stream's tail as of the last version
    it consumed whole, never before its start cut or the head."""
    version = offset.consumed_version()
    if version is None:
        return source.start
    cut = source.controller.cut_at_version(source.scope, source.stream, version)
    return source.controller.later_cut(source.scope, source.stream, cut, source.start)


def publish(controller: Controller, group: str, stream: str, cut: StreamCut) -> StreamCut:
    """Publish ``cut`` as reader group ``group``'s subscriber cut of ``stream`` if it moves it
    forward (a replayed batch reaches an older or equal cut: nothing changes); returns ``cut``."""
    scope, name = group.split("/", 1)
    handle = open_reader_group(controller, scope, name)
    try:
        subscribers.update_subscriber_stream_cut(controller, *stream.split("/"), handle.scoped_name,
                                                 handle.generation, cut)
    except StreamCutBehindError:
        return cut
    log.info("%r published %s at %s", handle, stream, cut.positions)
    return cut


# ---- the query -----------------------------------------------------------------------------------
def read_stream(controller: Controller, scope: str, stream: str, start: CutOrName = "earliest",
                reader_group: ReaderGroup | str | None = None, max_bytes_per_trigger: int | str | None = None,
                max_files_per_trigger: int | None = None, head: str = "plan") -> DataFrame:
    """``StreamManager.read_stream``: Delta's streaming source over the events table, readable
    rows from the start cut, chunks assembled, rows below the head dropped (by the library's sink,
    or by one head lookup in the plan: ``head``), one observed metric per batch, and the source
    registered with the session's listener."""
    if head not in HEAD_MODES:
        raise InvalidConfigError(f"head must be one of {HEAD_MODES}, got {head!r}")
    record, records = controller.settled_with_segments(scope, stream)
    store = controller.store
    options = source_options(max_bytes_per_trigger, max_files_per_trigger)
    group = streaming_group(controller, record, reader_group)
    if start == "latest":
        # the tail now, as a version that exists (Delta refuses a future one) and holds
        # nothing: an empty commit. A restarted query goes on from its checkpoint instead.
        version = store.empty_events_commit(scope, stream)
        options["startingVersion"] = str(version)
        start_cut = controller.tail(record, records, version)
    else:
        version = store.events_version(scope, stream)
        start_cut = controller.resolver(record, records)(start)
        if isinstance(start, StreamCut):
            controller.check_cuts(record, records, [start], before_probe=lambda: segment_ranges.check_read_bounds(
                start_cut, start_cut, controller.head(record, records), records))
    path = store.events_path(scope, stream)
    raw = controller.spark.readStream.format("delta").options(**options).load(path)
    events = raw.transform(readable_events)
    if isinstance(start, StreamCut):  # "earliest" is the head, which ``above_head`` keeps up to date
        events = events.transform(from_start, cut=start_cut, records=records)
    source = _Source(controller, scope, stream, start_cut, group, path, uuid.uuid4().hex[:12], version + 1, head=head)
    # after the chunks' branch is joined again: one head lookup (in the plan) and one metric per batch
    events = events.transform(assemble_chunks)
    if head == "plan":
        plain = not record.truncation or '"head"' in record.truncation
        events = events.transform(above_head, head=head_map(store.stream_rows(scope, stream), stream_key(scope, stream), plain),
                                  name=source.metric)
    else:
        events = events.transform(observed, name=source.metric)
        if _delta.foreach_batch_here(controller.spark):
            _HEAD_IN_SINK[source.token] = source
            HeadGuard.install(controller.spark)
    StreamListener.install(controller.spark).register(source)
    log.info("read_stream %s from %s%s%s", record.scoped_name, start if isinstance(start, str) else start_cut,
             f", publishing for reader group {group}" if group else "",
             ", the head applied by the library's sink" if head == "sink" else "")
    events = events.transform(segment_ranges.select_read_columns, scope=scope, stream=stream)
    if head == "sink" and not _delta.foreach_batch_here(controller.spark):
        events = events.transform(head_marker, root=controller.root, scope=scope, stream=stream)
    return events


def head_marker(events: DataFrame, *, root: str, scope: str, stream: str) -> DataFrame:
    """``events`` with the column naming its stream for the library's sinks over Spark Connect,
    where they run in a Python worker of the server that this process's objects do not reach:
    ``marked_stream`` finds the stream there from the batch's column names alone, and the sink
    drops the column. Its value is a calendar interval, which no file sink can store: a Delta (or
    Parquet, JSON, ...) sink fails before its first batch is written, instead of delivering events
    below the head."""
    named = json.dumps({"root": root, "scope": scope, "stream": stream}, sort_keys=True).encode("utf-8")
    name = HEAD_MARKER + base64.urlsafe_b64encode(named).decode("ascii").rstrip("=")
    return events.withColumn(name, F.expr("make_interval(0, 0, 0, 0, 0, 0, 0)"))


def marked_stream(columns: Sequence[str]) -> tuple[str, dict] | None:
    """The ``head_marker`` column among ``columns`` and the stream it names (root, scope,
    stream), or None."""
    for column in columns:
        if column.startswith(HEAD_MARKER):
            encoded = column[len(HEAD_MARKER):]
            return column, json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return None


def streaming_group(controller: Controller, record: StreamRecord, group: ReaderGroup | str | None) -> str | None:
    """The scoped name of the reader group a ``read_stream`` publishes for (validated)."""
    if group is None:
        return None
    if isinstance(group, ReaderGroup):
        if group.scope != record.scope:
            raise InvalidConfigError(f"{group!r} is not a group of scope {record.scope}")
        handle = group
    elif isinstance(group, str):
        handle = open_reader_group(controller, record.scope, group)
    else:
        raise InvalidConfigError(f"reader_group must be a group name or ReaderGroup, got {group!r}")
    if handle.config.retention_type is StreamDataRetention.NONE:
        raise InvalidConfigError(f"{handle!r} has retention type NONE: it publishes no cut")
    if record.scoped_name not in handle.config.scoped_streams:
        raise InvalidConfigError(f"{handle!r} does not read {record.scoped_name}")
    return handle.scoped_name


def stream_progress(controller: Controller, query, timeout_seconds: float = 30.0) -> StreamProgress | None:
    """``StreamManager.stream_progress``: the query's cut after its last committed batch and the
    bytes from there to the tail, once the listeners have handled its progress so far."""
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)) or timeout_seconds < 0:
        raise InvalidConfigError(f"timeout_seconds must be a number of seconds, zero or more, got {timeout_seconds!r}")
    controller.store.backend.wait_for_listeners(timeout_seconds)
    if str(query.id) in _STOPPED_AT_START:
        raise _STOPPED_AT_START[str(query.id)]
    progress = query.lastProgress
    if progress is None:
        return None
    for source, src, _ in StreamListener.install(controller.spark).sources_in(progress):
        if source.failure is not None:
            raise source.failure
        cut = cut_for_offset(source, DeltaOffset.from_json(_field(src, "endOffset")))
        if source.group is not None and source.published != cut:
            # the listener publishes each batch's cut as it ends, on classic in the driver and over
            # Spark Connect in this client, which Spark informs asynchronously (after the query's
            # end, at times): one it has not published yet is published here, so that on return the
            # group's cut is there on both
            source.published = publish(controller, source.group, f"{source.scope}/{source.stream}", cut)
        unread = controller.size_between(source.scope, source.stream, cut, "latest")
        return StreamProgress(f"{source.scope}/{source.stream}", _field(progress, "batchId"), cut, unread)
    return None
