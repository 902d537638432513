"""What the bench scripts share: a fresh store, the synthetic source of events, and a stopwatch."""

from __future__ import annotations

import shutil
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


def fresh_store(root: str, scope: str):
    """A new store under ``root/store`` (``root`` emptied first) on a quiet local session, with
    ``scope`` created: the ``StreamManager``."""
    import pravega_spark as ps

    shutil.rmtree(root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, f"{root}/store")
    manager.create_scope(scope)
    return manager
