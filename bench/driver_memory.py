"""Driver heap per stream touched, with Delta's log-cache defaults and with the library's session
defaults, and the Delta logs each public operation loads (issue #49).

    .venv/bin/python bench/driver_memory.py [--streams 40] [--events 1000]

Each configuration runs in a process of its own (Delta reads its cache's size and retention once
per JVM, when the first table is loaded), on a classic local session that ``ps.spark_session``
builds:

- ``delta defaults``: Delta's own cache, 10,000 logs each kept 60 minutes after its last use,
  and Spark's 1,000 queries kept for its SQL tab (what a session built without the library's
  defaults has);
- ``library defaults``: the session as ``ps.spark_session()`` builds it.

In each: one warm-up stream (created, written, read, sealed and deleted), then the live heap (after
full collections, ``bench/heap.py``); then ``--streams`` streams are created, written
(``--events`` events each) and read back; the live heap again; as many streams again and the live
heap; then every stream is sealed and deleted; the live heap a last time. It prints the heap per stream touched (over the first
``--streams``, while the bounded caches fill, and over as many again, when they are full), the logs Delta's
cache holds at each point, and, for the library defaults, the logs each operation on a stream of
its own loads into an emptied cache and what reloading them costs (target: <= 0.5 MiB per stream with the library's defaults;
no log of a deleted stream stays cached).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DELTA_DEFAULTS = {"spark.databricks.delta.delta.log.cacheSize": "10000",
                  "spark.databricks.delta.delta.log.cacheRetentionMinutes": "60",
                  "spark.sql.ui.retainedExecutions": "1000", "spark.ui.retainedJobs": "1000",
                  "spark.ui.retainedStages": "1000"}  # Spark's and Delta's own defaults
CONFIGS = {"delta defaults": DELTA_DEFAULTS, "library defaults": {}}


def child(config: str, streams: int, events: int) -> dict:
    import pravega_spark as ps
    from bench.heap import driver_pid, live_heap_mib
    from pravega_spark._delta import jvm

    spark = ps.spark_session(**CONFIGS[config])
    pid = driver_pid(spark)
    root = tempfile.mkdtemp(prefix="driver-memory-")
    manager = ps.StreamManager(spark, root)
    manager.create_scope("mem")
    rows = spark.range(events).selectExpr("concat('key-', id % 100) AS routing_key",
                                          "cast(format_string('event-%06d', id) AS binary) AS event")

    def touch(name: str) -> None:
        manager.create_stream("mem", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
        manager.create_event_writer("mem", name).write_events(rows)
        assert manager.read_events("mem", name).count() == events

    def drop(name: str) -> None:
        manager.seal_stream("mem", name)
        manager.delete_stream("mem", name)

    def live() -> float:
        gc.collect()  # Python's handles on JVM objects first (py4j then lets the JVM drop them)
        return live_heap_mib(pid)

    touch("warm-up")
    drop("warm-up")
    out = {"config": config, "streams": streams}
    out["heap_before"], out["logs_before"] = live(), jvm.cached_delta_logs(spark)
    for i in range(streams):
        touch(f"s{i}")
    out["heap_touched"], out["logs_touched"] = live(), jvm.cached_delta_logs(spark)
    for i in range(streams, 2 * streams):  # as many again: the bounded caches are full by now
        touch(f"s{i}")
    out["heap_touched_twice"] = live()
    for i in range(2 * streams):
        drop(f"s{i}")
    out["heap_deleted"], out["logs_deleted"] = live(), jvm.cached_delta_logs(spark)
    out["stream_logs_left"] = [p for p in jvm.cached_delta_log_paths(spark) if "/mem/s" in p]
    if config == "library defaults":
        out["loads"] = operation_loads(spark, manager, rows)
        out["reloads"] = reload_costs(spark, manager, rows)
    spark.stop()
    return out


def operation_loads(spark, manager, rows) -> dict[str, list[str]]:
    """The tables (relative to the store's root) whose logs each operation loads into an empty
    cache, on a stream of its own with some events."""
    import pravega_spark as ps
    from pravega_spark._delta import jvm

    manager.create_stream("mem", "ops", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    writer = manager.create_event_writer("mem", "ops")
    writer.write_events(rows)
    cut = manager.tail_stream_cut("mem", "ops")
    # a stream whose retention pass has nothing to do: a record made a minute ago, a day's policy
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    manager.create_stream("mem", "kept", ps.StreamConfiguration(
        scaling_policy=ps.ScalingPolicy.fixed(2), retention_policy=ps.RetentionPolicy.by_time(timedelta(days=1))))
    manager.create_event_writer("mem", "kept").write_events(rows)
    manager.run_retention("mem", "kept", now=now)
    operations = {
        "write_events": lambda: writer.write_events(rows),
        "read_events (whole)": lambda: manager.read_events("mem", "ops").count(),
        "read_events (from a cut)": lambda: manager.read_events("mem", "ops", start=cut).count(),
        "tail_stream_cut": lambda: manager.tail_stream_cut("mem", "ops"),
        "stream_info": lambda: manager.stream_info("mem", "ops"),
        "scale_stream": lambda: manager.scale_stream("mem", "ops", [0], [(0.0, 0.25), (0.25, 0.5)]),
        "truncate_stream": lambda: manager.truncate_stream("mem", "ops", cut),
        "run_retention (a store's pass, nothing due)": lambda: manager.run_retention(now=now + timedelta(minutes=1)),
    }
    root = manager.root.rstrip("/")
    loads = {}
    for name, op in operations.items():
        jvm.clear_delta_logs(spark)
        op()
        loads[name] = sorted(p.split(root, 1)[-1].lstrip("/").removesuffix("/_delta_log")
                             for p in jvm.cached_delta_log_paths(spark))
    return loads


def reload_costs(spark, manager, rows, rounds: int = 5) -> dict[str, tuple[float, float]]:
    """What a small cache costs: each operation's median seconds over ``rounds`` with the stream's
    logs cached and with the cache emptied just before (a stream of 12 commits, past Delta's
    checkpoint), alternated after a warm-up."""
    import statistics
    import time

    import pravega_spark as ps
    from pravega_spark._delta import jvm

    manager.create_stream("mem", "reload", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = manager.create_event_writer("mem", "reload")
    for _ in range(12):
        writer.write_events(rows)
    operations = {
        "write_events": lambda: writer.write_events(rows),
        "read_events (whole)": lambda: manager.read_events("mem", "reload").count(),
        "tail_stream_cut": lambda: manager.tail_stream_cut("mem", "reload"),
        "stream_info": lambda: manager.stream_info("mem", "reload"),
    }
    costs = {}
    for name, op in operations.items():
        op()
        warm, cold = [], []
        for _ in range(rounds + 1):
            started = time.perf_counter()
            op()
            warm.append(time.perf_counter() - started)
            jvm.clear_delta_logs(spark)
            started = time.perf_counter()
            op()
            cold.append(time.perf_counter() - started)
        costs[name] = (statistics.median(warm[1:]), statistics.median(cold[1:]))
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--child", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.streams, args.events)), flush=True)
        return 0
    results = []
    for config in CONFIGS:
        done = subprocess.run([sys.executable, __file__, "--child", config, "--streams", str(args.streams),
                               "--events", str(args.events)], capture_output=True, text=True, env=os.environ)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            return 1
        results.append(json.loads(lines[-1][len("RESULT "):]))
    print(f"driver heap per stream touched ({args.streams} streams, {args.events} events each; live heap after "
          "full collections)")
    for r in results:
        touched = (r["heap_touched"] - r["heap_before"]) / r["streams"]
        more = (r["heap_touched_twice"] - r["heap_touched"]) / r["streams"]
        deleted = (r["heap_deleted"] - r["heap_before"]) / (2 * r["streams"])
        print(f"  {r['config']:<17} create+write+read {touched:6.2f} MiB/stream ({r['logs_before']} -> "
              f"{r['logs_touched']} logs cached), the next {r['streams']} streams {more:6.2f} MiB/stream; "
              f"after delete_stream {deleted:6.2f} MiB/stream "
              f"({r['logs_deleted']} logs cached, {len(r['stream_logs_left'])} of the deleted streams')")
    loads = results[-1].get("loads", {})
    if loads:
        print("Delta logs each operation loads into an empty cache (library defaults):")
        for name, tables in loads.items():
            print(f"  {name:<26} {len(tables)}: {', '.join(tables)}")
    reloads = results[-1].get("reloads", {})
    if reloads:
        print("what a log pushed out of the cache costs (median seconds, cached -> reloaded):")
        for name, (warm, cold) in reloads.items():
            print(f"  {name:<26} {warm * 1000:7.0f} ms -> {cold * 1000:7.0f} ms")
    target = (results[-1]["heap_touched"] - results[-1]["heap_before"]) / results[-1]["streams"]
    left = sum(len(r["stream_logs_left"]) for r in results)
    ok = target <= 0.5 and left == 0
    print(f"verdict: {'OK' if ok else 'MISSED'} (library defaults {target:.2f} MiB/stream, target <= 0.5; "
          f"{left} logs of deleted streams cached, target 0)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
