"""Reader groups: two readers draining a stream through ``read_next`` vs one ``read_events`` of the
same range, and an empty ``read_next`` vs a ``tail_stream_cut``.

    .venv/bin/python bench/reader_groups.py [--events 1000000] [--size 200] [--rounds 3] [--calls 20]
                                            [--root /tmp/bench-groups]

Drain: a 4-segment stream of 1,000,000 events of ~200 B. Each round creates a group from the head
to the tail, two readers join, and they call ``read_next`` until the end of data, each batch
aggregated over ``event``, ``routing_key``, ``segment_id`` and ``offset`` (every column read). The
two readers run in two threads, as two reader processes run side by side; the sequential figure
(one reader's call after the other's) is printed too. Baseline: ``read_events`` of the same range,
aggregated the same way. Issue #18's target: >= 0.7x.

Empty read: a reader owning all four segments at their tails calls ``read_next`` (nothing new) vs
``tail_stream_cut`` of the same stream, medians over ``--calls`` calls. Target: <= 2x.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import source

SCOPE, STREAM, S = "bench", "groups", "bench/groups"


def aggregate(df) -> tuple:
    row = df.agg(F.count("routing_key"), F.sum(F.length("event")), F.sum("segment_id"), F.sum("offset")).collect()[0]
    return tuple(int(v or 0) for v in row)


def add(a: tuple, b: tuple) -> tuple:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def drain(reader) -> tuple:
    total = (0, 0, 0, 0)
    while True:
        batch = reader.read_next()
        if batch.ranges:
            total = add(total, aggregate(batch.events))
        if batch.end_of_data:
            return total


SETUP: list[float] = []  # seconds each drain spent creating its group and joining its readers


def group_drain(manager: ps.StreamManager, name: str, threaded: bool) -> tuple:
    start = time.perf_counter()
    manager.create_reader_group(SCOPE, name, ps.ReaderGroupConfig(
        {S: ("earliest", manager.tail_stream_cut(SCOPE, STREAM))}, automatic_checkpoint_interval=None))
    group = manager.reader_group(SCOPE, name)
    readers = [group.create_reader(f"r{i}") for i in range(2)]
    SETUP.append(time.perf_counter() - start)
    if not threaded:
        totals = [(0, 0, 0, 0)] * 2
        done = [False, False]
        while not all(done):
            for i, reader in enumerate(readers):
                if not done[i]:
                    batch = reader.read_next()
                    if batch.ranges:
                        totals[i] = add(totals[i], aggregate(batch.events))
                    done[i] = batch.end_of_data
        return add(*totals)
    results: list[tuple] = [(0, 0, 0, 0)] * 2

    def run(i: int) -> None:
        results[i] = drain(readers[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return add(*results)


def median_call(fn, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--root", default="/tmp/bench-groups")
    args = parser.parse_args(argv)
    shutil.rmtree(args.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, args.root)
    manager.create_scope(SCOPE)
    manager.create_stream(SCOPE, STREAM, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = manager.create_event_writer(SCOPE, STREAM, writer_id="bench")
    for part in range(4):  # four appends: several files per segment
        writer.write_events(source(spark, args.events // 4, args.size, start=part * (args.events // 4)))
    expected = aggregate(manager.read_events(SCOPE, STREAM))  # warm-up, and the answer
    assert group_drain(manager, "warm-up", threaded=True) == expected
    times: dict[str, list[float]] = {"read_events": [], "group, 2 threads": [], "group, sequential": []}
    for r in range(args.rounds):
        for name in times:
            start = time.perf_counter()
            if name == "read_events":
                got = aggregate(manager.read_events(SCOPE, STREAM))
            else:
                got = group_drain(manager, f"{name.split(',')[1].strip().replace(' ', '-')}-{r}", threaded="threads" in name)
            times[name].append(time.perf_counter() - start)
            assert got == expected, (name, got, expected)
    print(f"{args.events:,} events of ~{args.size} B, 4 segments, 2 readers; aggregate of every column")
    base = statistics.median(times["read_events"])
    for name, ts in times.items():
        rate = args.events / statistics.median(ts)
        print(f"  {name:20s} median {statistics.median(ts):.2f}s ({rate:,.0f} events/s; "
              f"runs {', '.join(f'{t:.2f}' for t in ts)}): {base / statistics.median(ts):.2f}x read_events")

    # an empty read_next: one reader owning all four segments, at their tails
    manager.create_reader_group(SCOPE, "tailing", ps.ReaderGroupConfig({S: "latest"}, automatic_checkpoint_interval=None))
    reader = manager.reader_group(SCOPE, "tailing").create_reader("tail")
    reader.read_next()
    assert len(reader.position()) == 4
    tail = median_call(lambda: manager.tail_stream_cut(SCOPE, STREAM), args.calls)
    empty = median_call(lambda: reader.read_next(), args.calls)
    tail = min(tail, median_call(lambda: manager.tail_stream_cut(SCOPE, STREAM), args.calls))
    print(f"  empty read_next median {empty * 1000:.0f} ms vs tail_stream_cut {tail * 1000:.0f} ms: "
          f"{empty / tail:.2f}x (target <= 2x)")
    setup = statistics.median(SETUP)
    drain_only = statistics.median(times["group, 2 threads"]) - setup
    print(f"  of which creating the group and joining 2 readers: median {setup:.2f}s; the read_next calls "
          f"and their batches alone: {drain_only:.2f}s, {base / drain_only:.2f}x read_events")
    print(f"drain vs read_events: {base / statistics.median(times['group, 2 threads']):.2f}x with 2 threads, "
          f"{base / statistics.median(times['group, sequential']):.2f}x sequential (target >= 0.7x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
