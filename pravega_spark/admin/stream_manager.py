"""``StreamManager``: the client facade of a store, in sections named after the Pravega interfaces
they stand for: ``StreamManager``, ``ReaderGroupManager``, ``KeyValueTableManager``, the client
factory, the controller's services and the operator tools.

It delegates the stream workflows to ``controller.stream_tasks``, the read side to ``controller.client.Controller``
and each service's loop to the module of its concept (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession

from .. import _delta
from .._session import active_session, ship_package
from ..controller import stream_tasks, subscribers, watermarks
from ..controller.client import Controller
from ..controller.stream_cut_helper import CutOrName
from ..controller.watermarks import TimeWindow, Watermark, WriterMark
from ..errors import InvalidConfigError
from ..readers import batch_client, streaming
from ..readers.large_event_reader import LargeEventReader
from ..readers.reader_group import ReaderGroup, open_reader_group
from ..readers.reader_group_config import ReaderGroupConfig
from ..readers.streaming import StreamProgress
from ..services import autoscale_rules, autoscale_service, retention_service, transaction_timeouts
from ..services.autoscale_service import AutoscaleOutcome
from ..services.retention_service import RetentionOutcome
from ..store import compaction
from ..store.clock import as_utc
from ..store.schema import DEFAULT_SHARDS
from ..store.store import Store
from ..stream.config import StreamConfiguration
from ..stream.names import validate_scope_name, validate_stream_name
from ..stream.record import StreamInfo
from ..stream.stream_cut import StreamCut
from ..stream.truncation import TruncationRecord
from ..tables import key_value_table
from ..tables.key_value_table import KeyValueTable
from ..tables.table_entries import KeyValueTableConfiguration
from ..writers import large_events, transactions
from ..writers.event_writer import EventStreamWriter
from ..writers.large_events import TransientCleanup
from ..writers.transactions import TransactionalEventStreamWriter
from . import maintenance, pictures, reader_group_manager, validation
from .validation import StreamValidation

log = logging.getLogger("pravega_spark")


def _check_config(config) -> StreamConfiguration:
    if not isinstance(config, StreamConfiguration):
        raise InvalidConfigError(f"config must be a StreamConfiguration, got {type(config).__name__}")
    return config


class StreamManager:
    """Creates, scales, seals and reads streams stored as Delta tables under ``root``.

    Mirrors Pravega's ``StreamManager`` (plus the controller's scale/seal workflows). Any number of
    managers, in any number of processes, may point at the same root.

    Args:
        spark: a Delta-enabled session (``ps.spark_session()``, or Databricks' ``spark``).
        root: the store's root location (local path, ``dbfs:/``, ``s3a://``, ``abfss://``...): an
            unreachable one raises ``StorageAccessError``, an unsafe S3 one ``UnsafeLogStoreError``.
        shards: for a store this creates, how many shards its bookkeeping tables are split into
            (a power of two up to 256, else ``InvalidConfigError``); another format: ``StoreFormatError``.

    Example:
        >>> manager = StreamManager(spark, "/lake/pravega")  # doctest: +SKIP
        >>> manager.create_scope("iot")  # doctest: +SKIP
        True
    """

    def __init__(self, spark: SparkSession, root: str, shards: int = DEFAULT_SHARDS) -> None:
        self.spark = spark
        backend = _delta.backend_for(spark)
        self.root = backend.qualify(str(root))  # once: Delta reads a relative path as a table name
        backend.check_root(self.root)  # reachable; put-if-absent commits on object stores
        ship_package(spark)  # to executors that cannot import pravega_spark (once per context)
        backend.configure_session()  # checksum files list app versions, small tables' files
        store = Store(spark, self.root, shards)
        store.ensure_system_tables()
        self._controller = Controller(spark, store)

    def __repr__(self) -> str:
        return f"StreamManager(root={self.root!r})"

    def __reduce__(self):
        """Pickled by its root, rebuilt in the active session (e.g. in ``foreachBatch`` on a server)."""
        return (manager_from_root, (self.root,))

    @property
    def controller(self) -> Controller:
        """The store's read side (rows, segments, head and tail cuts), as writers and services use it."""
        return self._controller

    @property
    def _store(self) -> Store:  # the controller's tables, for the facade's own one-line reads
        return self._controller.store

    # ==== StreamManager (Pravega's ``StreamManager``): scopes, streams, segments, cuts ==============
    # ---- scopes ------------------------------------------------------------------------------
    def create_scope(self, scope: str) -> bool:
        """Create ``scope``; False if it already existed."""
        validate_scope_name(scope)
        created = self._store.insert_scope(scope)
        log.info("create_scope %s: %s", scope, "created" if created else "exists")
        return created

    def delete_scope(self, scope: str) -> bool:
        """Delete an empty scope; False if it did not exist.

        Raises:
            ScopeNotEmptyError: the scope still has streams or key-value tables.
        """
        return stream_tasks.delete_scope(self._store, scope)

    def list_scopes(self) -> DataFrame:
        """All scopes, as a DataFrame ``(scope, creation_time)``."""
        return self._store.scopes().orderBy("scope")

    def check_scope_exists(self, scope: str) -> bool:
        validate_scope_name(scope)
        return self._store.scope_exists(scope)

    # ---- streams -----------------------------------------------------------------------------
    def create_stream(self, scope: str, stream: str, config: StreamConfiguration | None = None) -> bool:
        """Create a stream with ``config.scaling_policy.min_num_segments`` equal segments.

        Three commits; a crash in between is finished by the next operation on the stream
        (``stream_tasks.create_stream``).

        Returns:
            True if this call created the stream, False if it already existed.
        """
        validate_scope_name(scope)
        validate_stream_name(stream)
        return stream_tasks.create_stream(self._store, scope, stream, _check_config(config or StreamConfiguration()))

    def update_stream(self, scope: str, stream: str, config: StreamConfiguration) -> bool:
        """Replace the stream's configuration (policies, tags), passing through ``UPDATING``.

        A raised ``min_num_segments`` above the open segments' count scales the stream up in the
        same workflow (the widest segments split evenly), as Pravega's ``UpdateStreamTask``.

        Raises:
            StreamSealedError: the stream is sealed.
        """
        return stream_tasks.update_stream(self._store, scope, stream, _check_config(config))

    def check_stream_exists(self, scope: str, stream: str) -> bool:
        validate_scope_name(scope)
        validate_stream_name(stream)
        return self._store.stream_record(scope, stream) is not None

    def list_streams(self, scope: str, tag: str | None = None) -> DataFrame:
        """The scope's streams (optionally only those with ``tag``) as a DataFrame."""
        return self._controller.list_streams(scope, tag)

    def stream_info(self, scope: str, stream: str) -> StreamInfo:
        """State, configuration, current epoch, head and tail cuts, and size of the stream."""
        return self._controller.stream_info(scope, stream)

    def seal_stream(self, scope: str, stream: str) -> bool:
        """Seal every open segment; later writes raise ``StreamSealedError``.

        A crash in between its commits (``stream_tasks.seal_stream``) is finished by the next
        operation on the stream. Sealing a sealed stream returns True.
        """
        return stream_tasks.seal_stream(self._store, scope, stream)

    def delete_stream(self, scope: str, stream: str) -> bool:
        """Delete a sealed stream and remove its tables' data from storage.

        The data goes first, then the row: a crash in between is finished by the next
        ``delete_stream``.

        Returns:
            False if the stream did not exist.

        Raises:
            StreamNotSealedError: the stream is not sealed.
        """
        return stream_tasks.delete_stream(self._store, scope, stream)

    # ---- segments and epochs -----------------------------------------------------------------
    def segments(self, scope: str, stream: str, epoch: int | None = None) -> DataFrame:
        """The stream's segments (every one it ever had, or the members of ``epoch``)."""
        return self._controller.segments(scope, stream, epoch)

    def epochs(self, scope: str, stream: str) -> DataFrame:
        """One row per epoch: ``epoch, creation_time, segment_ids``."""
        return self._controller.epochs(scope, stream)

    def successors(self, scope: str, stream: str, segment_id: int) -> dict[int, list[int]]:
        """Successors of a sealed segment, each with its predecessors (empty if open/unknown)."""
        return self._controller.successors(scope, stream, segment_id)

    def predecessors(self, scope: str, stream: str, segment_id: int) -> list[int]:
        """The segments sealed to create ``segment_id`` that overlap it."""
        return self._controller.predecessors(scope, stream, segment_id)

    def segments_at(self, scope: str, stream: str, time: datetime) -> DataFrame:
        """The segments active at ``time`` (those of the epoch in force then)."""
        return self._controller.segments_at(scope, stream, time)

    # ---- scaling -----------------------------------------------------------------------------
    def scale_stream(self, scope: str, stream: str, sealed_segments: Iterable[int],
                     new_key_ranges: Iterable[tuple[float, float]]) -> int:
        """Seal ``sealed_segments`` and replace them with segments over ``new_key_ranges``.

        Validated as Pravega's ``submitScale`` (see SPEC section 5). Writers of the sealed
        segments move to the successors. A crash after the first commit is completed by the next
        operation on the stream (roll forward; commits: ``stream_tasks.scale_stream``). Of two
        concurrent scales exactly one wins.

        Returns:
            The new epoch.

        Raises:
            InvalidScaleError: the new ranges do not exactly cover the sealed segments' ranges.
            ScalePreconditionError: a segment is not in the current epoch, or too few would remain.
            ScaleConflictError: a different scale of the stream is in progress.
            StreamSealedError: the stream is sealed.
        """
        return stream_tasks.scale_stream(self._store, scope, stream, sealed_segments, new_key_ranges)

    # ---- cuts --------------------------------------------------------------------------------
    def head_stream_cut(self, scope: str, stream: str) -> StreamCut:
        """The stream's head: where its data starts (the last truncation point)."""
        return self._controller.head_stream_cut(scope, stream)

    def tail_stream_cut(self, scope: str, stream: str) -> StreamCut:
        """The current segments at their lengths."""
        return self._controller.tail_stream_cut(scope, stream)

    def stream_cut_at(self, scope: str, stream: str, time: datetime) -> StreamCut:
        """The tail as it was at ``time``: the segments of the epoch active then, each at the end
        of its last event written at or before ``time`` (never before the head)."""
        return self._controller.stream_cut_at(scope, stream, as_utc(time, "time"))

    def size_between(self, scope: str, stream: str, from_cut: CutOrName = "earliest",
                     to_cut: CutOrName = "latest") -> int:
        """Bytes (framed) between two cuts, as Pravega's ``sizeBetweenStreamCuts``."""
        return self._controller.size_between(scope, stream, from_cut, to_cut)

    def validate_stream_cut(self, scope: str, stream: str, cut: StreamCut) -> StreamCut:
        """Raise ``InvalidStreamCutError`` unless ``cut`` is a valid cut of the stream."""
        c = self._controller
        c.check_cuts(*c.settled_with_segments(scope, stream), [cut])
        return cut

    # ---- truncation --------------------------------------------------------------------------
    def truncate_stream(self, scope: str, stream: str, stream_cut: StreamCut) -> bool:
        """Move the stream's head to ``stream_cut`` and delete the data before it.

        Segments wholly before the cut are deleted (a partition-level DELETE: no data file is
        rewritten); the cut's segments lose their records below its offsets. The bytes stay in
        storage until ``vacuum`` removes the deleted files.

        Once its first commit moved the head, reads below it raise ``TruncatedDataError``; a crash
        after it is finished by the next state change of the stream or retention run (commits:
        ``stream_tasks.truncate_stream``). Appends go on during the truncation. Truncating at the
        current head changes nothing.

        Returns:
            True.

        Raises:
            InvalidStreamCutError: the cut is invalid or not equal to or after the current head.
            StreamSealedError: the stream is sealed.
        """
        return stream_tasks.truncate_stream(self._store, scope, stream, stream_cut)

    def truncation_record(self, scope: str, stream: str) -> TruncationRecord:
        """The stream's truncation record: head, deleted segments, bytes truncated so far."""
        return self._controller.truncation_record(scope, stream)

    # ==== ReaderGroupManager (Pravega's ``ReaderGroupManager``) ===================================
    # ---- reader groups -----------------------------------------------------------------------
    def create_reader_group(self, scope: str, group: str, config: ReaderGroupConfig) -> bool:
        """Create reader group ``group`` in ``scope`` (Pravega's ``ReaderGroupManager.
        createReaderGroup``): one commit of its row, its streams' start cuts (``"earliest"``:
        the head now; ``"latest"``: the tail now) as unassigned segments. Streams of other
        scopes may be read too.

        Returns:
            False if a group of that name exists (nothing changes).

        Raises:
            InvalidConfigError: ``config`` is not a ``ReaderGroupConfig``.
            ScopeNotFoundError / StreamNotFoundError: the scope or a stream does not exist.
        """
        return reader_group_manager.create_reader_group(self._controller, scope, group, config)

    def reader_group(self, scope: str, group: str) -> ReaderGroup:
        """A handle on reader group ``group`` of ``scope``.

        Raises:
            ReaderGroupNotFoundError: no such group.
        """
        return open_reader_group(self._controller, scope, group)

    def delete_reader_group(self, scope: str, group: str) -> bool:
        """Delete the group: its subscriptions (if a subscriber), then its row (one commit).
        False if it did not exist."""
        return reader_group_manager.delete_reader_group(self._controller, scope, group)

    def list_reader_groups(self, scope: str) -> DataFrame:
        """The scope's reader groups: ``scope, reader_group, configuration, generation,
        creation_time, update_time``."""
        return reader_group_manager.list_reader_groups(self._controller, scope)

    # ==== KeyValueTableManager (Pravega's ``KeyValueTableManager``) ===============================
    # ---- key-value tables --------------------------------------------------------------------
    def create_key_value_table(self, scope: str, kvt: str, config: KeyValueTableConfiguration) -> bool:
        """Create key-value table ``kvt`` in ``scope`` (Pravega's ``KeyValueTableManager.
        createKeyValueTable``); False if it exists.

        Raises:
            InvalidNameError / InvalidConfigError: bad name or configuration (nothing written).
            ScopeNotFoundError: no such scope.
        """
        return key_value_table.create_key_value_table(self._store, scope, kvt, config)

    def delete_key_value_table(self, scope: str, kvt: str) -> bool:
        """Delete the KVT and its entries; False if it did not exist."""
        return key_value_table.delete_key_value_table(self._store, scope, kvt)

    def list_key_value_tables(self, scope: str) -> DataFrame:
        """The scope's KVTs: ``scope, key_value_table, partition_count, primary_key_length,
        secondary_key_length, creation_time``."""
        return key_value_table.list_key_value_tables(self._store, scope)

    def key_value_table(self, scope: str, kvt: str) -> KeyValueTable:
        """A handle on KVT ``kvt`` of ``scope``.

        Raises:
            KeyValueTableNotFoundError: no such KVT.
        """
        return key_value_table.open_key_value_table(self._store, scope, kvt)

    def validate_key_value_table(self, scope: str, kvt: str) -> StreamValidation:
        """Check the KVT's invariants with Great Expectations (one live entry per key, versions
        increasing per key in the log's order, every key in its hash partition, key lengths);
        a result like ``validate_stream``'s."""
        return validation.validate_key_value_table(self.key_value_table(scope, kvt))

    # ==== EventStreamClientFactory (and ``BatchClient``): writers and readers =======================
    # ---- writers -----------------------------------------------------------------------------
    def create_event_writer(self, scope: str, stream: str, writer_id: str | None = None,
                            **options) -> EventStreamWriter:
        """A writer appending to the stream (see ``EventStreamWriter``)."""
        self._controller.stream_record(scope, stream)
        return EventStreamWriter(self._controller, scope, stream, writer_id, **options)

    def create_transactional_writer(self, scope: str, stream: str,
                                    writer_id: str | None = None) -> TransactionalEventStreamWriter:
        """A writer of transactions on the stream (see ``transactions.TransactionalEventStreamWriter``).

        Example:
            >>> txn = manager.create_transactional_writer("iot", "sensors", "ingest-1").begin_txn()  # doctest: +SKIP
            >>> txn.write_events(df); txn.commit()  # doctest: +SKIP
        """
        self._controller.stream_record(scope, stream)
        return TransactionalEventStreamWriter(self._controller, scope, stream, writer_id)

    def transactions(self, scope: str, stream: str, now: datetime | None = None) -> DataFrame:
        """The stream's transactions (as recorded in its events table's log) with their status
        as of ``now``: ``txn_id, status, lease_expiry, decision_time, max_execution_expiry,
        last_updated, timed_out`` (an expired lease not yet aborted by the timeout job)."""
        return transactions.transactions_df(self._controller, scope, stream, now)

    def abort_timed_out_transactions(self, now: datetime | None = None, scope: str | None = None,
                                     stream: str | None = None) -> dict[str, list[str]]:
        """Abort every transaction whose lease expired by ``now`` (default: the wall clock) and
        remove its staged events (what ``jobs/transactions.py`` runs). Safe to run concurrently
        with commits: a transaction ends either committed or aborted.

        Returns:
            ``{"scope/stream": [aborted txn ids]}`` for the streams where something was aborted.
        """
        return transaction_timeouts.abort_timed_out_transactions(self._controller, None if now is None else as_utc(now),
                                                         scope, stream)

    # ---- reading -----------------------------------------------------------------------------
    def read_events(self, scope: str, stream: str, start: CutOrName = "earliest",
                    end: CutOrName = "latest") -> DataFrame:
        """The events between two cuts, as a batch DataFrame.

        Columns: ``scope, stream, segment_id, offset, event, routing_key, writer_id, write_time``.
        Per routing key, ordering by ``(segment_id, offset)`` is append order. With ``end="latest"``
        on a classic session the DataFrame is pinned at the call; over Spark Connect "latest"
        resolves at each evaluation, which fails (``StaleReadError``) once another client has
        scaled, sealed, truncated or re-created the stream: read again.

        Raises:
            TruncatedDataError: ``start`` is before the stream's head.
            InvalidStreamCutError: a cut is invalid or ``end`` is before ``start``.
        """
        return batch_client.read_events(self._controller, scope, stream, start, end)

    def read_stream(self, scope: str, stream: str, start: CutOrName = "earliest",
                    reader_group: ReaderGroup | str | None = None, max_bytes_per_trigger: int | str | None = None,
                    max_files_per_trigger: int | None = None, head: str = "plan") -> DataFrame:
        """The stream's events as a Structured Streaming DataFrame, with ``read_events``' columns.

        Delta's streaming source over the events table (``readers.streaming`` has the rules):
        exactly once across restarts with a checkpoint, per-key order across micro-batches, no
        staged data, large events whole; truncated events are skipped with a warning.

        Args:
            scope: the stream's scope.
            stream: the stream.
            start: ``"earliest"`` (the head), ``"latest"`` (the tail when the query starts) or a
                ``StreamCut`` of the stream; a restarted query goes on from its checkpoint.
            reader_group: a reader group (name or handle) of ``scope`` that reads this stream and
                whose retention type is not NONE: after each committed micro-batch its subscriber
                cut becomes the position the query reached, so ``run_retention`` can truncate
                behind the query.
            max_bytes_per_trigger: rate limit (Delta's soft ``maxBytesPerTrigger``: a micro-batch
                takes whole data files until it holds this many bytes; ``"64m"`` works too).
                Per-key order holds across the batches it makes.
            max_files_per_trigger: rate limit in data files per micro-batch.
            head: who drops the events below the head in each micro-batch: ``"sink"``, the
                library's sinks (``ps.idempotent_delta_sink``, ``ps.foreach_batch``) with no Spark
                job (any other sink stops before its first batch); ``"plan"`` (default), a lookup
                Spark runs again every micro-batch, for any sink. Over Spark Connect the sinks read
                the head on the server, from a column naming the stream that they remove.

        Raises:
            InvalidStreamCutError: ``start`` is not a cut of this stream.
            TruncatedDataError: ``start`` is before the stream's head.
            InvalidConfigError: a bad rate limit, or ``reader_group`` does not fit.
        """
        return streaming.read_stream(self._controller, scope, stream, start, reader_group, max_bytes_per_trigger,
                                     max_files_per_trigger, head)

    def stream_progress(self, query, timeout_seconds: float = 30.0) -> StreamProgress | None:
        """Where a ``read_stream`` query is: its stream cut after the last committed micro-batch
        and the bytes from there to the tail (``StreamProgress``), or None before its first batch.
        Display it in a notebook to watch the lag.

        It first waits (up to ``timeout_seconds``) until the session's listeners have handled the
        query's progress so far (Spark delivers it asynchronously): on return, with a
        ``reader_group``, the cut returned is the group's published subscriber cut. Call it after
        ``query.awaitTermination()`` of an ``availableNow`` run before running retention.

        Raises:
            SkippedEventsError: the query was stopped because its source skipped events.
        """
        return streaming.stream_progress(self._controller, query, timeout_seconds)

    # ---- large events ------------------------------------------------------------------------
    def open_event(self, pointer, window_chunks: int | None = None) -> LargeEventReader:
        """A readable binary file streaming one event (large or not) chunk by chunk.

        Args:
            pointer: an ``EventPointer``, its text form, or a ``read_events`` row (scope, stream,
                segment_id, offset).
            window_chunks: chunks fetched per Spark job (default: 32 MiB worth, 4 default
                chunks). The Python process holds one window (as an Arrow table).

        Example:
            >>> row = manager.read_events("iot", "cams").select("scope", "stream", "segment_id", "offset").first()  # doctest: +SKIP
            >>> with manager.open_event(row) as event:  # doctest: +SKIP
            ...     shutil.copyfileobj(event, out_file)

        Raises:
            NoSuchEventError: no complete event starts there.
            TruncatedDataError: the pointer is below the stream's head.
        """
        return LargeEventReader.open(self._controller, pointer, window_chunks)

    def transient_data(self, scope: str, stream: str) -> DataFrame:
        """The large events being written (staged, not committed or aborted yet): one row per
        transient id with its writer, routing key, chunks, bytes and first/last staging time."""
        return large_events.transient_data(self._controller, scope, stream)

    def clean_transient_data(self, scope: str | None = None, stream: str | None = None,
                             now: datetime | None = None,
                             idle_timeout: timedelta | None = None) -> dict[str, TransientCleanup]:
        """Abort the large events nobody staged a chunk of for ``idle_timeout`` (default 10
        minutes) and remove their staged data (what ``jobs/large_events.py`` runs). Safe against a
        concurrent commit of the same event: it ends either committed or aborted.

        Returns:
            ``{"scope/stream": TransientCleanup}`` for the streams where something was removed.
        """
        return large_events.clean_transient_data(self._controller, scope, stream, now, idle_timeout)

    # ==== Controller services: retention, subscribers, auto-scaling, watermarks ===================
    # ---- retention ---------------------------------------------------------------------------
    def run_retention(self, scope: str | None = None, stream: str | None = None, now: datetime | None = None,
                      frequency: timedelta | None = None, bucket: int = 0, buckets: int = 1) -> list[RetentionOutcome]:
        """Apply the streams' retention policies once (what ``jobs/retention.py`` runs).

        For each stream with a retention policy: record its tail in the retention set when the
        newest record is older than ``frequency`` (default 30 minutes), then truncate where
        Pravega's time/size/consumption rules say (see ``retention_service``).

        Args:
            scope, stream: limit the run to a scope or one stream.
            now: the run's notion of the current time (default: the wall clock).
            frequency: how old the newest retention record must be before another is recorded.
            bucket, buckets: handle only this bucket's share of the streams.

        Returns:
            A list of ``RetentionOutcome`` (one per stream with a policy).
        """
        return retention_service.run_retention(self._controller, scope, stream, None if now is None else as_utc(now),
                                               frequency, bucket, buckets)

    # ---- subscribers (consumption-based retention) -------------------------------------------
    def add_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Subscribe ``subscriber`` (e.g. a reader group) to the stream's retention.

        A new subscriber starts with an empty cut, which holds nothing back until it publishes
        one. A name of the form ``scope/group`` is a reader group's, which must exist (the
        group subscribes itself when its retention type is not NONE); any other non-empty name
        is an external subscriber. An existing subscriber with an older generation takes the
        new one and keeps its cut;
        an equal or older generation is a no-op (Pravega's ``addSubscriber``).

        Returns:
            True if the call changed the subscribers table.
        """
        return subscribers.add_subscriber(self._controller, scope, stream, subscriber, generation)

    def remove_subscriber(self, scope: str, stream: str, subscriber: str, generation: int) -> bool:
        """Unsubscribe ``subscriber`` unless it has a newer generation (then this is a no-op).

        Returns:
            True if the subscriber is gone after the call.
        """
        return subscribers.remove_subscriber(self._controller, scope, stream, subscriber, generation)

    def update_subscriber_stream_cut(self, scope: str, stream: str, subscriber: str, generation: int,
                                     stream_cut: StreamCut) -> bool:
        """Publish how far ``subscriber`` has consumed (Pravega's ``updateSubscriberStreamCut``).

        Returns:
            True (publishing the same cut again is accepted).

        Raises:
            StreamNotFoundError: no such stream.
            SubscriberNotFoundError: the subscriber is not subscribed to the stream.
            GenerationMismatchError: ``generation`` is not the subscriber's current generation.
            InvalidStreamCutError: the cut is not a valid cut of the stream.
            StreamCutBehindError: the cut is behind the subscriber's previous cut.
        """
        return subscribers.update_subscriber_stream_cut(self._controller, scope, stream, subscriber, generation,
                                                        stream_cut)

    def subscribers(self, scope: str, stream: str) -> DataFrame:
        """The stream's subscribers: ``subscriber, generation, stream_cut, update_time``."""
        self._controller.stream_record(scope, stream)
        return self._store.subscribers(scope, stream)

    def retention_set(self, scope: str, stream: str) -> DataFrame:
        """The stream's retention set: ``recording_time, recording_size, stream_cut`` (text)."""
        self._controller.stream_record(scope, stream)
        return self._store.retention_set(scope, stream).orderBy("recording_time")

    # ---- auto-scaling ------------------------------------------------------------------------
    def run_autoscale(self, scope: str | None = None, stream: str | None = None, now: datetime | None = None,
                      bucket: int = 0, buckets: int = 1, cooldown: timedelta | None = None,
                      mute: timedelta | None = None) -> list[AutoscaleOutcome]:
        """Apply the streams' by-rate scaling policies once (what ``jobs/autoscale.py`` runs).

        For each unsealed stream with a by-rate policy: each open segment's rates from the last 20
        minutes of commits, Pravega's rules (``services.autoscale_rules.decide``: cooldown,
        thresholds, split count, cold merges, mute, ``min_num_segments``), then ``scale_stream``.
        Safe against concurrent runs, manual scales and writers (a beaten scale is skipped).

        Args:
            scope, stream: limit the run to a scope or one stream.
            now: the run's notion of the current time (default: the wall clock).
            bucket, buckets: handle only this bucket's share of the streams.
            cooldown, mute: Pravega's ``AutoScalerConfig`` (default 600 s each).

        Returns:
            A list of ``AutoscaleOutcome`` (one per stream with a by-rate policy).
        """
        return autoscale_service.run_autoscale(self._controller, scope, stream, None if now is None else as_utc(now),
                                               bucket, buckets, autoscale_rules.COOLDOWN if cooldown is None else cooldown,
                                               autoscale_rules.MUTE if mute is None else mute)

    def segment_rates(self, scope: str, stream: str, now: datetime | None = None) -> DataFrame:
        """Each segment's traffic rates as the auto-scaler sees them (``segment_id, r2, r5, r10,
        r20``: Pravega's decaying rates over 2, 5, 10 and 20 minutes, in events/s, or KiB/s for a
        data-rate policy) as of ``now``, from the events table's last 20 minutes of commits.
        Segments without traffic then have no row."""
        now = as_utc(now) if now is not None else datetime.now(timezone.utc)
        return autoscale_service.segment_rates_df(self._controller, scope, stream, now)

    # ---- watermarks --------------------------------------------------------------------------
    def compute_watermarks(self, scope: str | None = None, stream: str | None = None,
                           now: datetime | None = None) -> dict[str, Watermark]:
        """One round of Pravega's periodic watermarking on each stream (what
        ``jobs/watermarks.py`` runs); all time comparisons use ``now`` (default: the wall clock).

        Returns:
            ``{"scope/stream": Watermark}`` for the streams where a watermark was emitted.
        """
        now = as_utc(now) if now is not None else datetime.now(timezone.utc)
        return watermarks.compute_watermarks(self._controller, scope, stream, now)

    def watermarks(self, scope: str, stream: str) -> DataFrame:
        """The stream's emitted watermarks, oldest first: ``lower_time_bound, upper_time_bound,
        stream_cut`` (text form, see ``StreamCut.from_text``), ``emit_time``."""
        self._controller.stream_record(scope, stream)
        return watermarks.watermarks_df(self._controller, scope, stream)

    def writer_marks(self, scope: str, stream: str) -> list[WriterMark]:
        """Each writer's latest noted time and position (``watermarks.WriterMark``)."""
        self._controller.stream_record(scope, stream)
        return watermarks.writer_marks(self._controller, scope, stream)

    def time_window(self, scope: str, stream: str, position: StreamCut | None) -> TimeWindow:
        """The time window of a reader at ``position`` (Pravega's ``getCurrentTimeWindow``):
        ``TimeWindow(lower_time_bound, upper_time_bound)``, None where unknown."""
        return watermarks.reader_time_window(self._controller, scope, stream, position)

    # ==== Operator tools: validation, pictures, maintenance =======================================
    # ---- data quality ------------------------------------------------------------------------
    def validate_stream(self, scope: str, stream: str) -> StreamValidation:
        """Check the stream's stored invariants with Great Expectations suites.

        One suite per prepared table (segments, epochs, events, stream cuts), one expectation per
        invariant (``admin.validation.INVARIANTS`` lists them: epochs, ids, successors, offsets
        and framing, large events, seals, the head, staged data, subscribers, retention set,
        watermarks). A workflow a crashed process left half-done is completed first. Needs the
        ``quality`` extra (great-expectations).

        Returns:
            ``StreamValidation``: ``success``, ``results`` (``(expectation, success, details)``),
            ``counts`` (rows checked by kind), ``to_df(spark)`` and ``to_html(folder)``.

        Example:
            >>> result = manager.validate_stream("iot", "sensors")  # doctest: +SKIP
            >>> result.success, result.counts["event"]  # doctest: +SKIP
            (True, 1000)
        """
        return validation.validate_stream(self._controller, scope, stream)

    # ---- pictures ----------------------------------------------------------------------------
    def plot_epochs(self, scope: str, stream: str, path: str | None = None):
        """A picture of the stream's key space over time: segments as boxes over their key
        ranges from creation to seal (labelled with their names and sealed sizes), scales, and
        the head and tail cuts. Returns a matplotlib ``Figure`` (shown inline by ``display``);
        writes a PNG at ``path`` if given."""
        return pictures.plot_epochs(self._controller, scope, stream, path)

    def plot_retention(self, scope: str, stream: str, path: str | None = None):
        """A picture of the stream's retention: the retention set's records over time, the
        truncation point, the subscribers' cuts and the stream's size (bytes from its start).
        Returns a matplotlib ``Figure``; writes a PNG at ``path`` if given."""
        return pictures.plot_retention(self._controller, scope, stream, path)

    # ---- maintenance -------------------------------------------------------------------------
    def compact(self, scope: str, stream: str, segment_ids: Sequence[int] | None = None,
                target_file_size: int | None = None) -> compaction.CompactionResult:
        """Rewrite each segment's runs of small consecutive files into larger ones, offsets
        unchanged (Delta's ``OPTIMIZE`` cannot: every file has its own base offset). One
        ``dataChange=false`` commit, safe against concurrent appends (they add above the runs),
        truncations (one of the two retries) and readers (who keep their snapshot).

        Args:
            segment_ids: only these segments (default: all).
            target_file_size: bytes a rewritten file aims at (default 128 MiB; small: under half).

        Returns:
            A ``CompactionResult`` (its commit version, runs, files removed and added, bytes).
        """
        return compaction.compact_stream(self._controller, scope, stream, segment_ids, target_file_size)

    def vacuum(self, scope: str | None = None, stream: str | None = None,
               retention: timedelta | None = None, *, store_tables: bool = True) -> list[str]:
        """VACUUM the stream tables (all, a scope's, or one stream's) and, with ``store_tables``,
        the store's own tables holding their rows (all when no scope is given); the tables
        vacuumed. ``retention`` defaults to the tables' own; ``timedelta(0)`` removes deleted files
        now (breaking time travel). Staged data (open transactions, large events' chunks) is kept:
        its stream's table gets a retention covering the oldest of it, plus an hour."""
        return maintenance.vacuum(self._controller, scope, stream, retention, store_tables)

    def vacuum_store_tables(self, retention: timedelta | None = None) -> list[str]:
        """VACUUM the store's own tables (``_pravega``'s, every shard table) once each: the end of a
        job that walks the streams with ``vacuum(..., store_tables=False)``."""
        return maintenance.vacuum_store_tables(self._controller, retention)


def manager_from_root(root: str) -> StreamManager:
    """A ``StreamManager`` rebuilt from its pickled root, in the active session."""
    return StreamManager(active_session(), root)
