"""``EventStreamWriter``: routed, framed, fenced appends (Pravega's ``EventStreamWriter``).

One ``write_events`` call is one Delta commit, all-or-nothing, through the writer's ``Appender``
(``writers.appender``: routing, framing, the fence on the segments written to, retries). Per routing
key, events are appended in the DataFrame's row order (or ``order_by``).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from pyspark.sql import DataFrame

from .. import _delta
from ..controller.client import Controller
from ..controller.watermarks import note_writer_mark, shut_down_writer
from ..errors import EventTooLargeError, InvalidEventError, InvalidNameError
from ..store.schema import MAX_EVENT_SIZE
from .appender import WRITER_APP_PREFIX, Appender, WriteResult
from .large_events import DEFAULT_CHUNK_SIZE, LargeEventWriter


class EventStreamWriter:
    """Appends events to one stream.

    Created by ``StreamManager.create_event_writer``. Each writer uses its own Spark session
    (``spark.newSession()``), sharing the cluster but not per-commit settings.

    Example:
        >>> writer = manager.create_event_writer("iot", "sensors", writer_id="ingest-1")  # doctest: +SKIP
        >>> writer.write_events(df, routing_key="device_id", event="payload")  # doctest: +SKIP
        WriteResult(events=1000, bytes=208000, version=3, tail=...)
    """

    def __init__(self, controller: Controller, scope: str, stream: str, writer_id: str | None = None,
                 retry: _delta.RetryPolicy | None = None) -> None:
        self.scope = scope
        self.stream = stream
        if writer_id is not None and not (isinstance(writer_id, str) and writer_id):
            raise InvalidNameError(f"writer_id must be a non-empty string (or None: a new id), got {writer_id!r}")
        self.writer_id = writer_id or f"writer-{uuid.uuid4().hex[:12]}"
        self._appender = Appender(controller, scope, stream, self.writer_id, retry)

    def __repr__(self) -> str:
        return f"EventStreamWriter({self.scope}/{self.stream}, writer_id={self.writer_id!r})"

    def __reduce__(self):
        """Pickled by its store's root and its names (a ``foreachBatch`` function that captured
        it runs on a Spark Connect server): rebuilt there in the active session, with the same
        writer id, so its write numbers carry on."""
        return (writer_from_names, (self._appender.store.root, self.scope, self.stream, self.writer_id,
                                    self._appender.retry))

    @property
    def scoped_name(self) -> str:
        return f"{self.scope}/{self.stream}"

    @property
    def appender(self) -> Appender:
        """The writer's append path (its session, open segments and retry policy)."""
        return self._appender

    def write_event(self, event: bytes | bytearray | str, routing_key: str | None = None,
                    write_number: int | None = None) -> WriteResult:
        """Append one event (``str`` is UTF-8 encoded). A ``None`` key routes randomly.
        ``write_number`` makes the write idempotent, as in ``write_events``.

        Raises:
            EventTooLargeError: the payload exceeds 8 MiB (nothing is written).
        """
        if isinstance(event, str):
            event = event.encode("utf-8")
        if not isinstance(event, (bytes, bytearray)):
            raise InvalidEventError(f"an event is bytes or str, got {type(event).__name__}")
        if len(event) > MAX_EVENT_SIZE:
            raise EventTooLargeError(
                f"event of {len(event)} bytes exceeds the {MAX_EVENT_SIZE}-byte limit; use stream_event()")
        return self._appender.append_bytes(bytes(event), routing_key, write_number)

    def write_events(self, df: DataFrame, routing_key: str = "routing_key", event: str = "event",
                     order_by: str | list[str] | None = None,
                     write_number: int | None = None) -> WriteResult:
        """Append every row of ``df`` as an event, in one atomic commit.

        Args:
            df: the events (a batch DataFrame, or a micro-batch inside ``foreachBatch``).
            routing_key: column holding the routing key (null routes randomly).
            event: column holding the payload (binary, or string encoded as UTF-8).
            order_by: column(s) fixing the append order per key; default: the DataFrame's order.
            write_number: makes the write idempotent. This writer's writes are numbered (any
                increasing non-negative ints, e.g. ``foreachBatch``'s batch id); a write whose
                number is at or below the highest one applied for this ``writer_id`` is skipped
                (``event_count == 0``), also after a process restart. The number is recorded in
                the same Delta commit as the events (Delta's ``txnAppId``/``txnVersion``), so a
                write is applied exactly once. Numbers are per writer id and stream.

        Returns:
            A ``WriteResult`` with the commit's events, bytes, Delta version and the tail after it.

        Raises:
            EventTooLargeError: an event exceeds 8 MiB (nothing is written).
            InvalidConfigError: a missing column, or a write number that is not a non-negative int.
            StreamSealedError: the stream is sealed.
            RetriesExhaustedError: concurrent writers kept winning (nothing is written).
        """
        return self._appender.append(df, routing_key, event, order_by, write_number)

    def stream_event(self, routing_key: str | None = None, chunk_size: int | None = None) -> LargeEventWriter:
        """Start a large event (up to 1 GiB): a writable binary file, committed as one event.

        Chunks of ``chunk_size`` bytes (default and maximum 8 MiB) are staged durably as they
        fill, so memory holds about one chunk; ``commit()`` appends the whole event atomically,
        contiguously, at the tail of the segment owning ``routing_key`` at that time;
        ``close()`` without ``commit()`` discards it. An event of at most 8 MiB is written as a
        regular event. See ``large_events.LargeEventWriter``.

        Example:
            >>> with writer.stream_event(routing_key="cam-1") as event:  # doctest: +SKIP
            ...     shutil.copyfileobj(video_file, event)
            ...     event.commit()

        Raises:
            InvalidConfigError: ``chunk_size`` is not in ``[1024, 8 MiB]``.
        """
        return LargeEventWriter(self._appender, routing_key, DEFAULT_CHUNK_SIZE if chunk_size is None else chunk_size)

    @property
    def position(self) -> dict[int, int]:
        """The end of this writer's latest write in each segment it wrote (what ``note_time``
        records)."""
        return self._appender.position

    def last_write_number(self) -> int:
        """The highest write number applied for this writer id (-1 if none): where a restarted
        writer resumes numbering."""
        return self._appender.transaction().app_version(WRITER_APP_PREFIX + self.writer_id)

    def note_time(self, ts: datetime) -> None:
        """Record ``ts`` with this writer's position (Pravega's ``noteTime``) for watermarks.

        Raises:
            InvalidWriterMarkError: ``ts`` is before the time this writer noted last, or the
                position went backwards (nothing is recorded).
        """
        a = self._appender
        note_writer_mark(a.controller, self.scope, self.stream, self.writer_id, ts, a.position)

    def close(self) -> None:
        """Pravega's writer shutdown; the writer id may be reused later. A writer that noted
        times is marked shut down, so watermarks stop waiting for it."""
        self._appender.forget_tails()
        shut_down_writer(self._appender.controller, self.scope, self.stream, self.writer_id)


def writer_from_names(root: str, scope: str, stream: str, writer_id: str, retry) -> EventStreamWriter:
    """An ``EventStreamWriter`` rebuilt from its pickled names, in the active session."""
    return EventStreamWriter(Controller.for_root(root), scope, stream, writer_id, retry)
