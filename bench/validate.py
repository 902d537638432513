"""validate_stream vs a plain read_events(...).count() of the same stream.

    .venv/bin/python bench/validate.py [--events 1000000] [--size 200] [--rounds 5] [--root /tmp/bench-validate]

Builds a stream of N events (~SIZE bytes, 10,000 keys) over 3 epochs (2 segments; a split of one;
a merge of two), then times, in the same process and alternating for ROUNDS rounds after a
warm-up round (``bench/_common.alternate``), ``read_events().count()`` and ``validate_stream``
(every Great Expectations suite of the stream's invariants). Each round's ratio is validate's
seconds / the count's (a cost: < 1 means validate is cheaper); target: the median ratio <= 3x.
The first validation of a process also imports Great Expectations (a few seconds): it is
reported apart, as "cold", before the rounds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


import pravega_spark as ps
from bench._common import COST, alternate, source

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
    parser.add_argument("--rounds", type=int, default=5)
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
    def count(r: int) -> None:
        assert manager.read_events("bench", "validate").count() == args.events

    def validate(r: int) -> None:
        result = manager.validate_stream("bench", "validate")
        assert result.success and result.counts["event"] == args.events

    print(f"cold validate_stream (first of the process, with the Great Expectations import): {cold_t:.2f}s")
    out = alternate(("read_events().count()", count), ("validate_stream", validate), rounds=args.rounds,
                    orientation=COST, targets=TARGET)
    return 0 if out["validate_stream"].met else 1

if __name__ == "__main__":
    sys.exit(main())
