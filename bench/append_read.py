"""Append/read throughput vs raw Delta, and metadata cost vs history length.

    .venv/bin/python bench/append_read.py [--events 1000000] [--sizes 200,1024] [--rounds 5] [--root /tmp/bench]
    scripts/local_s3.sh start > /tmp/s3.env
    .venv/bin/python bench/append_read.py --root s3a://pravega/bench --settings /tmp/s3.env --skip-history
    .venv/bin/python bench/append_read.py --connect [--events 1000000]

Every comparison alternates the baseline and ours for ``--rounds`` rounds (default 5) after a
warm-up round (``bench/_common.alternate``), prints each round's ratio and reports the MEDIAN of
the per-round ratios with min and max; targets apply to the median. Ratios 1 and 2 are speeds
(raw seconds / ours: > 1 means ours is faster), 3 is a cost (500-epoch seconds / 5-epoch: < 1
means the long history is cheaper). For the same rows in the same process:
  1. write_events of N events (~SIZE bytes, 4 segments) vs a raw Delta append of the same rows
     routed and partitioned the same way (target: >= 0.8x), then the same with events of 1 KiB
     (``--sizes``);
     On an object store (``--root s3a://...``, the session's settings from ``--settings``: the
     ``KEY=value`` lines of ``scripts/local_s3.sh start``) the same, plus the fallback path
     (Delta's writer after the offsets' UDF) against the same raw append (target >= 0.8x);
  2. read_events between two cuts vs a plain Delta read of the same rows (the README's SQL:
     absolute offsets from ``base_offset``, the same range filter; target >= 0.9x), the same
     read by a new StreamManager each round (an empty metadata cache: the boundary probe;
     reported), and of the whole stream vs a plain read of the whole table (target >= 0.8x);
  3. successors() and tail_stream_cut() on a 500-epoch stream vs a 5-epoch stream (each round's
     time: the median of 5 calls; target <= 2x).

With ``--connect``: 1 and 2 on a Spark Connect session (``SPARK_REMOTE``, else a local server
that ``scripts/connect_server.sh`` starts, with 4 GiB, and stops), against raw Connect appends and
reads of the same rows (append target >= 0.5x), after the same run on a classic session (a
subprocess) for comparison.
     Both histories are built with the same bulk builder (one commit per table rather than four
     per scale, to keep the run short); Delta checkpoints every 10 commits, so a history built by
     500 real scales replays at most 10 more log files.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import COST, Seconds, alternate, connect_server, settings_conf, source, timed
from pravega_spark.store.clock import utc_now
from pravega_spark.store.schema import EVENTS_SCHEMA
from pravega_spark.store.segment_ranges import filter_segment_ranges, segment_ranges
from pravega_spark.store.segment_store import events_view
from pravega_spark.stream.scaling import apply_transition, plan_scale
from pravega_spark.stream.segments import epoch_members
from pravega_spark.writers.routing import with_key_position, with_segment_id


def bench_append_read(spark, root: str, events: int, size: int, rounds: int = 5, fallback: bool = False,
                      target: float = 0.8):
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    manager.create_stream("bench", "append", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    segments = epoch_members(manager.controller.store.segment_records("bench", "append"), 0)
    raw_path = f"{root}/raw_append"
    # warm-up both paths on a small write; a measured write is never this writer's first one
    # (a running writer knows its segments and tails; the commit's fence still checks them)
    w = manager.create_event_writer("bench", "append", writer_id="bench")
    w.write_events(source(spark, 1000, size))
    manager.create_stream("bench", "warm", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    manager.create_event_writer("bench", "warm").write_events(source(spark, 10000, size))
    (source(spark, 10000, size).transform(with_key_position).transform(with_segment_id, segments=segments)
     .drop("key_position").write.format("delta").partitionBy("segment_id").mode("append").save(f"{root}/raw_warm"))

    raw_src = (source(spark, events, size).transform(with_key_position)
               .transform(with_segment_id, segments=segments).drop("key_position"))
    last = {}

    def ours(r):
        last["result"] = w.write_events(source(spark, events, size))

    sides = [("write_events", ours)]
    if fallback:  # a second writer on Delta's writer (the path of stores pyarrow cannot open)
        slow = manager.create_event_writer("bench", "append", writer_id="fallback")
        slow.appender.task_files = False
        slow.write_events(source(spark, 1000, size))
        sides.append(("fallback (Delta's writer)", lambda r: slow.write_events(source(spark, events, size))))
    print(f"append  {events:,} events x ~{size} B over 4 segments (alternating, {rounds} rounds after a warm-up)",
          flush=True)
    alternate(("raw Delta append", lambda r: raw_src.write.format("delta").partitionBy("segment_id")
               .mode("append").save(raw_path)), sides, rounds=rounds, label="append", targets=target)
    result = last["result"]
    print(f"  (write_events' last write: {result.event_count:,} events, {result.byte_count:,} framed bytes, "
          f"version {result.version})")
    return manager, w.write_event(b"-", routing_key="end")


def bench_read(spark, manager, result, rounds: int = 5) -> None:

    # two cuts inside the data: a quarter and three quarters of each segment
    tail = result.tail_stream_cut
    events_df = manager.controller.store.events("bench", "append")
    bounds = {}
    for frac in (0.25, 0.75):
        pos = {}
        for sid, length in tail.positions.items():
            target = int(length * frac)
            pos[sid] = int(events_df.where((F.col("segment_id") == sid) & (F.col("offset") >= target))
                           .agg(F.min("offset")).first()[0])
        bounds[frac] = ps.StreamCut("bench/append", pos)
    start, end = bounds[0.25], bounds[0.75]
    records = manager.controller.store.segment_records("bench", "append")
    ranges = segment_ranges(start, end, records)
    version = manager.controller.store.events_version("bench", "append")

    def raw_read():
        df = (events_view(spark.read.format("delta").option("versionAsOf", version)
                          .load(manager.controller.store.events_path("bench", "append")))
              .transform(filter_segment_ranges, ranges=ranges))
        df.write.format("noop").mode("overwrite").save()

    def our_read():
        manager.read_events("bench", "append", start, end).write.format("noop").mode("overwrite").save()

    n = manager.read_events("bench", "append", start, end).count()
    print(f"read    {n:,} events between two cuts (alternating, {rounds} rounds after a warm-up)", flush=True)

    def cold_read(r):  # an empty metadata cache: the first read of these cuts in a new StreamManager
        fresh = ps.StreamManager(spark, manager.root)
        return Seconds(timed(lambda: fresh.read_events("bench", "append", start, end)
                             .write.format("noop").mode("overwrite").save()))

    alternate(("raw filtered Delta read", lambda r: raw_read()),
              [("read_events", lambda r: our_read()), ("read_events, new StreamManager", cold_read)],
              rounds=rounds, label="read between cuts", targets={"read_events": 0.9})

    def raw_whole():
        events_view(spark.read.format("delta").load(manager.controller.store.events_path("bench", "append"))
                    ).write.format("noop").mode("overwrite").save()

    def our_whole():
        manager.read_events("bench", "append").write.format("noop").mode("overwrite").save()

    total = manager.read_events("bench", "append").count()
    print(f"read    the whole stream, {total:,} events (alternating, {rounds} rounds after a warm-up)", flush=True)
    alternate(("raw Delta read", lambda r: raw_whole()), ("read_events", lambda r: our_whole()),
              rounds=rounds, label="read whole stream", targets=0.8)


def build_history(manager: ps.StreamManager, stream: str, epochs: int) -> None:
    """A 4-segment stream taken through ``epochs`` scales (split, then merge back), in bulk."""
    store = manager.controller.store
    manager.create_stream("bench", stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    records = store.segment_records("bench", stream)
    t0 = records[0].creation_time
    sealed_sizes = {}
    for e in range(epochs):
        current = epoch_members(records, e)
        if e % 2 == 0:
            s = current[e % len(current)]
            mid = (s.key_start + s.key_end) / 2
            plan = plan_scale(records, [s.segment_id], [(s.key_start, mid), (mid, s.key_end)], 4,
                              t0 + timedelta(seconds=e + 1))
        else:
            # merge the two newest segments back
            newest = sorted(current, key=lambda r: r.segment_id)[-2:]
            newest.sort(key=lambda r: r.key_start)
            plan = plan_scale(records, [r.segment_id for r in newest], [(newest[0].key_start, newest[1].key_end)], 4,
                              t0 + timedelta(seconds=e + 1))
        sizes = {sid: 0 for sid in plan.sealed_segments}
        sealed_sizes.update(sizes)
        records = apply_transition(records, plan, sizes)
    markers = manager.spark.createDataFrame(
        [(sid, 0, 0, 0, 0, 1, None, None, None, t0, None) for sid in sealed_sizes], EVENTS_SCHEMA)
    markers.write.format("delta").mode("append").save(store.events_path("bench", stream))
    latest = store.stream_record("bench", stream)
    store.compare_and_set_stream(latest, latest.transition("ACTIVE", utc_now(), current_epoch=epochs), records)
    manager.create_event_writer("bench", stream).write_events(source(manager.spark, 2000, 100))


def bench_history(spark, root: str, rounds: int = 5) -> None:
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    probes = {}
    for epochs in (5, 500):
        name = f"history{epochs}"
        build_history(manager, name, epochs)
        sealed = [r.segment_id for r in manager.controller.store.segment_records("bench", name) if r.sealed_epoch is not None]
        probes[epochs] = (name, sealed[len(sealed) // 2], len(sealed))
        print(f"history {epochs:3d} epochs: {len(sealed):4d} sealed segments", flush=True)

    def median_of_5(fn):
        return lambda r: Seconds(statistics.median(timed(fn) for _ in range(5)))

    for op, call in (("successors", lambda n, s: manager.successors("bench", n, s)),
                     ("tail_stream_cut", lambda n, s: manager.tail_stream_cut("bench", n))):
        print(f"history length: {op}, 500 epochs vs 5 (each round's time: the median of 5 calls)", flush=True)
        alternate((f"{op} 5 epochs", median_of_5(lambda c=call: c(*probes[5][:2]))),
                  (f"{op} 500 epochs", median_of_5(lambda c=call: c(*probes[500][:2]))),
                  rounds=rounds, label="history", orientation=COST, targets=2.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--sizes", default="200,1024", help="event sizes of the append runs (the first is also read)")
    p.add_argument("--root", default="/tmp/pravega-bench")
    p.add_argument("--rounds", type=int, default=5,
                   help="alternating baseline/ours rounds after a warm-up round (the median ratio is the measure)")
    p.add_argument("--skip-append", action="store_true")
    p.add_argument("--skip-history", action="store_true")
    p.add_argument("--settings", help="KEY=value lines (scripts/local_s3.sh start): the spark.* ones configure the session")
    p.add_argument("--connect", action="store_true", help="on a Spark Connect session, after a classic run")
    p.add_argument("--skip-classic", action="store_true", help="with --connect: the Connect run only")
    a = p.parse_args(argv)
    if a.connect:
        return run_connect(a)
    conf = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4", **settings_conf(a.settings)}
    local = "://" not in a.root or a.root.startswith("file:")
    if local:
        shutil.rmtree(a.root, ignore_errors=True)
    else:  # an object store: a fresh folder per run
        a.root = f"{a.root.rstrip('/')}/{uuid.uuid4().hex[:8]}"
    spark = ps.spark_session(**conf)
    if not a.skip_append:
        for i, size in enumerate(int(x) for x in a.sizes.split(",")):
            manager, result = bench_append_read(spark, f"{a.root}/a{i}", a.events, size, a.rounds, fallback=not local)
            if i == 0:
                bench_read(spark, manager, result, a.rounds)
    if not a.skip_history:
        bench_history(spark, a.root + "/h", a.rounds)
    return 0


def run_connect(a) -> int:
    """``--connect``: the append and read runs on a classic session (a subprocess, printed first),
    then on a Spark Connect session, each against its own session type's raw Delta operations."""
    args = ["--events", str(a.events), "--sizes", a.sizes.split(",")[0], "--rounds", str(a.rounds), "--skip-history"]
    if not a.skip_classic:
        print("== classic session", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
        subprocess.run([sys.executable, __file__, *args, "--root", a.root + "-classic"], check=True, env=env)
    with connect_server() as remote:
        print(f"== Spark Connect session ({remote})", flush=True)
        shutil.rmtree(a.root + "-connect", ignore_errors=True)
        spark = ps.spark_session()
        manager, result = bench_append_read(spark, os.path.abspath(a.root + "-connect"), a.events,
                                            int(a.sizes.split(",")[0]), a.rounds, target=0.5)
        bench_read(spark, manager, result, a.rounds)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
