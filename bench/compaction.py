"""Compaction: a stream written by many small appends, read before and after ``compact``.

    .venv/bin/python bench/compaction.py [--appends 1000] [--per-append 1000] [--size 200] [--rounds 3]

Stream ``many``: APPENDS appends of PER-APPEND events (~SIZE bytes, 4 segments): at least one file
per segment per append. Stream ``one``: the same events in one append. Prints a whole-stream read
(``read_events`` aggregated over event, routing key, segment and offset; best of ROUNDS) of
``many`` before and after ``compact``, against ``one`` (issue #17's target: after compaction,
<= 1.5x the one-append stream's read time), and how long ``compact`` took.
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
from bench._common import source, timed


def read(manager, stream):
    return (manager.read_events("bench", stream)
            .agg(F.sum(F.length("event")), F.count("routing_key"), F.sum("segment_id"), F.sum("offset")).collect()[0])


def files(manager, stream) -> int:
    return manager.spark.read.format("delta").load(manager.controller.store.events_path("bench", stream)) \
        .select(F.input_file_name()).distinct().count()


def best(fn, rounds):
    fn()  # warm
    return min(timed(fn) for _ in range(rounds))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=1000)
    p.add_argument("--per-append", type=int, default=1000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
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
        one, many = best(lambda: read(m, "one"), a.rounds), best(lambda: read(m, "many"), a.rounds)
        print(f"re-read: one append {one:.2f} s, many appends (as left) {many:.2f} s -> {many / one:.2f}x")
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
    one = best(lambda: read(m, "one"), a.rounds)
    before, before_files = best(lambda: read(m, "many"), a.rounds), files(m, "many")
    t0 = time.perf_counter()
    result = m.compact("bench", "many")
    took = time.perf_counter() - t0
    after, after_files = best(lambda: read(m, "many"), a.rounds), files(m, "many")
    print(f"{total:,} events of ~{a.size} B, 4 segments; whole-stream read (best of {a.rounds})")
    print(f"  one append        : {one:6.2f} s  ({files(m, 'one')} files)")
    print(f"  {a.appends} appends, before compact: {before:6.2f} s  ({before_files} files) -> {before / one:.2f}x")
    print(f"  {a.appends} appends, after compact : {after:6.2f} s  ({after_files} files) -> {after / one:.2f}x "
          f"(target <= 1.5x)")
    print(f"  compact: {took:.1f} s, {result!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
