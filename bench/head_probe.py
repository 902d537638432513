"""Probe H3 (issue #67, decision 4): what a micro-batch pays to find the stream's head, from the
catalog row (today, ``head="plan"``'s scalar subquery) against the TRUNCATE records the events
table already holds (found through ``record_type`` statistics).

    .venv/bin/python bench/head_probe.py [--events 1000000] [--appends 5] [--rounds 5] [--connect]

A 4-segment stream of APPENDS appends of EVENTS/APPENDS events (~200 B), truncated once at the
tail after the first append. Each round evaluates, alternating (``bench/_common.alternate``):
  - catalog: the head map as the streaming read plans it (``streaming.head_map`` over the
    streams table's partition of the stream), collected;
  - records: the events table's TRUNCATE rows per segment (``record_type = -1``: a scan that
    data skipping prunes to the records' own files), collected.
Ratio = records seconds / catalog seconds (a cost: < 1 means the records are cheaper). The floor
of any request (``spark.range(1).collect()``) is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import COST, alternate, connect_server, source
from pravega_spark.readers.streaming import head_map
from pravega_spark.store.schema import RECORD_TRUNCATE
from pravega_spark.store.store import Store, stream_key


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--appends", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", default="/tmp/bench-head")
    p.add_argument("--connect", action="store_true")
    a = p.parse_args(argv)
    root = str(Path(a.root).resolve()) + ("-connect" if a.connect else "-classic")
    shutil.rmtree(root, ignore_errors=True)
    if a.connect:
        with connect_server():
            return run(a, ps.spark_session(), root)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    return run(a, spark, root)


def run(a, spark, root: str) -> int:
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    manager.create_stream("bench", "s", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = manager.create_event_writer("bench", "s", writer_id="w")
    per = a.events // a.appends
    first = None
    for i in range(a.appends):
        cut = writer.write_events(source(spark, per, 200, start=i * per)).tail_stream_cut
        first = first or cut
    manager.truncate_stream("bench", "s", first)
    print(f"== {'Spark Connect' if a.connect else 'classic'}: {a.events:,} events in {a.appends} appends, "
          f"truncated at {first!r}", flush=True)
    store = Store(spark, root)
    key = stream_key("bench", "s")
    events_path = store.events_path("bench", "s")

    def catalog(r):
        return spark.range(1).select(head_map(store.streams(), key).alias("head")).collect()[0][0]

    def records(r):
        rows = (spark.read.format("delta").load(events_path).where(F.col("record_type") == RECORD_TRUNCATE)
                .groupBy("segment_id").agg(F.max(F.col("base_offset") + F.col("rel_offset")).alias("head")).collect())
        return {row[0]: row[1] for row in rows}

    print(f"  catalog head {catalog(0)}, records head {records(0)}", flush=True)
    floor = []
    for _ in range(a.rounds):
        begin = time.perf_counter()
        spark.range(1).collect()
        floor.append(time.perf_counter() - begin)
    print(f"  a request's floor (spark.range(1).collect()): median {sorted(floor)[len(floor) // 2] * 1000:.0f} ms",
          flush=True)
    alternate(("catalog row", catalog), ("TRUNCATE records", records), rounds=a.rounds,
              label="the head per batch", orientation=COST)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
