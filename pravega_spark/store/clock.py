"""The store's clock and its conversions: one source of time for metadata, data files, readers and
transactions.

Every time the library records or compares (epochs, state changes, a reader's last sighting, a
transaction's lease, a data file's modification time) comes from ``_delta.clock``, which tests
and simulations replace with ``_delta.set_clock``; a process whose clock is set ahead is ahead
everywhere at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .. import _delta
from ..errors import InvalidConfigError


def utc_now() -> datetime:
    """Now, aware UTC."""
    return datetime.fromtimestamp(_delta.clock(), timezone.utc)


def now_ms() -> int:
    """Now, in ms since the epoch."""
    return int(_delta.clock() * 1000)


def as_utc(value: datetime, what: str = "now") -> datetime:
    """``value`` aware UTC (a naive one is taken as UTC); ``InvalidConfigError`` naming the
    argument ``what`` if it is not a datetime."""
    if not isinstance(value, datetime):
        raise InvalidConfigError(f"{what} must be a datetime, got {value!r}")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def check_duration(value, what: str, positive: bool = False) -> None:
    """``InvalidConfigError`` naming the argument ``what`` unless ``value`` is None or a
    ``timedelta`` of zero or more (more than zero if ``positive``)."""
    if value is None:
        return
    if not isinstance(value, timedelta) or value < timedelta(0) or (positive and value == timedelta(0)):
        need = "more than zero" if positive else "zero or more"
        raise InvalidConfigError(f"{what} must be a timedelta of {need}, got {value!r}")


def from_spark_time(value: datetime | None) -> datetime | None:
    """A timestamp collected from Spark (naive, in this process's local time) as aware UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.astimezone(timezone.utc)


def to_ms(value: datetime) -> int:
    """``value`` (naive: UTC) in ms since the epoch."""
    return int(as_utc(value).timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    """Ms since the epoch as aware UTC."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def duration_ms(delta: timedelta) -> int:
    """``delta`` in whole milliseconds."""
    return delta // timedelta(milliseconds=1)
