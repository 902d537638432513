"""Compaction: a stream written by many small appends, read before and after ``compact``.

    .venv/bin/python bench/compaction.py [--appends 1000] [--per-append 1000] [--size 200] [--rounds 5]

Stream ``many``: APPENDS appends of PER-APPEND events (~SIZE bytes, 4 segments): at least one file
per segment per append. Stream ``one``: the same events in one append. A whole-stream read
(``read_events`` aggregated over event, routing key, segment and offset) of ``many`` before and
after ``compact`` alternates with the same read of ``one`` for ROUNDS rounds after a warm-up round
(``bench/_common.alternate``); each round's ratio is ``many``'s seconds / ``one``'s (a cost: < 1
means ``many`` reads faster) and the measure is the median of the ratios, with min and max
(issue #17's target: after compaction, median <= 1.5x). Also printed: how long ``compact`` took.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import COST, alternate, source


def read(manager, stream):
    return (manager.read_events("bench", stream)
            .agg(F.sum(F.length("event")), F.count("routing_key"), F.sum("segment_id"), F.sum("offset")).collect()[0])


def files(manager, stream) -> int:
    return manager.spark.read.format("delta").load(manager.controller.store.events_path("bench", stream)) \
        .select(F.input_file_name()).distinct().count()


def versus_one(m, label: str, rounds: int, target: float | None = None):
    """``many``'s read alternating with ``one``'s."""
    return alternate(("one append", lambda r: read(m, "one")), (label, lambda r: read(m, "many")),
                     rounds=rounds, label="whole-stream read", orientation=COST, targets=target)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=1000)
    p.add_argument("--per-append", type=int, default=1000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", default="/tmp/bench-compaction")
    p.add_argument("--reuse", action="store_true", help="only re-read the streams of an earlier run")
    a = p.parse_args(argv)
    if not a.reuse:
        shutil.rmtree(a.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                "spark.driver.memory": "4g"})
    spark.sparkContext.setLogLevel("ERROR")
    m = ps.StreamManager(spark, a.root)
    if a.reuse:
        print("re-read of the streams of an earlier run")
        versus_one(m, "many appends (as left)", a.rounds)
        return 0
    m.create_scope("bench")
    for name in ("many", "one"):
        m.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    total = a.appends * a.per_append
    m.create_event_writer("bench", "one").write_events(source(spark, total, a.size))
    writer = m.create_event_writer("bench", "many")
    start = time.perf_counter()
    for i in range(a.appends):
        # local data (as a notebook or a micro-batch would pass): the small-write path for <= 1000
        batch = source(spark, a.per_append, a.size, start=i * a.per_append).toArrow()
        writer.write_events(spark.createDataFrame(batch))
        if (i + 1) % 100 == 0:
            print(f"  ... {i + 1} appends ({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"{total:,} events of ~{a.size} B, 4 segments; one append: {files(m, 'one')} files")
    print(f"before compact: {a.appends} appends, {files(m, 'many')} files", flush=True)
    versus_one(m, f"{a.appends} appends, before compact", a.rounds)
    t0 = time.perf_counter()
    result = m.compact("bench", "many")
    took = time.perf_counter() - t0
    print(f"compact: {took:.1f} s, {result!r}")
    print(f"after compact: {files(m, 'many')} files", flush=True)
    versus_one(m, f"{a.appends} appends, after compact", a.rounds, target=1.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
