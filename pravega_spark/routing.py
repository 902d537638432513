"""Routing: routing key -> key-space position -> segment -> framed byte offset.

Pure DataFrame/Column transformations (use them with ``df.transform``). The position of a key is
the top 52 bits of Spark's ``xxhash64(routing_key)`` read as a fraction in ``[0, 1)`` — the same
construction as Pravega's ``HashHelper.longToDoubleFraction``, on Spark's own hash so it is stable
and usable from SQL::

    SELECT shiftrightunsigned(xxhash64(routing_key), 12) / 4503599627370496D  -- 2^52

A null routing key gets a fresh random position per event, as in Pravega.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .schema import HEADER_SIZE, MAX_EVENT_SIZE
from .segments import SegmentRecord

TWO_POW_52 = float(1 << 52)
# Above this many segments, routing uses a broadcast range join instead of a CASE chain.
MAX_CASE_SEGMENTS = 64


def key_position(routing_key: Column | str) -> Column:
    """The key-space position in ``[0, 1)`` of a routing key column.

    Example:
        >>> df.select(key_position("device_id"))  # doctest: +SKIP
    """
    key = F.col(routing_key) if isinstance(routing_key, str) else routing_key
    hashed = F.shiftrightunsigned(F.xxhash64(key), 12).cast("double") / F.lit(TWO_POW_52)
    return F.when(key.isNull(), F.rand()).otherwise(hashed)


def with_key_position(df: DataFrame, *, routing_key: str = "routing_key",
                      output: str = "key_position") -> DataFrame:
    """Adds ``key_position`` computed from ``routing_key``."""
    return df.withColumn(output, key_position(routing_key))


def with_segment_id(df: DataFrame, *, segments: Sequence[SegmentRecord],
                    position: str = "key_position", output: str = "segment_id") -> DataFrame:
    """Adds the id of the segment (of one epoch, ``[key_start, key_end)``) holding ``position``.

    Mirrors Pravega's ``SegmentSelector``: the event goes to the open segment of the current epoch
    whose range holds its key position.
    """
    ordered = sorted(segments, key=lambda s: s.key_start)
    if len(ordered) <= MAX_CASE_SEGMENTS:
        pos = F.col(position)
        expr = None
        for seg in ordered[:-1]:
            cond, sid = pos < F.lit(seg.key_end), F.lit(seg.segment_id).cast("long")
            expr = F.when(cond, sid) if expr is None else expr.when(cond, sid)
        last = F.lit(ordered[-1].segment_id).cast("long")
        return df.withColumn(output, last if expr is None else expr.otherwise(last))
    spark = df.sparkSession
    ranges = spark.createDataFrame(
        [(s.segment_id, s.key_start, s.key_end if i < len(ordered) - 1 else 2.0)
         for i, s in enumerate(ordered)],
        "__sid long, __start double, __end double")
    joined = df.join(F.broadcast(ranges),
                     (F.col(position) >= F.col("__start")) & (F.col(position) < F.col("__end")))
    return joined.withColumnRenamed("__sid", output).drop("__start", "__end")


def with_event_checks(df: DataFrame, *, event: str = "event",
                      max_size: int = MAX_EVENT_SIZE) -> DataFrame:
    """Fails the Spark job (so nothing is committed) on a null or oversized payload.

    The error text starts with ``EventTooLarge:`` or ``NullEvent:`` so callers can map it.
    """
    size = F.length(F.col(event))
    checked = (F.when(F.col(event).isNull(), F.raise_error(F.lit("NullEvent: an event payload is null")))
               .when(size > F.lit(max_size),
                     F.raise_error(F.concat(F.lit("EventTooLarge: an event of "), size.cast("string"),
                                            F.lit(f" bytes exceeds the {max_size}-byte limit"))))
               .otherwise(F.col(event)))
    return df.withColumn(event, checked)


def with_offsets(df: DataFrame, *, tails: Mapping[int, int], order: Sequence[Column | str],
                 segment: str = "segment_id", event: str = "event") -> DataFrame:
    """Adds ``offset`` and ``next_offset`` with Pravega's framing.

    Within each segment, events are laid out in ``order`` after the segment's current tail:
    ``offset = tail + sum(8 + len) of the events before it``, ``next_offset = offset + 8 + len``.

    The running sum is a window per segment, so Spark shuffles the rows by segment. With
    ``spark.sql.shuffle.partitions`` set to the number of segments, each segment gets a shuffle
    partition (one task) of its own: the window is keyed on a value per segment chosen so that
    Spark's hash partitioning sends segment ``i`` (in ``tails`` order) to partition ``i``.
    """
    framed = F.length(F.col(event)).cast("long") + F.lit(HEADER_SIZE)
    tail = _per_segment(F.col(segment), tails, default=0)
    bucket = _per_segment(F.col(segment), dict(zip(tails, partition_keys(len(tails)), strict=True)))
    window = (Window.partitionBy(bucket).orderBy(*order)
              .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    # two projections, not five: each DataFrame call is analysed on its own, which a small
    # write pays for as much as for its data
    return (df.withColumn("next_offset", tail + F.sum(framed).over(window))
              .withColumn("offset", F.col("next_offset") - framed))


def _per_segment(segment: Column, values: Mapping[int, int], default: int | None = None) -> Column:
    """A BIGINT column: ``values[segment]`` (``default`` for a segment not in ``values``)."""
    out = F.lit(default).cast("long")
    for sid, value in values.items():
        out = F.when(segment == F.lit(sid), F.lit(value).cast("long")).otherwise(out)
    return out


# ---- Spark's hash partitioning, to give each segment a shuffle partition of its own ------------
_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix(h1: int, k1: int) -> int:
    k1 = _rotl((k1 * 0xCC9E2D51) & _MASK, 15) * 0x1B873593 & _MASK
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` (Murmur3 x86 32-bit, seed 42) of a BIGINT, as a signed 32-bit int."""
    h1 = _mix(_mix(seed, value & _MASK), (value >> 32) & _MASK) ^ 8
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & _MASK
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(n: int) -> list[int]:
    """``n`` BIGINT values; Spark's hash partitioning into ``n`` partitions sends the i-th to
    partition i (``pmod(hash(v), n) == i``)."""
    keys: dict[int, int] = {}
    value = 0
    while len(keys) < n:
        keys.setdefault(spark_hash_long(value) % n, value)
        value += 1
    return [keys[i] for i in range(n)]
