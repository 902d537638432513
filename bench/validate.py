"""validate_stream vs a plain read_events(...).count() of the same stream.

    .venv/bin/python bench/validate.py [--events 1000000] [--size 200] [--rounds 3] [--root /tmp/bench-validate]

Builds a stream of N events (~SIZE bytes, 10,000 keys) over 3 epochs (2 segments; a split of one;
a merge of two), then times, in the same process and alternating, ``read_events().count()`` and
``validate_stream`` (every Great Expectations suite of the stream's invariants). Target:
validate_stream <= 3x the count. The first validation of a process also imports Great
Expectations (a few seconds): it is reported apart, as "cold".
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


import pravega_spark as ps
from bench._common import source

TARGET = 3.0


def build(manager: ps.StreamManager, events: int, size: int) -> None:
    spark = manager.spark
    manager.create_scope("bench")
    manager.create_stream("bench", "validate", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    w = manager.create_event_writer("bench", "validate", writer_id="bench")
    first, second = int(events * 0.4), int(events * 0.3)
    w.write_events(source(spark, first, size))
    manager.scale_stream("bench", "validate", [0], [(0.0, 0.25), (0.25, 0.5)])  # epoch 1
    w.write_events(source(spark, second, size, start=first))
    current = sorted((r.key_start, r.segment_id) for r in manager.segments("bench", "validate", epoch=1).collect())
    manager.scale_stream("bench", "validate", [sid for _, sid in current[1:]], [(0.25, 1.0)])  # epoch 2
    w.write_events(source(spark, events - first - second, size, start=first + second))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", default="/tmp/bench-validate")
    args = parser.parse_args(argv)
    shutil.rmtree(args.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, args.root)
    started = time.perf_counter()
    build(manager, args.events, args.size)
    info = manager.stream_info("bench", "validate")
    print(f"stream: {args.events} events of ~{args.size} B, {info.current_epoch + 1} epochs, "
          f"built in {time.perf_counter() - started:.1f}s")

    t = time.perf_counter()
    cold = manager.validate_stream("bench", "validate")
    cold_t = time.perf_counter() - t
    assert cold.success, str(cold)
    count_times, validate_times = [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        n = manager.read_events("bench", "validate").count()
        count_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = manager.validate_stream("bench", "validate")
        validate_times.append(time.perf_counter() - t)
        assert n == args.events and result.success and result.counts["event"] == args.events
    count_t, validate_t = statistics.median(count_times), statistics.median(validate_times)
    print(f"read_events().count(): median {count_t:.2f}s (runs {', '.join(f'{x:.2f}' for x in count_times)})")
    print(f"validate_stream:       median {validate_t:.2f}s (runs {', '.join(f'{x:.2f}' for x in validate_times)}); "
          f"cold (first of the process, with the Great Expectations import) {cold_t:.2f}s")
    ratio = validate_t / count_t
    print(f"validate_stream / count: {ratio:.2f}x (target <= {TARGET:.0f}x): {'OK' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
