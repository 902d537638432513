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
            cond = pos < F.lit(seg.key_end)
            expr = F.when(cond, F.lit(seg.segment_id)) if expr is None else expr.when(cond, F.lit(seg.segment_id))
        last = F.lit(ordered[-1].segment_id)
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
    """
    framed = F.length(F.col(event)).cast("long") + F.lit(HEADER_SIZE)
    tail = F.lit(0).cast("long")
    for sid, value in tails.items():
        tail = F.when(F.col(segment) == F.lit(sid), F.lit(value).cast("long")).otherwise(tail)
    window = (Window.partitionBy(segment).orderBy(*order)
              .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (df.withColumn("__framed", framed)
              .withColumn("next_offset", tail + F.sum("__framed").over(window))
              .withColumn("offset", F.col("next_offset") - F.col("__framed"))
              .drop("__framed"))
