"""Stream configuration: scaling policy, retention policy, tags (pure Python).

Mirrors Pravega's ``ScalingPolicy``, ``RetentionPolicy`` and ``StreamConfiguration`` as frozen
dataclasses with Pravega's factories. Every value is validated in ``__post_init__`` (so direct
construction and ``dataclasses.replace`` are checked too) and refused with
:class:`~pravega_spark.errors.InvalidConfigError`, whose message shows the actual and the allowed
values. Durations are ``timedelta``s; the JSON form stores them as integer microseconds so that
``StreamConfiguration.from_json(c.to_json()) == c`` holds exactly.

Example:
    >>> config = StreamConfiguration(
    ...     scaling_policy=ScalingPolicy.by_event_rate(100, 2, 3),
    ...     retention_policy=RetentionPolicy.by_time(timedelta(days=1)),
    ...     tags=["prod", "iot"])
    >>> config.tags
    ('iot', 'prod')
    >>> StreamConfiguration.from_json(config.to_json()) == config
    True
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pravega_spark.errors import InvalidConfigError

__all__ = [
    "MAX_TAG_COUNT",
    "MAX_TAG_LENGTH",
    "RetentionPolicy",
    "RetentionType",
    "ScaleType",
    "ScalingPolicy",
    "StreamConfiguration",
]

MAX_TAG_COUNT = 127
"""Pravega checks ``tags.size() < 128``: at most 127 distinct tags."""

MAX_TAG_LENGTH = 255
"""Pravega checks ``tag.length() < 256``: at most 255 chars per tag."""

_MICROSECOND = timedelta(microseconds=1)


def _require_int(value: object, what: str, minimum: int) -> int:
    """``value`` if it is an int (not a bool) ``>= minimum``, else :class:`InvalidConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(
            f"{what} must be an int >= {minimum}, got {type(value).__name__} {value!r}"
        )
    if value < minimum:
        raise InvalidConfigError(f"{what} must be >= {minimum}, got {value}")
    return value


def _is_zero_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


def _require_timedelta(value: object, what: str) -> timedelta:
    """``value`` if it is a ``timedelta >= 0``, else :class:`InvalidConfigError`."""
    if not isinstance(value, timedelta):
        raise InvalidConfigError(
            f"{what} must be a datetime.timedelta >= 0, got {type(value).__name__} {value!r}"
        )
    if value < timedelta(0):
        raise InvalidConfigError(f"{what} must be >= timedelta(0), got {value!r}")
    return value


def _micros(value: timedelta) -> int:
    return value // _MICROSECOND


def _from_micros(value: object, what: str) -> timedelta:
    return timedelta(microseconds=_require_int(value, what, 0))


def _enum_member(enum_type: type[enum.Enum], value: object, what: str) -> Any:
    try:
        return enum_type[value] if isinstance(value, str) else enum_type(value)
    except (KeyError, ValueError):
        allowed = ", ".join(m.name for m in enum_type)
        raise InvalidConfigError(f"{what} must be one of {allowed}, got {value!r}") from None


def _get(data: Mapping[str, Any], key: str, what: str) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidConfigError(f"{what} must be a JSON object, got {type(data).__name__}")
    if key not in data:
        raise InvalidConfigError(f"{what} is missing {key!r} (keys present: {sorted(data)})")
    return data[key]


class ScaleType(enum.Enum):
    """Pravega's ``ScalingPolicy.ScaleType``."""

    FIXED_NUM_SEGMENTS = "FIXED_NUM_SEGMENTS"
    BY_RATE_IN_EVENTS_PER_SEC = "BY_RATE_IN_EVENTS_PER_SEC"
    BY_RATE_IN_KBYTES_PER_SEC = "BY_RATE_IN_KBYTES_PER_SEC"


@dataclass(frozen=True)
class ScalingPolicy:
    """How many segments a stream has and when they split or merge (Pravega's ``ScalingPolicy``).

    ``min_num_segments`` is also the initial segment count. ``target_rate`` applies per segment,
    in events/s or KiB/s; a fixed policy has ``target_rate == scale_factor == 0``.

    Example:
        >>> ScalingPolicy.fixed(3)
        ScalingPolicy.fixed(3)
        >>> ScalingPolicy.by_event_rate(100, 2, 1).target_rate
        100
    """

    scale_type: ScaleType
    target_rate: int
    scale_factor: int
    min_num_segments: int

    def __post_init__(self) -> None:
        if not isinstance(self.scale_type, ScaleType):
            allowed = ", ".join(m.name for m in ScaleType)
            raise InvalidConfigError(
                f"scale_type must be a ScaleType ({allowed}), got {self.scale_type!r}"
            )
        _require_int(self.min_num_segments, "min_num_segments", 1)
        if self.scale_type is ScaleType.FIXED_NUM_SEGMENTS:
            if not (_is_zero_int(self.target_rate) and _is_zero_int(self.scale_factor)):
                raise InvalidConfigError(
                    "a FIXED_NUM_SEGMENTS policy takes target_rate=0 and scale_factor=0, got "
                    f"target_rate={self.target_rate!r}, scale_factor={self.scale_factor!r}"
                )
        else:
            _require_int(self.target_rate, "target_rate", 1)
            _require_int(self.scale_factor, "scale_factor", 1)

    @classmethod
    def fixed(cls, min_num_segments: int) -> ScalingPolicy:
        """A fixed number of segments (Pravega's ``ScalingPolicy.fixed``).

        Example:
            >>> ScalingPolicy.fixed(2).min_num_segments
            2
        """
        return cls(ScaleType.FIXED_NUM_SEGMENTS, 0, 0, min_num_segments)

    @classmethod
    def by_event_rate(
        cls, target_rate: int, scale_factor: int, min_num_segments: int
    ) -> ScalingPolicy:
        """Scale on events/s per segment (Pravega's ``ScalingPolicy.byEventRate``).

        Example:
            >>> ScalingPolicy.by_event_rate(1000, 2, 3).scale_type.name
            'BY_RATE_IN_EVENTS_PER_SEC'
        """
        return cls(ScaleType.BY_RATE_IN_EVENTS_PER_SEC, target_rate, scale_factor, min_num_segments)

    @classmethod
    def by_data_rate(
        cls, target_kbps: int, scale_factor: int, min_num_segments: int
    ) -> ScalingPolicy:
        """Scale on KiB/s per segment (Pravega's ``ScalingPolicy.byDataRate``).

        Example:
            >>> ScalingPolicy.by_data_rate(1024, 2, 1).target_rate
            1024
        """
        return cls(ScaleType.BY_RATE_IN_KBYTES_PER_SEC, target_kbps, scale_factor, min_num_segments)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reverses it."""
        return {
            "scale_type": self.scale_type.name,
            "target_rate": self.target_rate,
            "scale_factor": self.scale_factor,
            "min_num_segments": self.min_num_segments,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScalingPolicy:
        """Rebuild a policy from :meth:`to_dict` output (validated)."""
        what = "scaling policy"
        return cls(
            _enum_member(ScaleType, _get(data, "scale_type", what), "scale_type"),
            _get(data, "target_rate", what),
            _get(data, "scale_factor", what),
            _get(data, "min_num_segments", what),
        )

    def __repr__(self) -> str:
        if self.scale_type is ScaleType.FIXED_NUM_SEGMENTS:
            return f"ScalingPolicy.fixed({self.min_num_segments})"
        factory, rate = (
            ("by_event_rate", "target_rate")
            if self.scale_type is ScaleType.BY_RATE_IN_EVENTS_PER_SEC
            else ("by_data_rate", "target_kbps")
        )
        return (
            f"ScalingPolicy.{factory}({rate}={self.target_rate}, "
            f"scale_factor={self.scale_factor}, min_num_segments={self.min_num_segments})"
        )


class RetentionType(enum.Enum):
    """Pravega's ``RetentionPolicy.RetentionType``."""

    TIME = "TIME"
    SIZE = "SIZE"


@dataclass(frozen=True)
class RetentionPolicy:
    """How much of a stream to keep (Pravega's ``RetentionPolicy``).

    ``TIME`` keeps at least ``retention_param`` (a ``timedelta``) of data and at most
    ``retention_max``; ``SIZE`` does the same in bytes (ints). ``retention_max=None`` means
    unbounded (Pravega stores ``Long.MAX_VALUE``). With subscribers (consumption-based retention)
    the min and max are the floor and ceiling of the truncation point.

    Example:
        >>> RetentionPolicy.by_size_bytes(10 << 30).retention_param
        10737418240
        >>> RetentionPolicy.by_time(timedelta(days=1))
        RetentionPolicy.by_time(min='1 day, 0:00:00')
    """

    retention_type: RetentionType
    retention_param: timedelta | int
    retention_max: timedelta | int | None = None

    def __post_init__(self) -> None:
        if self.retention_type is RetentionType.TIME:
            _require_timedelta(self.retention_param, "time retention min")
            if self.retention_max is not None:
                _require_timedelta(self.retention_max, "time retention max")
        elif self.retention_type is RetentionType.SIZE:
            _require_int(self.retention_param, "size retention min (bytes)", 0)
            if self.retention_max is not None:
                _require_int(self.retention_max, "size retention max (bytes)", 0)
        else:
            raise InvalidConfigError(
                f"retention_type must be a RetentionType (TIME, SIZE), got {self.retention_type!r}"
            )
        if self.retention_max is not None and self.retention_max < self.retention_param:
            raise InvalidConfigError(
                f"retention max must be >= min, got max={self.retention_max!r} "
                f"< min={self.retention_param!r}"
            )

    @classmethod
    def by_time(cls, min: timedelta, max: timedelta | None = None) -> RetentionPolicy:
        """Keep at least ``min`` and at most ``max`` of time (Pravega's ``RetentionPolicy.byTime``).

        Example:
            >>> RetentionPolicy.by_time(timedelta(hours=1), timedelta(days=1)).retention_max
            datetime.timedelta(days=1)
        """
        return cls(RetentionType.TIME, min, max)

    @classmethod
    def by_size_bytes(cls, min: int, max: int | None = None) -> RetentionPolicy:
        """Keep at least ``min`` and at most ``max`` bytes (Pravega's ``bySizeBytes``).

        Example:
            >>> RetentionPolicy.by_size_bytes(1024).retention_max is None
            True
        """
        return cls(RetentionType.SIZE, min, max)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; times are integer microseconds (``"unit"`` says which unit)."""
        if self.retention_type is RetentionType.TIME:
            return {
                "retention_type": "TIME",
                "unit": "microseconds",
                "retention_param": _micros(self.retention_param),  # type: ignore[arg-type]
                "retention_max": None
                if self.retention_max is None
                else _micros(self.retention_max),  # type: ignore[arg-type]
            }
        return {
            "retention_type": "SIZE",
            "unit": "bytes",
            "retention_param": self.retention_param,
            "retention_max": self.retention_max,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionPolicy:
        """Rebuild a policy from :meth:`to_dict` output (validated)."""
        what = "retention policy"
        kind = _enum_member(RetentionType, _get(data, "retention_type", what), "retention_type")
        unit = _get(data, "unit", what)
        expected = "microseconds" if kind is RetentionType.TIME else "bytes"
        if unit != expected:
            raise InvalidConfigError(
                f"{kind.name} retention must be stored in {expected}, got unit {unit!r}"
            )
        param, max_ = _get(data, "retention_param", what), _get(data, "retention_max", what)
        if kind is RetentionType.TIME:
            param = _from_micros(param, "time retention min")
            max_ = None if max_ is None else _from_micros(max_, "time retention max")
        return cls(kind, param, max_)

    def __repr__(self) -> str:
        if self.retention_type is RetentionType.TIME:
            text = f"min='{self.retention_param}'"
            if self.retention_max is not None:
                text += f", max='{self.retention_max}'"
            return f"RetentionPolicy.by_time({text})"
        text = f"min={self.retention_param}"
        if self.retention_max is not None:
            text += f", max={self.retention_max}"
        return f"RetentionPolicy.by_size_bytes({text})"


def _default_scaling() -> ScalingPolicy:
    return ScalingPolicy.fixed(1)


def _normalise_tags(tags: object) -> tuple[str, ...]:
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
        raise InvalidConfigError(
            f"tags must be an iterable of str (e.g. a list), got {type(tags).__name__} {tags!r}"
        )
    unique: set[str] = set()
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidConfigError(f"each tag must be a str, got {type(tag).__name__} {tag!r}")
        if not 1 <= len(tag) <= MAX_TAG_LENGTH:
            raise InvalidConfigError(
                f"each tag must have 1 to {MAX_TAG_LENGTH} chars, got {len(tag)} chars: "
                f"{tag[:40]!r}{'...' if len(tag) > 40 else ''}"
            )
        unique.add(tag)
    if len(unique) > MAX_TAG_COUNT:
        raise InvalidConfigError(
            f"a stream may have at most {MAX_TAG_COUNT} tags, got {len(unique)} distinct tags"
        )
    return tuple(sorted(unique))


@dataclass(frozen=True)
class StreamConfiguration:
    """A stream's configuration (Pravega's ``StreamConfiguration``).

    ``tags`` accepts any iterable of str and is stored as a sorted tuple with duplicates collapsed
    (Pravega keeps a set). ``timestamp_aggregation_timeout=None`` means the watermarking default.
    ``rollover_size_bytes=0`` means the store's default.

    Example:
        >>> StreamConfiguration(ScalingPolicy.fixed(2), tags=["b", "a", "b"]).tags
        ('a', 'b')
        >>> StreamConfiguration().scaling_policy
        ScalingPolicy.fixed(1)
    """

    scaling_policy: ScalingPolicy = field(default_factory=_default_scaling)
    retention_policy: RetentionPolicy | None = None
    tags: tuple[str, ...] = ()
    timestamp_aggregation_timeout: timedelta | None = None
    rollover_size_bytes: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.scaling_policy, ScalingPolicy):
            raise InvalidConfigError(
                "scaling_policy must be a ScalingPolicy (e.g. ScalingPolicy.fixed(1)), got "
                f"{type(self.scaling_policy).__name__} {self.scaling_policy!r}"
            )
        if self.retention_policy is not None and not isinstance(
            self.retention_policy, RetentionPolicy
        ):
            raise InvalidConfigError(
                "retention_policy must be a RetentionPolicy or None, got "
                f"{type(self.retention_policy).__name__} {self.retention_policy!r}"
            )
        object.__setattr__(self, "tags", _normalise_tags(self.tags))
        if self.timestamp_aggregation_timeout is not None:
            _require_timedelta(self.timestamp_aggregation_timeout, "timestamp_aggregation_timeout")
        _require_int(self.rollover_size_bytes, "rollover_size_bytes", 0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (durations in integer microseconds); :meth:`from_dict` reverses it."""
        timeout = self.timestamp_aggregation_timeout
        return {
            "scaling_policy": self.scaling_policy.to_dict(),
            "retention_policy": None
            if self.retention_policy is None
            else self.retention_policy.to_dict(),
            "tags": list(self.tags),
            "timestamp_aggregation_timeout_us": None if timeout is None else _micros(timeout),
            "rollover_size_bytes": self.rollover_size_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamConfiguration:
        """Rebuild a configuration from :meth:`to_dict` output (validated)."""
        what = "stream configuration"
        retention = _get(data, "retention_policy", what)
        timeout = _get(data, "timestamp_aggregation_timeout_us", what)
        return cls(
            scaling_policy=ScalingPolicy.from_dict(_get(data, "scaling_policy", what)),
            retention_policy=None if retention is None else RetentionPolicy.from_dict(retention),
            tags=_get(data, "tags", what),
            timestamp_aggregation_timeout=None
            if timeout is None
            else _from_micros(timeout, "timestamp_aggregation_timeout_us"),
            rollover_size_bytes=_get(data, "rollover_size_bytes", what),
        )

    def to_json(self) -> str:
        """Compact, key-sorted JSON, as stored in the streams table.

        Example:
            >>> import json
            >>> json.loads(StreamConfiguration(tags=["prod"]).to_json())["tags"]
            ['prod']
        """
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> StreamConfiguration:
        """Parse :meth:`to_json` output; ``from_json(c.to_json()) == c``.

        Raises:
            InvalidConfigError: the text is not valid JSON or holds an invalid configuration.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InvalidConfigError(f"stream configuration is not valid JSON: {exc}") from None
        return cls.from_dict(data)
