"""pravega-spark: Pravega's stream model on Delta tables, as a PySpark library.

Example:
    >>> import pravega_spark as ps
    >>> spark = ps.spark_session()  # doctest: +SKIP
    >>> manager = ps.StreamManager(spark, "/tmp/lake")  # doctest: +SKIP
"""

from __future__ import annotations

from ._session import spark_session
from .appender import WriteResult
from .autoscale_service import AutoscaleOutcome
from .config import RetentionPolicy, RetentionType, ScaleType, ScalingPolicy, StreamConfiguration
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
    StorageAccessError,
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
from .key_value_table import KeyValueTable
from .large_events import EventPointer, LargeEventReader, LargeEventWriter, TransientCleanup
from .reader_group import EventStreamReader, ReadBatch, ReaderGroup
from .reader_group_config import ReaderGroupConfig, StreamDataRetention
from .reader_group_sink import ReaderGroupSink
from .routing import key_position
from .schema import MAX_EVENT_SIZE, MAX_LARGE_EVENT_SIZE
from .segments import SegmentRecord
from .sinks import foreach_batch, idempotent_delta_sink
from .stream import StreamInfo
from .stream_cut import StreamCut
from .stream_manager import StreamManager
from .streaming import StreamProgress
from .table_entries import Insert, KeyValueTableConfiguration, Put, Remove, TableEntry, Version
from .transactions import Transaction, TransactionalEventStreamWriter, TxnStatus
from .truncation import TruncationRecord
from .validation import ExpectationResult, StreamValidation
from .watermarks import TimeWindow, Watermark, WriterMark
from .writer import EventStreamWriter

__all__ = [
    "ConditionalTableUpdateError", "EventStreamWriter", "EventTooLargeError",
    "GenerationMismatchError", "IllegalStateError", "InvalidConfigError", "InvalidEventError",
    "InvalidNameError", "InvalidScaleError", "InvalidStreamCutError", "MAX_EVENT_SIZE",
    "MAX_LARGE_EVENT_SIZE", "PravegaSparkError", "RetentionPolicy", "RetentionType",
    "RetriesExhaustedError", "UnsupportedOperationError", "ScaleConflictError", "ScalePreconditionError", "ScaleType",
    "ScalingPolicy", "ScopeNotEmptyError", "ScopeNotFoundError", "SegmentNotFoundError", "SkippedEventsError",
    "SegmentRecord", "StreamConfiguration", "StreamCut", "StreamCutBehindError", "StreamInfo", "StreamManager",
    "StreamNotFoundError", "StreamNotSealedError", "StreamSealedError", "StorageAccessError", "SubscriberNotFoundError", "TableLocationError",
    "TruncatedDataError", "TruncationRecord", "TxnFailedError", "WriteResult", "key_position", "spark_session",
    "InvalidWriterMarkError", "PingFailedError", "TimeWindow", "Transaction", "TransactionalEventStreamWriter",
    "TxnNotFoundError", "TxnStatus", "UnsafeLogStoreError", "Watermark", "WriterMark",
    "EventPointer", "LargeEventFailedError", "LargeEventReader", "LargeEventWriter", "NoSuchEventError",
    "TransientCleanup", "ExpectationResult", "StreamValidation", "ReaderGroupConfig", "StreamDataRetention", "MaxNumberOfCheckpointsExceededError",
    "ReaderGroup", "ReaderGroupNotFoundError", "ReaderNotInReaderGroupError", "ReaderGroupSink", "EventStreamReader", "ReadBatch",
    "StreamProgress", "foreach_batch", "idempotent_delta_sink", "AutoscaleOutcome", "WorkflowPendingError",
    "BadKeyVersionError", "InvalidBatchError", "InvalidKeyError", "KeyValueTableNotFoundError", "NoSuchKeyError",
    "TableEntryTooLargeError", "Insert", "KeyValueTable", "KeyValueTableConfiguration", "Put", "Remove",
    "TableEntry", "Version",
]
