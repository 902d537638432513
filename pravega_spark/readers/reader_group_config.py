"""Reader group configuration: Pravega's ``ReaderGroupConfig`` and its ``StreamDataRetention``.

A frozen dataclass validated in ``__post_init__`` with Pravega's rules
(``ReaderGroupConfig.ReaderGroupConfigBuilder.build``): at least one stream; each stream cut
belongs to its stream; for a start and an end cut of one stream, every segment in both has a start
offset at or before its end offset (a start of -1, a future segment, needs an end of -1), and the
start's smallest and largest segment ids are at or below the end's; at least one outstanding
checkpoint. Violations raise :class:`~pravega_spark.errors.InvalidConfigError` and create nothing.

Example:
    >>> config = ReaderGroupConfig({"iot/sensors": "earliest", "iot/alerts": ("latest", None)},
    ...                            retention_type=StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT)
    >>> config.start_of("iot/alerts"), config.is_subscriber
    ('latest', True)
    >>> ReaderGroupConfig.from_json(config.to_json()) == config
    True
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from ..errors import InvalidConfigError, PravegaSparkError
from ..stream.names import parse_scoped_name
from ..stream.stream_cut import StreamCut

__all__ = ["EARLIEST", "LATEST", "ReaderGroupConfig", "StreamDataRetention"]

EARLIEST = "earliest"
"""Start at the stream's head when the group is created (Pravega: ``StreamCut.UNBOUNDED`` start)."""
LATEST = "latest"
"""Start at the stream's tail when the group is created."""

Start = str | StreamCut
StreamRange = tuple[Start, StreamCut | None]


class StreamDataRetention(str, enum.Enum):
    """Whether and how a reader group holds back its streams' truncation (Pravega's
    ``ReaderGroupConfig.StreamDataRetention``)."""

    NONE = "NONE"
    """Not a subscriber: retention ignores the group."""
    MANUAL_RELEASE_AT_USER_STREAMCUT = "MANUAL_RELEASE_AT_USER_STREAMCUT"
    """A subscriber whose cuts the user publishes (``ReaderGroup.update_retention_stream_cut``)."""
    AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT = "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"
    """A subscriber whose cuts are those of its last completed checkpoint."""

    def __repr__(self) -> str:
        return f"StreamDataRetention.{self.value}"


def _normalize_start(stream: str, start: object) -> Start:
    if isinstance(start, StreamCut):
        if start.is_unbounded:
            return EARLIEST  # Pravega: an UNBOUNDED start is the head
        if start.stream != stream:
            raise InvalidConfigError(f"the start cut of {stream!r} is a cut of {start.stream!r}")
        return start
    if start in (EARLIEST, LATEST):
        return start
    raise InvalidConfigError(f"the start of {stream!r} must be 'earliest', 'latest' or a StreamCut, got {start!r}")


def _normalize_end(stream: str, end: object) -> StreamCut | None:
    if end is None or (isinstance(end, StreamCut) and end.is_unbounded):
        return None
    if not isinstance(end, StreamCut):
        raise InvalidConfigError(f"the end of {stream!r} must be None (unbounded) or a StreamCut, got {end!r}")
    if end.stream != stream:
        raise InvalidConfigError(f"the end cut of {stream!r} is a cut of {end.stream!r}")
    return end


def check_start_before_end(stream: str, start: StreamCut, end: StreamCut) -> None:
    """Pravega's ``verifyStartAndEndStreamCuts``: ``start`` precedes ``end``.

    Raises:
        InvalidConfigError: a segment of both is further in ``start`` than in ``end`` (or future
            in ``start`` only), or ``start``'s smallest or largest segment id is above ``end``'s.
    """
    for sid in sorted(start.positions.keys() & end.positions.keys()):
        low, high = start.positions[sid], end.positions[sid]
        if (low == -1 and high != -1) or (low != -1 and high != -1 and low > high):
            raise InvalidConfigError(f"{stream}: segment {sid} starts at offset {low}, after its end offset {high}")
    if min(start.positions) > min(end.positions) or max(start.positions) > max(end.positions):
        raise InvalidConfigError(f"{stream}: the start cut (segments {sorted(start.positions)}) must precede "
                                 f"the end cut (segments {sorted(end.positions)})")


def _normalize_streams(streams: object) -> Mapping[str, StreamRange]:
    if not isinstance(streams, Mapping) or not streams:
        raise InvalidConfigError(f"streams must be a non-empty mapping of 'scope/stream' to a start or a "
                                 f"(start, end) pair, got {streams!r}")
    out: dict[str, StreamRange] = {}
    for name, value in streams.items():
        try:
            scope, stream = parse_scoped_name(name)
        except PravegaSparkError as exc:
            raise InvalidConfigError(f"reader group stream: {exc}") from None
        scoped = f"{scope}/{stream}"
        if scoped in out:
            raise InvalidConfigError(f"stream {scoped!r} is listed twice")
        if isinstance(value, tuple):
            if len(value) != 2:
                raise InvalidConfigError(f"the range of {scoped!r} must be a (start, end) pair, got {value!r}")
            start, end = _normalize_start(scoped, value[0]), _normalize_end(scoped, value[1])
        else:
            start, end = _normalize_start(scoped, value), None
        if isinstance(start, StreamCut) and end is not None:
            check_start_before_end(scoped, start, end)
        out[scoped] = (start, end)
    return MappingProxyType(dict(sorted(out.items())))


@dataclass(frozen=True)
class ReaderGroupConfig:
    """What a reader group reads and how it checkpoints (Pravega's ``ReaderGroupConfig``).

    Args:
        streams: scoped stream name (``"scope/stream"``, several scopes allowed) -> start
            (``"earliest"``: the head when the group is created; ``"latest"``; or a ``StreamCut``
            of that stream), or a ``(start, end)`` pair with end ``None`` (unbounded) or a cut.
        automatic_checkpoint_interval: how often a checkpoint is started automatically (default
            30 s, Pravega's); ``None`` disables automatic checkpoints.
        max_outstanding_checkpoints: how many checkpoints may be pending at once (at least 1).
        retention_type: whether the group is a subscriber of its streams, and how it releases.
        position_refresh_interval: how often a reader records its positions and liveness in
            its member row when nothing else makes it commit (default 10 s; Pravega's readers
            update their distance to the tail every (N+1) s). ``get_stream_cuts`` and
            ``unread_bytes`` may lag by this much between checkpoints.
        reader_silence_limit: a reader silent this long (no read, no refresh) is taken offline by
            the next reader that refreshes, or by ``jobs/reader_groups.py``; at least twice the
            refresh interval (default 60 s). ``None``: readers stay online until taken offline
            explicitly, as in Pravega.

    Raises:
        InvalidConfigError: any rule of Pravega's builder broken (see the module docstring).
    """

    streams: Mapping[str, object] = field(compare=False)  # compared and hashed through ``_key``
    automatic_checkpoint_interval: timedelta | None = timedelta(seconds=30)
    max_outstanding_checkpoints: int = 3
    retention_type: StreamDataRetention = StreamDataRetention.NONE
    position_refresh_interval: timedelta = timedelta(seconds=10)
    reader_silence_limit: timedelta | None = timedelta(seconds=60)
    _key: tuple = field(init=False, repr=False, compare=True, hash=True, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", _normalize_streams(self.streams))
        interval = self.automatic_checkpoint_interval
        if interval is not None and (not isinstance(interval, timedelta) or interval <= timedelta(0)):
            raise InvalidConfigError(f"automatic_checkpoint_interval must be a positive timedelta or None, "
                                     f"got {interval!r}")
        count = self.max_outstanding_checkpoints
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidConfigError(f"max_outstanding_checkpoints must be an int >= 1, got {count!r}")
        try:
            object.__setattr__(self, "retention_type", StreamDataRetention(self.retention_type))
        except ValueError:
            allowed = ", ".join(m.value for m in StreamDataRetention)
            raise InvalidConfigError(f"retention_type must be one of {allowed}, got {self.retention_type!r}") from None
        refresh, silence = self.position_refresh_interval, self.reader_silence_limit
        if not isinstance(refresh, timedelta) or refresh <= timedelta(0):
            raise InvalidConfigError(f"position_refresh_interval must be a positive timedelta, got {refresh!r}")
        if silence is not None and (not isinstance(silence, timedelta) or silence < 2 * refresh):
            raise InvalidConfigError(f"reader_silence_limit must be None or a timedelta of at least twice the "
                                     f"position refresh interval ({2 * refresh}), got {silence!r}")
        object.__setattr__(self, "_key", tuple(self.streams.items()))

    def __repr__(self) -> str:
        interval = self.automatic_checkpoint_interval
        streams = {name: start if end is None else (start, end) for name, (start, end) in self.streams.items()}
        return (f"ReaderGroupConfig(streams={streams!r}, automatic_checkpoint_interval="
                f"{None if interval is None else str(interval)}, max_outstanding_checkpoints="
                f"{self.max_outstanding_checkpoints}, retention_type={self.retention_type.value}, "
                f"position_refresh_interval={self.position_refresh_interval}, "
                f"reader_silence_limit={self.reader_silence_limit})")

    # ---- what the group reads -----------------------------------------------------------------
    def start_of(self, stream: str) -> Start:
        """The configured start of ``stream`` (``"earliest"``, ``"latest"`` or a cut)."""
        return self.streams[stream][0]

    def end_of(self, stream: str) -> StreamCut | None:
        """The configured end cut of ``stream``, or None (unbounded)."""
        return self.streams[stream][1]

    @property
    def scoped_streams(self) -> list[str]:
        """The group's streams, sorted."""
        return list(self.streams)

    @property
    def is_subscriber(self) -> bool:
        """Whether the group subscribes to its streams (a retention type other than NONE)."""
        return self.retention_type is not StreamDataRetention.NONE

    # ---- storage form -------------------------------------------------------------------------
    def to_json(self) -> str:
        """The config as JSON (cuts in their text form, the interval in microseconds)."""
        def cut(value):
            return value if value is None or isinstance(value, str) else {"cut": value.as_text()}

        interval = self.automatic_checkpoint_interval
        return json.dumps({
            "streams": {name: [cut(start), cut(end)] for name, (start, end) in self.streams.items()},
            "automatic_checkpoint_interval_us": None if interval is None else interval // timedelta(microseconds=1),
            "max_outstanding_checkpoints": self.max_outstanding_checkpoints,
            "retention_type": self.retention_type.value,
            "position_refresh_interval_us": self.position_refresh_interval // timedelta(microseconds=1),
            "reader_silence_limit_us": (None if self.reader_silence_limit is None
                                        else self.reader_silence_limit // timedelta(microseconds=1)),
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ReaderGroupConfig:
        """The config ``to_json`` wrote."""
        data = json.loads(text)

        def cut(value):
            return StreamCut.from_text(value["cut"]) if isinstance(value, dict) else value

        interval = data["automatic_checkpoint_interval_us"]
        return cls({name: (cut(start), cut(end)) for name, (start, end) in data["streams"].items()},
                   automatic_checkpoint_interval=None if interval is None else timedelta(microseconds=interval),
                   max_outstanding_checkpoints=data["max_outstanding_checkpoints"],
                   retention_type=StreamDataRetention(data["retention_type"]),
                   position_refresh_interval=timedelta(microseconds=data.get("position_refresh_interval_us", 10_000_000)),
                   reader_silence_limit=(None if data.get("reader_silence_limit_us", 60_000_000) is None
                                         else timedelta(microseconds=data.get("reader_silence_limit_us", 60_000_000))))
