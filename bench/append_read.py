"""Append/read throughput vs raw Delta, and metadata cost vs history length.

    .venv/bin/python bench/append_read.py [--events 1000000] [--size 200] [--root /tmp/bench]
    scripts/local_s3.sh start > /tmp/s3.env
    .venv/bin/python bench/append_read.py --root s3a://pravega/bench --settings /tmp/s3.env --skip-history
    .venv/bin/python bench/append_read.py --connect [--events 1000000]

Prints, for the same rows in the same process:
  1. write_events of N events (~SIZE bytes, 4 segments) vs a raw Delta append of the same rows
     routed and partitioned the same way (target: >= 0.8x raw throughput), then the same with
     events of 1 KiB (``--sizes``);
     On an object store (``--root s3a://...``, the session's settings from ``--settings``: the
     ``KEY=value`` lines of ``scripts/local_s3.sh start``) the same, plus the fallback path
     (Delta's writer after the offsets' UDF) against the same raw append (target >= 0.8x);
  2. read_events between two cuts vs a plain Delta read of the same rows (the README's SQL:
     absolute offsets from ``base_offset``, the same range filter; target >= 0.9x), and of the
     whole stream vs a plain read of the whole table (target >= 0.8x);
  3. successors() and tail_stream_cut() on a 500-epoch stream vs a 5-epoch stream (target <= 2x).

With ``--connect``: 1 and 2 on a Spark Connect session (``SPARK_REMOTE``, else a local server
that ``scripts/connect_server.sh`` starts, with 4 GiB, and stops), against raw Connect appends and
reads of the same rows (append target >= 0.6x), after the same run on a classic session (a
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
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import source
from pravega_spark._store import events_view, utc_now
from pravega_spark.reader import filter_segment_ranges, segment_ranges
from pravega_spark.routing import with_key_position, with_segment_id
from pravega_spark.scaling import apply_transition, plan_scale
from pravega_spark.schema import EVENTS_SCHEMA
from pravega_spark.segments import epoch_members


def timed(fn, repeat=1):
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def bench_append_read(spark, root: str, events: int, size: int, rounds: int = 3, fallback: bool = False):
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    manager.create_stream("bench", "append", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    segments = epoch_members(manager.controller.store.segment_records("bench", "append"), 0)
    raw_path = f"{root}/raw_append"
    # warm-up both paths on a small write; the measured write is this writer's second one
    # (a running writer knows its segments and tails; the commit's fence still checks them)
    w = manager.create_event_writer("bench", "append", writer_id="bench")
    w.write_events(source(spark, 1000, size))
    manager.create_stream("bench", "warm", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    manager.create_event_writer("bench", "warm").write_events(source(spark, 10000, size))
    (source(spark, 10000, size).transform(with_key_position).transform(with_segment_id, segments=segments)
     .drop("key_position").write.format("delta").partitionBy("segment_id").mode("append").save(f"{root}/raw_warm"))

    raw_src = (source(spark, events, size).transform(with_key_position)
               .transform(with_segment_id, segments=segments).drop("key_position"))
    # alternate raw and ours; keep each one's best (the first large job of each warms the JIT, and
    # a 2-core machine's timings vary by tens of percent from run to run)
    raw_times, our_times, fallback_times = [], [], []
    slow = None
    if fallback:  # a second writer on Delta's writer (the path of stores pyarrow cannot open)
        slow = manager.create_event_writer("bench", "append", writer_id="fallback")
        slow.appender.task_files = False
        slow.write_events(source(spark, 1000, size))
    for _ in range(rounds):
        raw_times.append(timed(lambda: raw_src.write.format("delta").partitionBy("segment_id")
                               .mode("append").save(raw_path))[0])
        t, result = timed(lambda: w.write_events(source(spark, events, size)))
        our_times.append(t)
        if slow is not None:
            fallback_times.append(timed(lambda: slow.write_events(source(spark, events, size)))[0])
    raw_t, ours_t = min(raw_times), min(our_times)
    print(f"append  {events:,} events x ~{size} B over 4 segments (best of {rounds} each)")
    print(f"  raw Delta append : {raw_t:7.2f} s  {events / raw_t:12,.0f} events/s")
    print(f"  write_events     : {ours_t:7.2f} s  {events / ours_t:12,.0f} events/s  "
          f"({result.byte_count:,} framed bytes, version {result.version})")
    print(f"  runs: raw {', '.join(f'{t:.2f}' for t in raw_times)}; ours {', '.join(f'{t:.2f}' for t in our_times)}")
    print(f"  ratio ours/raw throughput: {raw_t / ours_t:.2f}x best/best, "
          f"{statistics.median(raw_times) / statistics.median(our_times):.2f}x median/median (target >= 0.8x)")
    if fallback_times:
        print(f"  fallback (Delta's writer) runs: {', '.join(f'{t:.2f}' for t in fallback_times)}; ratio "
              f"{raw_t / min(fallback_times):.2f}x best/best, "
              f"{statistics.median(raw_times) / statistics.median(fallback_times):.2f}x median/median")
    return manager, w.write_event(b"-", routing_key="end")


def bench_read(spark, manager, result) -> None:

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

    raw_read()  # warm the raw path; ours is warmed by the cold-metadata read just below
    fresh = ps.StreamManager(spark, manager.root)  # an empty metadata cache: the first read of these cuts
    cold_r, _ = timed(lambda: fresh.read_events("bench", "append", start, end)
                      .write.format("noop").mode("overwrite").save())
    our_read()
    raw_r, _ = timed(raw_read, 3)
    ours_r, _ = timed(our_read, 3)
    n = manager.read_events("bench", "append", start, end).count()
    print(f"read    {n:,} events between two cuts (best of 3)")
    print(f"  raw filtered Delta read: {raw_r:7.2f} s  {n / raw_r:12,.0f} events/s")
    print(f"  read_events            : {ours_r:7.2f} s  {n / ours_r:12,.0f} events/s")
    print(f"  ratio ours/raw throughput: {raw_r / ours_r:.2f}x (target >= 0.9x)")
    print(f"  first read_events of these cuts (empty metadata cache, boundary probe): {cold_r:7.2f} s "
          f"({raw_r / cold_r:.2f}x)")

    def raw_whole():
        events_view(spark.read.format("delta").load(manager.controller.store.events_path("bench", "append"))
                    ).write.format("noop").mode("overwrite").save()

    def our_whole():
        manager.read_events("bench", "append").write.format("noop").mode("overwrite").save()

    raw_whole()
    our_whole()
    raw_times, our_times = [], []
    for _ in range(3):  # alternating
        raw_times.append(timed(raw_whole)[0])
        our_times.append(timed(our_whole)[0])
    total = manager.read_events("bench", "append").count()
    print(f"read    the whole stream, {total:,} events (alternating, 3 each)")
    print(f"  runs: raw {', '.join(f'{t:.2f}' for t in raw_times)}; ours {', '.join(f'{t:.2f}' for t in our_times)}")
    print(f"  ratio ours/raw throughput: {min(raw_times) / min(our_times):.2f}x best/best, "
          f"{statistics.median(raw_times) / statistics.median(our_times):.2f}x median/median (target >= 0.8x)")


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
    store.merge_segments("bench", stream, records)
    markers = manager.spark.createDataFrame(
        [(sid, 0, 0, 0, 0, 1, None, None, None, t0, None) for sid in sealed_sizes], EVENTS_SCHEMA)
    markers.write.format("delta").mode("append").save(store.events_path("bench", stream))
    latest = store.stream_record("bench", stream)
    store.compare_and_set_stream(latest, latest.transition("ACTIVE", utc_now(), current_epoch=epochs))
    manager.create_event_writer("bench", stream).write_events(source(manager.spark, 2000, 100))


def bench_history(spark, root: str) -> None:
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    results = {}
    for epochs in (5, 500):
        name = f"history{epochs}"
        build_history(manager, name, epochs)
        sealed = [r.segment_id for r in manager.controller.store.segment_records("bench", name) if r.sealed_epoch is not None]
        probe = sealed[len(sealed) // 2]
        manager.successors("bench", name, probe), manager.tail_stream_cut("bench", name)  # warm
        succ = statistics.median(
            timed(lambda n=name, s=probe: manager.successors("bench", n, s))[0] for _ in range(5))
        tail = statistics.median(timed(lambda n=name: manager.tail_stream_cut("bench", n))[0] for _ in range(5))
        results[epochs] = (succ, tail, len(sealed))
    print("history length (median of 5)")
    for epochs, (succ, tail, n) in results.items():
        print(f"  {epochs:3d} epochs ({n:4d} sealed segments): successors {succ * 1000:7.1f} ms, "
              f"tail_stream_cut {tail * 1000:7.1f} ms")
    print(f"  ratio 500/5: successors {results[500][0] / results[5][0]:.2f}x, "
          f"tail_stream_cut {results[500][1] / results[5][1]:.2f}x (target <= 2x)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--sizes", default="200,1024", help="event sizes of the append runs (the first is also read)")
    p.add_argument("--root", default="/tmp/pravega-bench")
    p.add_argument("--rounds", type=int, default=3, help="alternating raw/ours rounds (best of each)")
    p.add_argument("--skip-append", action="store_true")
    p.add_argument("--skip-history", action="store_true")
    p.add_argument("--settings", help="KEY=value lines (scripts/local_s3.sh start): the spark.* ones configure the session")
    p.add_argument("--connect", action="store_true", help="on a Spark Connect session, after a classic run")
    a = p.parse_args(argv)
    if a.connect:
        return run_connect(a)
    conf = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4"}
    if a.settings:
        for line in Path(a.settings).read_text().splitlines():
            key, _, value = line.partition("=")
            if key.startswith("spark."):
                conf[key] = value
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
                bench_read(spark, manager, result)
    if not a.skip_history:
        bench_history(spark, a.root + "/h")
    return 0


def run_connect(a) -> int:
    """``--connect``: the append and read runs on a classic session (a subprocess, printed first),
    then on a Spark Connect session, each against its own session type's raw Delta operations."""
    repo = Path(__file__).resolve().parent.parent
    args = ["--events", str(a.events), "--sizes", a.sizes.split(",")[0], "--rounds", str(a.rounds), "--skip-history"]
    print("== classic session", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    subprocess.run([sys.executable, __file__, *args, "--root", a.root + "-classic"], check=True, env=env)
    started = False
    if not os.environ.get("SPARK_REMOTE"):
        out = subprocess.run([str(repo / "scripts" / "connect_server.sh"), "start"], check=True, capture_output=True,
                             text=True, env={**os.environ, "CONNECT_SERVER_MEMORY": "4g"}).stdout
        os.environ["SPARK_REMOTE"] = out.strip().split("SPARK_REMOTE=")[-1]
        started = True
    print(f"== Spark Connect session ({os.environ['SPARK_REMOTE']})", flush=True)
    try:
        shutil.rmtree(a.root + "-connect", ignore_errors=True)
        spark = ps.spark_session()
        manager, result = bench_append_read(spark, os.path.abspath(a.root + "-connect"), a.events,
                                            int(a.sizes.split(",")[0]), a.rounds)
        bench_read(spark, manager, result)
        spark.stop()
    finally:
        if started:
            subprocess.run([str(repo / "scripts" / "connect_server.sh"), "stop"], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
