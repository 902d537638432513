"""Error hierarchy: one root, subclasses named after Pravega's exceptions.

Every error raised on bad input is raised before anything is written, so a caught
``PravegaSparkError`` means the store is unchanged (unless the error says otherwise, e.g.
:class:`RetriesExhaustedError`, which also guarantees nothing was half-written).
"""

from __future__ import annotations


class PravegaSparkError(Exception):
    """Root of every error raised by pravega-spark."""


class InvalidNameError(PravegaSparkError, ValueError):
    """A scope, stream or other name breaks Pravega's naming rules (or could escape the root)."""


class InvalidConfigError(PravegaSparkError, ValueError):
    """A configuration object (scaling/retention policy, tags, ...) has an invalid value."""


class ScopeNotFoundError(PravegaSparkError, LookupError):
    """The scope does not exist."""


class StreamNotFoundError(PravegaSparkError, LookupError):
    """The stream does not exist."""


class SegmentNotFoundError(PravegaSparkError, LookupError):
    """The segment id is not a segment of the stream."""


class ScopeNotEmptyError(PravegaSparkError):
    """A scope still holding streams cannot be deleted (Pravega: IllegalStateException)."""


class IllegalStateError(PravegaSparkError):
    """The stream's state does not allow the operation (Pravega: OPERATION_NOT_ALLOWED)."""


class ReaderNotInReaderGroupError(IllegalStateError):
    """The reader is not online in its group (it closed, or was taken offline: a reader silent
    past the group's limit, or a zombie whose segments now belong to others); Pravega's
    ``ReaderNotInReaderGroupException``. Join again with a new reader."""


class StreamSealedError(IllegalStateError):
    """The stream (or the segment written to) is sealed."""


class StreamNotSealedError(IllegalStateError):
    """Only a sealed stream can be deleted."""


class InvalidScaleError(PravegaSparkError, ValueError):
    """New key ranges do not exactly cover the sealed segments' ranges (Pravega: InputInvalid)."""


class ScalePreconditionError(PravegaSparkError):
    """A sealed segment is not in the current epoch, or the scale leaves too few segments."""


class ScaleConflictError(PravegaSparkError):
    """Another, different scale of the stream is in progress (Pravega: ConflictException)."""


class InvalidStreamCutError(PravegaSparkError, ValueError):
    """A stream cut is not valid for the stream, or is behind the point it must follow."""


class StreamCutBehindError(InvalidStreamCutError):
    """A subscriber's new cut is behind the cut it published before."""


class TruncatedDataError(PravegaSparkError):
    """A read asked for data below the stream's head (Pravega: TruncatedDataException)."""


# the text a stale read's scan raises with (``store.read_cache.stale_check``): Spark reports it
# inside its own exception, where ``StaleReadError.of`` finds it
STALE_READ_MARKER = "PRAVEGA_SPARK_STALE_READ"


class StaleReadError(PravegaSparkError):
    """A ``read_events`` DataFrame over Spark Connect was evaluated after another client changed
    the stream (a scale, seal, truncation, update or re-creation): nothing was returned; call
    ``read_events`` again. The action itself raises Spark's exception, whose message names
    ``PRAVEGA_SPARK_STALE_READ``; ``StaleReadError.of(exc)`` turns it into this error (else None)."""

    @classmethod
    def of(cls, exc: BaseException) -> StaleReadError | None:
        """This error if ``exc`` (or its cause) is a stale read's Spark exception, else None."""
        while exc is not None:
            if isinstance(exc, cls):
                return exc
            text = str(exc)
            if STALE_READ_MARKER in text:
                found = next(line for line in text.splitlines() if STALE_READ_MARKER in line)
                found = found[found.index(STALE_READ_MARKER) + len(STALE_READ_MARKER) + 1:]
                return cls(found.split(" SQLSTATE:")[0].strip())
            exc = exc.__cause__ or exc.__context__
        return None


class SkippedEventsError(PravegaSparkError):
    """A streaming read would skip events: a commit that its source skips (one mixing adds and
    removes, or with ``dataChange=false`` adds) added events that no removed file held. Only a
    writer that breaks the events table's commit rules (not this library) makes one."""


class EventTooLargeError(PravegaSparkError, ValueError):
    """An event's payload exceeds the size limit."""


class InvalidEventError(PravegaSparkError, ValueError):
    """An event's payload is null or of an unsupported type."""


class TxnFailedError(PravegaSparkError):
    """A transaction operation failed (commit after abort/timeout, write after commit)."""


class TxnNotFoundError(TxnFailedError, LookupError):
    """No such transaction on the stream (Pravega: TRANSACTION_NOT_FOUND)."""


class PingFailedError(PravegaSparkError):
    """A transaction's lease could not be extended (Pravega's ``PingFailedException``): the new
    lease would pass the transaction's max execution time."""


class InvalidWriterMarkError(PravegaSparkError, ValueError):
    """A writer's noted time or position went backwards (Pravega: INVALID_TIME / INVALID_POSITION)."""


class LargeEventFailedError(PravegaSparkError):
    """A large event could not be committed: it was aborted (e.g. by the clean-up of idle
    transient data) or its staged chunks are gone."""


class NoSuchEventError(PravegaSparkError, LookupError):
    """No (complete) event starts at the pointer (Pravega: ``NoSuchEventException``)."""


class SubscriberNotFoundError(PravegaSparkError, LookupError):
    """The subscriber is not registered on the stream."""


class GenerationMismatchError(PravegaSparkError):
    """The subscriber's generation does not match the stored one."""


class ConditionalTableUpdateError(PravegaSparkError):
    """A key-value table's conditional update failed (Pravega's ``ConditionalTableUpdateException``):
    nothing of the update was applied."""


class BadKeyVersionError(ConditionalTableUpdateError):
    """A conditional update named a version that is not the key's current one, or an insert found
    the key present (Pravega's ``BadKeyVersionException``)."""


class NoSuchKeyError(ConditionalTableUpdateError, LookupError):
    """A conditional update (a version given) of a key that does not exist (Pravega's
    ``NoSuchKeyException``)."""


class InvalidKeyError(PravegaSparkError, ValueError):
    """A key that is not bytes of exactly the table's primary plus secondary key length (Pravega:
    ``IllegalArgumentException``)."""


class TableEntryTooLargeError(PravegaSparkError, ValueError):
    """A value longer than Pravega's maximum (1,040,384 bytes), or a batch over its key count or
    byte limits: nothing was applied."""


class InvalidBatchError(PravegaSparkError, ValueError):
    """A batch Pravega refuses: keys of several primary keys, removals mixed with updates, a key
    twice, or no modification."""


class KeyValueTableNotFoundError(PravegaSparkError, LookupError):
    """No key-value table of that name in the scope (or it was deleted)."""


class ReaderGroupNotFoundError(PravegaSparkError, LookupError):
    """No reader group of that name in the scope."""


class MaxNumberOfCheckpointsExceededError(PravegaSparkError):
    """A checkpoint was initiated while ``max_outstanding_checkpoints`` were pending (Pravega's
    ``MaxNumberOfCheckpointsExceededException``)."""


class TableLocationError(PravegaSparkError):
    """A table's location holds something that is not a Delta table and is not becoming one (a
    plain file, or a folder with files no Delta writer makes): nothing was written there."""


class StorageAccessError(PravegaSparkError):
    """A store's storage cannot be used: its endpoint does not answer, it refuses the credentials,
    or its bucket (container) does not exist. Raised by ``StreamManager(...)`` before any write."""


class StoreFormatError(PravegaSparkError):
    """The store was written in a format this version of pravega_spark does not read (a newer
    one): nothing is read or written. The message names both formats."""


class UnsafeLogStoreError(InvalidConfigError):
    """An object-store root whose Delta log store is not put-if-absent (Delta's default
    ``S3SingleDriverLogStore``): a commit could be lost to a concurrent writer process, so the
    store is not used. The message names the setting to add."""


class UnsupportedOperationError(PravegaSparkError):
    """The session cannot do this (the message names the capability). Kept for callers that
    catch it: since every public operation runs on both Delta backends, none raises it."""


class RetriesExhaustedError(PravegaSparkError):
    """A commit kept conflicting with concurrent writers; nothing was written by this call."""


class WorkflowPendingError(RetriesExhaustedError):
    """A workflow of several commits (seal, scale, update, truncation) recorded its start, then its
    next commits kept conflicting with concurrent writers: it is pending, not undone, and the
    next operation on the stream completes it (the stream's state says which workflow)."""
