"""Streams: the stored stream record, its states and transitions, and ``StreamInfo``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone

from ..errors import IllegalStateError, StreamSealedError
from .config import StreamConfiguration
from .stream_cut import StreamCut

# Stream states, as Pravega's State enum.
CREATING = "CREATING"
ACTIVE = "ACTIVE"
UPDATING = "UPDATING"
SCALING = "SCALING"
TRUNCATING = "TRUNCATING"
SEALING = "SEALING"
SEALED = "SEALED"

ALLOWED_TRANSITIONS = {
    CREATING: {ACTIVE},
    ACTIVE: {SCALING, TRUNCATING, SEALING, SEALED, UPDATING},
    SCALING: {ACTIVE},
    TRUNCATING: {ACTIVE},
    UPDATING: {ACTIVE},
    SEALING: {SEALED},
    SEALED: set(),
}


@dataclass(frozen=True)
class StreamRecord:
    """One row of the streams table (Pravega's stream metadata: state, configuration, epoch)."""

    scope: str
    stream: str
    state: str
    configuration: StreamConfiguration
    current_epoch: int
    pending_scale: str | None
    head_stream_cut: str | None
    creation_time: datetime
    update_time: datetime
    row_version: int
    truncation: str | None = None

    @property
    def scoped_name(self) -> str:
        return f"{self.scope}/{self.stream}"

    def transition(self, state: str, now: datetime, **changes: object) -> StreamRecord:
        """The record after moving to ``state`` (Pravega's allowed transitions; staying is allowed)."""
        if state != self.state and state not in ALLOWED_TRANSITIONS.get(self.state, set()):
            if self.state in (SEALING, SEALED):
                raise StreamSealedError(f"stream {self.scoped_name} is {self.state}")
            raise IllegalStateError(
                f"stream {self.scoped_name} cannot go from {self.state} to {state} "
                f"(allowed: {sorted(ALLOWED_TRANSITIONS.get(self.state, set()))})")
        return replace(self, state=state, update_time=now, row_version=self.row_version + 1,
                       **changes)  # type: ignore[arg-type]

    def to_row(self) -> tuple:
        return (self.scope, self.stream, self.state, self.configuration.to_json(),
                list(self.configuration.tags), self.current_epoch, self.pending_scale,
                self.head_stream_cut, self.creation_time, self.update_time, self.row_version,
                self.truncation)

    @classmethod
    def from_row(cls, row) -> StreamRecord:  # row: pyspark.sql.Row
        def utc(value: datetime) -> datetime:  # collected timestamps are naive local times
            return value if value.tzinfo else value.astimezone(timezone.utc)

        return cls(row["scope"], row["stream"], row["state"],
                   StreamConfiguration.from_json(row["configuration"]), row["current_epoch"],
                   row["pending_scale"], row["head_stream_cut"], utc(row["creation_time"]),
                   utc(row["update_time"]), row["row_version"], row["truncation"])


@dataclass(frozen=True)
class StreamInfo:
    """What ``StreamManager.stream_info`` returns (Pravega's ``StreamInfo`` plus size and state).

    Attributes:
        scope, stream: the stream's names.
        state: ``ACTIVE``, ``SCALING``, ``SEALED``, ...
        configuration: the stream's ``StreamConfiguration``.
        current_epoch: the active epoch.
        head_stream_cut: where the stream starts (after truncation).
        tail_stream_cut: the current segments at their lengths.
        size_bytes: bytes between head and tail.
    """

    scope: str
    stream: str
    state: str
    configuration: StreamConfiguration
    current_epoch: int
    head_stream_cut: StreamCut
    tail_stream_cut: StreamCut
    size_bytes: int

    def __repr__(self) -> str:
        return (f"StreamInfo({self.scope}/{self.stream} {self.state} epoch={self.current_epoch} "
                f"size={self.size_bytes}B head={self.head_stream_cut!r} tail={self.tail_stream_cut!r})")
