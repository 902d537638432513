"""What the bench scripts share: the synthetic source of events, and a stopwatch."""

from __future__ import annotations

import time

from pyspark.sql import functions as F


def source(spark, events: int, size: int, start: int = 0):
    """``events`` rows ``(routing_key, event)``: 10,000 keys, binary payloads of ~``size`` bytes
    (ids ``start .. start + events``, so two sources can be told apart)."""
    return spark.range(start, start + events).select(
        F.concat(F.lit("device-"), (F.col("id") % 10000).cast("string")).alias("routing_key"),
        F.concat(F.col("id").cast("string"), F.lit(":"), F.expr(f"repeat('x', {size - 12})")).cast("binary").alias("event"))


def timed(fn) -> float:
    """Seconds ``fn()`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
