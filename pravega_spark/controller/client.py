"""``Controller``: the store as writers, readers and services see it (Pravega's ``Controller``
client plus ``StreamCutHelper``).

One object per store, made by ``StreamManager`` and handed to the classes that commit
(``EventStreamWriter``, ``ReaderGroup``, ...) and to the services: a stream's settled row (any
pending workflow finished first), its segments, head, tail and truncation record, cut resolution
and checks. It reads, and finishes workflows others left half-done; it never starts one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..errors import ScopeNotFoundError, SegmentNotFoundError
from ..store.clock import as_utc
from ..store.store import Store
from ..stream import epochs as epoch_history
from ..stream.cut_algorithms import size_between
from ..stream.names import validate_scope_name, validate_stream_name
from ..stream.record import StreamInfo, StreamRecord
from ..stream.segments import SegmentRecord, predecessors, successors_with_predecessors
from ..stream.stream_cut import StreamCut
from ..stream.truncation import TruncationRecord
from . import stream_cut_helper, stream_tasks

CutOrName = stream_cut_helper.CutOrName


class Controller:
    """The read side of one store.

    Attributes:
        spark: the session every operation runs in.
        store: the store's tables (``store.store.Store``).
    """

    def __init__(self, spark: SparkSession, store: Store) -> None:
        self.spark = spark
        self.store = store


    @classmethod
    def for_root(cls, root: str) -> Controller:
        """A controller of the store at ``root`` (already qualified) in the active session: how
        pickled handles are rebuilt where they are unpickled (e.g. a ``foreachBatch`` function on
        a Spark Connect server)."""
        from .._session import active_session

        spark = active_session()
        return cls(spark, Store(spark, root))
    def __repr__(self) -> str:
        return f"Controller(root={self.store.root!r})"

    @property
    def root(self) -> str:
        return self.store.root

    # ---- a stream's row ----------------------------------------------------------------------
    def stream_record(self, scope: str, stream: str) -> StreamRecord:
        """The stream's row as stored; raises ``StreamNotFoundError``."""
        return stream_tasks.existing_stream(self.store, scope, stream)

    def recover(self, record: StreamRecord, finish_truncation: bool = True) -> StreamRecord:
        """``record`` after finishing the workflow a crashed process left half-done."""
        return stream_tasks.recover(self.store, record, finish_truncation)

    def settled(self, scope: str, stream: str) -> StreamRecord:
        """The stream's row after finishing a pending workflow (a truncation's deletes apart)."""
        return stream_tasks.settled(self.store, scope, stream)

    def active_stream(self, scope: str, stream: str) -> StreamRecord:
        """The stream's row once no scale or seal is pending; raises ``StreamSealedError``."""
        return stream_tasks.active_stream(self.store, scope, stream)

    def segment_records(self, scope: str, stream: str) -> list[SegmentRecord]:
        return self.store.segment_records(scope, stream)

    def settled_with_segments(self, scope: str, stream: str) -> tuple[StreamRecord, list[SegmentRecord]]:
        """``settled`` and ``segment_records``, in one request where the backend can."""
        return stream_tasks.settled_with_segments(self.store, scope, stream)

    def cached_with_segments(self, scope: str, stream: str):
        """``settled_with_segments`` from this process's read cache (``store.read_cache``): no
        request when the stream was read in the last few seconds."""
        return self.store.read_cache.get(scope, stream, self.settled_with_segments)

    def active_with_segments(self, scope: str, stream: str) -> tuple[StreamRecord, list[SegmentRecord]]:
        """``active_stream`` and ``segment_records``, in one request where the backend can."""
        return stream_tasks.active_with_segments(self.store, scope, stream)

    def stream_names(self, scope: str | None = None, stream: str | None = None) -> list[tuple[str, str]]:
        """``(scope, stream)`` of every stream of the store, or of ``scope``, or just one."""
        rows = self.store.streams()
        if scope is not None:
            rows = rows.where(F.col("scope") == validate_scope_name(scope))
        if stream is not None:
            rows = rows.where(F.col("stream") == validate_stream_name(stream))
        return sorted((r["scope"], r["stream"]) for r in rows.select("scope", "stream").collect())

    # ---- cuts --------------------------------------------------------------------------------
    def head(self, record: StreamRecord, records: Sequence[SegmentRecord]) -> StreamCut:
        return stream_cut_helper.head(record, records)

    def tail(self, record: StreamRecord, records: Sequence[SegmentRecord], version: int | None = None) -> StreamCut:
        return stream_cut_helper.tail(self.store, record, records, version)

    def truncation(self, record: StreamRecord, records: Sequence[SegmentRecord]) -> TruncationRecord:
        return stream_cut_helper.truncation(record, records)

    def head_stream_cut(self, scope: str, stream: str) -> StreamCut:
        return stream_cut_helper.head(*self.settled_with_segments(scope, stream))

    def tail_stream_cut(self, scope: str, stream: str) -> StreamCut:
        return self.tail(*self.settled_with_segments(scope, stream))

    def truncation_record(self, scope: str, stream: str) -> TruncationRecord:
        return stream_cut_helper.truncation(*self.settled_with_segments(scope, stream))

    def resolver(self, record: StreamRecord, records: Sequence[SegmentRecord], version: int | None = None,
                 tail: StreamCut | None = None) -> Callable[[CutOrName], StreamCut]:
        return stream_cut_helper.resolver(self.store, record, records, version, tail)

    def check_cuts(self, record: StreamRecord, records: Sequence[SegmentRecord], cuts: Sequence[StreamCut],
                   before_probe: Callable[[], None] | None = None) -> None:
        stream_cut_helper.check_cuts(self.store, record, records, cuts, before_probe)

    def stream_info(self, scope: str, stream: str) -> StreamInfo:
        """State, configuration, current epoch, head and tail cuts, and size of the stream."""
        record, records = self.settled_with_segments(scope, stream)
        head, tail = self.head(record, records), self.tail(record, records)
        return StreamInfo(scope, stream, record.state, record.configuration, record.current_epoch,
                          head, tail, size_between(head, tail, records, tail.positions))

    def stream_cut_at(self, scope: str, stream: str, at: datetime) -> StreamCut:
        """The tail as it was at ``at`` (see ``stream_cut_helper.cut_at_time``)."""
        record, records = self.settled_with_segments(scope, stream)
        return stream_cut_helper.cut_at_time(self.store, record, records, at)

    def size_between(self, scope: str, stream: str, from_cut: CutOrName = "earliest",
                     to_cut: CutOrName = "latest") -> int:
        """Framed bytes between two cuts (Pravega's ``sizeBetweenStreamCuts``)."""
        record, records = self.settled_with_segments(scope, stream)
        tail = self.tail(record, records)
        resolve = self.resolver(record, records, tail=tail)
        self.check_cuts(record, records, [c for c in (from_cut, to_cut) if isinstance(c, StreamCut)])
        return size_between(resolve(from_cut, "from_cut"), resolve(to_cut, "to_cut"), records, tail.positions)

    def cut_at_version(self, scope: str, stream: str, version: int) -> StreamCut:
        """The stream's tail as of events-table version ``version`` (see ``stream_cut_helper``)."""
        record, records = self.settled_with_segments(scope, stream)
        return stream_cut_helper.cut_at_version(self.store, record, records, version)

    def later_cut(self, scope: str, stream: str, cut: StreamCut, other: StreamCut) -> StreamCut:
        """``cut`` unless it is before ``other``."""
        return stream_cut_helper.later_cut(self.segment_records(scope, stream), cut, other)

    # ---- segments and epochs (Pravega's ``getSegments``, ``getSuccessors``, ...) ----------------
    def list_streams(self, scope: str, tag: str | None = None) -> DataFrame:
        """The scope's streams (optionally only those with ``tag``)."""
        validate_scope_name(scope)
        if not self.store.scope_exists(scope):
            raise ScopeNotFoundError(f"scope {scope} does not exist")
        df = self.store.streams().where(F.col("scope") == scope)
        if tag is not None:
            df = df.where(F.array_contains("tags", tag))
        return df.select("scope", "stream", "state", "tags", "current_epoch", "creation_time",
                         "update_time", "configuration").orderBy("stream")

    def segments(self, scope: str, stream: str, epoch: int | None = None) -> DataFrame:
        """The stream's segments (every one it ever had, or the members of ``epoch``)."""
        self.settled(scope, stream)
        df = self.store.segments(scope, stream)
        if epoch is not None:
            df = df.transform(epoch_history.filter_epoch_members, epoch=int(epoch))
        return df.orderBy("segment_id")

    def epochs(self, scope: str, stream: str) -> DataFrame:
        """One row per epoch: ``epoch, creation_time, segment_ids``."""
        record = self.settled(scope, stream)
        return self.store.segments(scope, stream).transform(epoch_history.explode_epochs, current_epoch=record.current_epoch)

    def successors(self, scope: str, stream: str, segment_id: int) -> dict[int, list[int]]:
        """Successors of a sealed segment, each with its predecessors (empty if open or unknown)."""
        records = self.settled_with_segments(scope, stream)[1]
        return successors_with_predecessors(records, int(segment_id))

    def predecessors(self, scope: str, stream: str, segment_id: int) -> list[int]:
        """The segments sealed to create ``segment_id`` that overlap it."""
        records = self.settled_with_segments(scope, stream)[1]
        if not any(r.segment_id == segment_id for r in records):
            raise SegmentNotFoundError(f"segment {segment_id} is not a segment of {scope}/{stream}")
        return predecessors(records, int(segment_id))

    def segments_at(self, scope: str, stream: str, time: datetime) -> DataFrame:
        """The segments active at ``time`` (those of the epoch in force then)."""
        epoch = epoch_history.epoch_at(self.settled_with_segments(scope, stream)[1], as_utc(time, "time"))
        return self.segments(scope, stream, epoch)
