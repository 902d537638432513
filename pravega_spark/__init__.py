"""pravega-spark: Pravega's stream model on Delta tables, as a PySpark library.

Example:
    >>> import pravega_spark as ps
    >>> spark = ps.spark_session()  # doctest: +SKIP
    >>> manager = ps.StreamManager(spark, "/tmp/lake")  # doctest: +SKIP
"""

from __future__ import annotations

from ._session import spark_session
from .admin.stream_manager import StreamManager
from .admin.upgrade import UpgradeReport, upgrade_store
from .admin.validation import ExpectationResult, StreamValidation
from .controller.watermarks import TimeWindow, Watermark, WriterMark
from .errors import (
    BadKeyVersionError,
    ConditionalTableUpdateError,
    EventTooLargeError,
    GenerationMismatchError,
    IllegalStateError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidEventError,
    InvalidKeyError,
    InvalidNameError,
    InvalidScaleError,
    InvalidStreamCutError,
    InvalidWriterMarkError,
    KeyValueTableNotFoundError,
    LargeEventFailedError,
    MaxNumberOfCheckpointsExceededError,
    NoSuchEventError,
    NoSuchKeyError,
    PingFailedError,
    PravegaSparkError,
    ReaderGroupNotFoundError,
    ReaderNotInReaderGroupError,
    RetriesExhaustedError,
    ScaleConflictError,
    ScalePreconditionError,
    ScopeNotEmptyError,
    ScopeNotFoundError,
    SegmentNotFoundError,
    SkippedEventsError,
    StaleReadError,
    StorageAccessError,
    StoreFormatError,
    StreamCutBehindError,
    StreamNotFoundError,
    StreamNotSealedError,
    StreamSealedError,
    SubscriberNotFoundError,
    TableEntryTooLargeError,
    TableLocationError,
    TruncatedDataError,
    TxnFailedError,
    TxnNotFoundError,
    UnsafeLogStoreError,
    UnsupportedOperationError,
    WorkflowPendingError,
)
from .readers.event_reader import EventStreamReader, ReadBatch
from .readers.large_event_reader import EventPointer, LargeEventReader
from .readers.reader_group import ReaderGroup
from .readers.reader_group_config import ReaderGroupConfig, StreamDataRetention
from .readers.reader_group_sink import ReaderGroupSink
from .readers.sinks import foreach_batch, idempotent_delta_sink
from .readers.streaming import StreamProgress
from .services.autoscale_service import AutoscaleOutcome
from .store.schema import MAX_EVENT_SIZE, MAX_LARGE_EVENT_SIZE
from .stream.config import (
    RetentionPolicy,
    RetentionType,
    ScaleType,
    ScalingPolicy,
    StreamConfiguration,
)
from .stream.record import StreamInfo
from .stream.segments import SegmentRecord
from .stream.stream_cut import StreamCut
from .stream.truncation import TruncationRecord
from .tables.key_value_table import KeyValueTable
from .tables.table_entries import (
    Insert,
    KeyValueTableConfiguration,
    Put,
    Remove,
    TableEntry,
    Version,
)
from .writers.appender import WriteResult
from .writers.event_writer import EventStreamWriter
from .writers.large_events import LargeEventWriter, TransientCleanup
from .writers.routing import key_position
from .writers.transactions import Transaction, TransactionalEventStreamWriter, TxnStatus

__all__ = [
    "ConditionalTableUpdateError", "EventStreamWriter", "EventTooLargeError",
    "GenerationMismatchError", "IllegalStateError", "InvalidConfigError", "InvalidEventError",
    "InvalidNameError", "InvalidScaleError", "InvalidStreamCutError", "MAX_EVENT_SIZE",
    "MAX_LARGE_EVENT_SIZE", "PravegaSparkError", "RetentionPolicy", "RetentionType",
    "RetriesExhaustedError", "UnsupportedOperationError", "ScaleConflictError", "ScalePreconditionError", "ScaleType",
    "ScalingPolicy", "ScopeNotEmptyError", "ScopeNotFoundError", "SegmentNotFoundError", "SkippedEventsError",
    "SegmentRecord", "StreamConfiguration", "StreamCut", "StreamCutBehindError", "StreamInfo", "StreamManager",
    "StreamNotFoundError", "StreamNotSealedError", "StreamSealedError", "StorageAccessError", "SubscriberNotFoundError", "TableLocationError",
    "StaleReadError", "TruncatedDataError", "TruncationRecord", "TxnFailedError", "WriteResult", "key_position", "spark_session",
    "InvalidWriterMarkError", "PingFailedError", "TimeWindow", "Transaction", "TransactionalEventStreamWriter",
    "TxnNotFoundError", "TxnStatus", "StoreFormatError", "UnsafeLogStoreError", "Watermark", "WriterMark",
    "EventPointer", "LargeEventFailedError", "LargeEventReader", "LargeEventWriter", "NoSuchEventError",
    "TransientCleanup", "UpgradeReport", "upgrade_store", "ExpectationResult", "StreamValidation", "ReaderGroupConfig", "StreamDataRetention", "MaxNumberOfCheckpointsExceededError",
    "ReaderGroup", "ReaderGroupNotFoundError", "ReaderNotInReaderGroupError", "ReaderGroupSink", "EventStreamReader", "ReadBatch",
    "StreamProgress", "foreach_batch", "idempotent_delta_sink", "AutoscaleOutcome", "WorkflowPendingError",
    "BadKeyVersionError", "InvalidBatchError", "InvalidKeyError", "KeyValueTableNotFoundError", "NoSuchKeyError",
    "TableEntryTooLargeError", "Insert", "KeyValueTable", "KeyValueTableConfiguration", "Put", "Remove",
    "TableEntry", "Version",
]
