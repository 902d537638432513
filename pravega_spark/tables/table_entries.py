"""Key-value table entries: configuration, keys, versions, modifications and their rules, and the
DataFrame transformations of bulk updates and reads (pure: no storage).

Mirrors Pravega's ``KeyValueTableConfiguration``, ``TableEntry``, ``Version``, ``Insert`` / ``Put``
/ ``Remove`` and the table segment's conditional rules (PRAVEGA_SEMANTICS section 12):

- a key is ``primary + secondary`` bytes of exactly the configured lengths;
- a version is ``<segment>:<segment version>``; the segment version of an entry is its
  partition's largest version plus one when it is written, so a key's versions increase strictly,
  through removals and inserts again;
- ``Insert`` needs the key absent; ``Put``/``Remove`` with a version need that exact current
  version (``NoSuchKeyError`` if the key is absent, ``BadKeyVersionError`` if it differs);
- a batch holds one primary key, never mixes removals with updates, at most 256 keys and
  16 MiB - 8 KiB - 1 bytes, and applies all or nothing.

Example:
    >>> config = KeyValueTableConfiguration(4, primary_key_length=2, secondary_key_length=1)
    >>> check_key(b"abc", config)
    b'abc'
    >>> str(Version(3, 17))
    '3:17'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..errors import (
    BadKeyVersionError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidKeyError,
    NoSuchKeyError,
    TableEntryTooLargeError,
)
from ..store.schema import MAX_BATCH_KEY_COUNT, MAX_BATCH_LENGTH, MAX_KEY_LENGTH, MAX_VALUE_LENGTH
from .kv_router import partition_column

__all__ = [
    "BAD_KEY_VERSION", "BATCH_FAILED", "DUPLICATE_KEY", "ERROR_KINDS", "INVALID_KEY", "Insert",
    "KeyValueTableConfiguration", "NOT_EXISTS", "NO_SUCH_KEY", "Put", "Remove", "TableEntry",
    "VALUE_TOO_LARGE", "Version", "check_batch", "check_conditions", "check_key", "check_value",
    "filter_key_range", "filter_live", "with_decisions", "with_entry_columns",
]

NOT_EXISTS = -1
"""In a bulk update's version column: the key must not exist (an insert). Null: unconditional."""

# the error kinds of ``KeyValueTable.update_all``'s outcome
BAD_KEY_VERSION = "BadKeyVersion"
NO_SUCH_KEY = "NoSuchKey"
INVALID_KEY = "InvalidKey"
VALUE_TOO_LARGE = "ValueTooLarge"
DUPLICATE_KEY = "DuplicateKey"
BATCH_FAILED = "BatchFailed"  # another key of the same primary key failed: nothing of it applied
ERROR_KINDS = (BAD_KEY_VERSION, NO_SUCH_KEY, INVALID_KEY, VALUE_TOO_LARGE, DUPLICATE_KEY, BATCH_FAILED)


def _positive_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidConfigError(f"{what} must be an int >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class KeyValueTableConfiguration:
    """A key-value table's layout (Pravega's ``KeyValueTableConfiguration``).

    Args:
        partition_count: table segments (Delta partitions) the primary keys are hashed over (> 0).
        primary_key_length: bytes of every primary key (> 0).
        secondary_key_length: bytes of every secondary key (>= 0); primary plus secondary at most
            8,192 (Pravega's ``MAXIMUM_KEY_LENGTH``).

    Raises:
        InvalidConfigError: a value out of range (the message shows it and the rule).
    """

    partition_count: int
    primary_key_length: int
    secondary_key_length: int = 0

    def __post_init__(self) -> None:
        _positive_int(self.partition_count, "partition_count", 1)
        _positive_int(self.primary_key_length, "primary_key_length", 1)
        _positive_int(self.secondary_key_length, "secondary_key_length", 0)
        if self.key_length > MAX_KEY_LENGTH:
            raise InvalidConfigError(f"primary_key_length + secondary_key_length must be at most {MAX_KEY_LENGTH} "
                                     f"bytes, got {self.primary_key_length} + {self.secondary_key_length}")

    @property
    def key_length(self) -> int:
        return self.primary_key_length + self.secondary_key_length

    def to_json(self) -> str:
        return json.dumps({"partition_count": self.partition_count, "primary_key_length": self.primary_key_length,
                           "secondary_key_length": self.secondary_key_length}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KeyValueTableConfiguration:
        data = json.loads(text)
        return cls(int(data["partition_count"]), int(data["primary_key_length"]), int(data["secondary_key_length"]))


@dataclass(frozen=True, order=True)
class Version:
    """An entry's version: its table segment (partition) and its segment version, which increases
    with every commit to the segment. Comparable; ``str`` and ``from_string`` round-trip it.

    ``Version.NOT_EXISTS`` as a condition means "the key must be absent" (an insert)."""

    segment: int
    number: int
    NOT_EXISTS: ClassVar[Version]

    def __str__(self) -> str:
        return f"{self.segment}:{self.number}"

    @classmethod
    def from_string(cls, text: str) -> Version:
        """The version ``str(version)`` printed.

        Raises:
            ValueError: not ``<segment>:<number>``.
        """
        segment, _, number = str(text).partition(":")
        try:
            return cls(int(segment), int(number))
        except ValueError:
            raise ValueError(f"not a key-value table version (<segment>:<number>): {text!r}") from None


Version.NOT_EXISTS = Version(-1, NOT_EXISTS)


@dataclass(frozen=True)
class TableEntry:
    """A key's live entry: ``key`` (primary + secondary bytes), ``value`` and ``version``."""

    key: bytes
    value: bytes
    version: Version


@dataclass(frozen=True)
class Insert:
    """Add ``key`` if it is absent (else ``BadKeyVersionError``)."""

    key: bytes
    value: bytes


@dataclass(frozen=True)
class Put:
    """Set ``key`` to ``value``: unconditionally (``version`` None) or if its current version is
    ``version`` (``Version.NOT_EXISTS``: if it is absent)."""

    key: bytes
    value: bytes
    version: Version | None = None


@dataclass(frozen=True)
class Remove:
    """Remove ``key``: unconditionally (absent is fine) or if its current version is ``version``."""

    key: bytes
    version: Version | None = None


Modification = Insert | Put | Remove


def check_key(key: object, config: KeyValueTableConfiguration) -> bytes:
    """``key`` as bytes, of exactly the table's key length.

    Raises:
        InvalidKeyError: not bytes, or of another length.
    """
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidKeyError(f"a key must be bytes, got {type(key).__name__}")
    key = bytes(key)
    if len(key) != config.key_length:
        raise InvalidKeyError(f"a key must be exactly {config.primary_key_length} + {config.secondary_key_length} = "
                              f"{config.key_length} bytes (primary + secondary), got {len(key)}")
    return key


def check_value(value: object) -> bytes:
    """``value`` as bytes, at most 1,040,384 bytes long.

    Raises:
        TableEntryTooLargeError: longer. InvalidKeyError is not used for values.
    """
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"a value must be bytes, got {type(value).__name__}")
    value = bytes(value)
    if len(value) > MAX_VALUE_LENGTH:
        raise TableEntryTooLargeError(f"a value may be at most {MAX_VALUE_LENGTH} bytes, got {len(value)}")
    return value


def check_batch(modifications: Sequence[Modification], config: KeyValueTableConfiguration) -> bytes:
    """Check a batch against Pravega's rules; returns its primary key.

    Raises:
        InvalidKeyError: a key of the wrong length. TableEntryTooLargeError: a value, the key
        count or the bytes over Pravega's limits. InvalidBatchError: no modification, several
        primary keys, a key twice, removals mixed with updates, or something else than
        ``Insert``/``Put``/``Remove``.
    """
    mods = list(modifications)
    if not mods:
        raise InvalidBatchError("a batch needs at least one modification")
    if any(not isinstance(m, (Insert, Put, Remove)) for m in mods):
        bad = next(m for m in mods if not isinstance(m, (Insert, Put, Remove)))
        raise InvalidBatchError(f"a batch holds Insert, Put and Remove only, got {type(bad).__name__}")
    if len(mods) > MAX_BATCH_KEY_COUNT:
        raise TableEntryTooLargeError(f"a batch may hold at most {MAX_BATCH_KEY_COUNT} keys, got {len(mods)}")
    keys = [check_key(m.key, config) for m in mods]
    for m in mods:
        if not isinstance(m, Remove):
            check_value(m.value)
    primary = {k[:config.primary_key_length] for k in keys}
    if len(primary) > 1:
        raise InvalidBatchError(f"a batch must update one primary key, got {len(primary)}")
    if len(set(keys)) != len(keys):
        raise InvalidBatchError("a batch may name each key once")
    if len({isinstance(m, Remove) for m in mods}) > 1:
        raise InvalidBatchError("a batch may not mix removals with updates")
    size = sum(len(k) + (0 if isinstance(m, Remove) else len(m.value)) for k, m in zip(keys, mods, strict=True))
    if size > MAX_BATCH_LENGTH:
        raise TableEntryTooLargeError(f"a batch may hold at most {MAX_BATCH_LENGTH} key and value bytes, got {size}")
    return keys[0][:config.primary_key_length]


def check_conditions(modifications: Sequence[Modification], current: Mapping[bytes, Version]) -> None:
    """Check every modification's condition against the keys' current versions (absent keys are
    missing from ``current``); the whole batch fails on the first broken one.

    Raises:
        BadKeyVersionError: an insert of a present key, or a version that is not the current one.
        NoSuchKeyError: a version given for an absent key.
    """
    for m in modifications:
        found = current.get(bytes(m.key))
        expected = Version.NOT_EXISTS if isinstance(m, Insert) else m.version
        if expected is None:
            continue
        if expected.number == NOT_EXISTS:
            if found is not None:
                raise BadKeyVersionError(f"key {bytes(m.key)!r} exists (version {found}): not inserted")
        elif found is None:
            raise NoSuchKeyError(f"key {bytes(m.key)!r} does not exist (expected version {expected})")
        elif found != expected:
            raise BadKeyVersionError(f"key {bytes(m.key)!r} is at version {found}, not {expected}")


# ---- DataFrames ------------------------------------------------------------------------------
def with_entry_columns(df: DataFrame, *, config: KeyValueTableConfiguration, key: str = "key") -> DataFrame:
    """Adds ``partition`` (the primary key's table segment) and ``key_hash`` of a binary key."""
    return (df.withColumn("partition", partition_column(key, primary_key_length=config.primary_key_length,
                                                        partition_count=config.partition_count))
              .withColumn("key_hash", F.xxhash64(F.col(key))))


def filter_live(entries: DataFrame) -> DataFrame:
    """Each key's live entry (its newest, unless a tombstone) from a KVT's entries table:
    ``partition, key_hash, key, value, version``."""
    newest = F.max_by(F.struct("value", "version", "removed"), "version")
    return (entries.groupBy("partition", "key_hash", "key").agg(newest.alias("e"))
            .where(~F.col("e.removed"))
            .select("partition", "key_hash", "key", F.col("e.value").alias("value"), F.col("e.version").alias("version")))


def filter_key_range(entries: DataFrame, *, low: bytes | None, high: bytes | None, prefix: bytes | None = None,
                     offset: int = 0, length: int | None = None) -> DataFrame:
    """The entries whose key part ``key[offset:offset+length]`` is in ``[low, high]`` (each bound
    optional, both inclusive) and starts with ``prefix`` (bytes compare unsigned, as Pravega's)."""
    part: Column = F.col("key") if length is None else F.substring("key", offset + 1, length)
    if low is not None:
        entries = entries.where(part >= F.lit(bytearray(low)))
    if high is not None:
        entries = entries.where(part <= F.lit(bytearray(high)))
    if prefix is not None and len(prefix):
        entries = entries.where(F.substring(part, 1, len(prefix)) == F.lit(bytearray(prefix)))
    return entries


def with_decisions(source: DataFrame, live: DataFrame, *, config: KeyValueTableConfiguration,
                   stamps: Mapping[int, int]) -> DataFrame:
    """Decide a bulk update: ``source`` (``key``, ``value``, ``expected``: null, -1 for "absent",
    or a version number) against ``live`` (the table's live ``partition, key_hash, key, version``).

    Output: ``partition, key_hash, key, value, version`` (the new version: the partition's stamp,
    null when not applied) and ``error`` (null, or one of ``ERROR_KINDS``). Every key of a
    primary key fails if one does (``BATCH_FAILED``), as a Pravega batch does.
    """
    pk_len = config.primary_key_length
    current = live.select("partition", "key_hash", "key", F.col("version").alias("current"))
    valid_key = F.coalesce(F.length("key") == F.lit(config.key_length), F.lit(False))
    stamp = F.element_at(F.create_map(*[F.lit(x) for p, s in sorted(stamps.items()) for x in (int(p), int(s))]),
                         F.col("partition")) if stamps else F.lit(None).cast("long")
    own = (F.when(~valid_key, F.lit(INVALID_KEY))
           .when(F.col("value").isNull() | (F.length("value") > F.lit(MAX_VALUE_LENGTH)), F.lit(VALUE_TOO_LARGE))
           .when(F.col("copies") > 1, F.lit(DUPLICATE_KEY))
           .when(F.col("expected").isNull(), F.lit(None))
           .when(F.col("expected") == F.lit(NOT_EXISTS),
                 F.when(F.col("current").isNotNull(), F.lit(BAD_KEY_VERSION)))
           .when(F.col("current").isNull(), F.lit(NO_SUCH_KEY))
           .when(F.col("current") != F.col("expected"), F.lit(BAD_KEY_VERSION)))
    by_primary = Window.partitionBy("primary_key")
    return (source
            .transform(with_entry_columns, config=config)
            .withColumn("primary_key", F.substring("key", 1, pk_len))
            .withColumn("copies", F.count(F.lit(1)).over(Window.partitionBy("primary_key", "key")))
            .join(current, ["partition", "key_hash", "key"], "left")
            .withColumn("own_error", own.cast("string"))
            .withColumn("group_failed", F.max(F.col("own_error").isNotNull()).over(by_primary))
            .withColumn("error", F.when(F.col("own_error").isNotNull(), F.col("own_error"))
                                  .when(F.col("group_failed"), F.lit(BATCH_FAILED)))
            .withColumn("version", F.when(F.col("error").isNull(), stamp.cast("long")))
            .select("partition", "key_hash", "key", "value", "version", "error"))
