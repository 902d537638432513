"""A whole-stream read as a user runs it, vs a raw Delta read of the same rows and columns.

    .venv/bin/python bench/read_whole.py [--events 1010000] [--size 200] [--rounds 5] [--root /tmp/bench-read]

``read_events(scope, stream)`` ("earliest" to "latest") aggregated over ``event`` (summed
lengths), ``routing_key``, ``segment_id`` and ``offset``, against ``spark.read.format("delta")``
of the events table filtered to event rows, aggregated the same way. 1,010,000 events of ~200 B
over 4 segments, no large event (issue #17's read target: >= 0.8x, warm and cold).

Warm: alternating in one process. Cold: each variant's first query in a fresh process (JVM start
excluded: the session is created before the clock starts), alternating. Both follow
``bench/_common.alternate``: ``--rounds`` rounds (>= 5) after a warm-up round, each round's ratio
raw seconds / read_events' (a speed: > 1 means read_events is faster), the measure the median of
the ratios, with min and max (targets on the median).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import Seconds, alternate, source

SCOPE, STREAM = "bench", "read"


def aggregate(df, offset=None):
    offset = F.col("offset") if offset is None else offset
    return df.agg(F.sum(F.length("event")), F.count("routing_key"), F.sum("segment_id"), F.sum(offset)).collect()[0]


def variants(manager: ps.StreamManager) -> dict:
    path = f"{manager.root}/{SCOPE}/{STREAM}"
    return {  # raw: the README's plain reading, an event's offset being base_offset + rel_offset
        "raw": lambda: aggregate(manager.spark.read.format("delta").load(path).where(F.col("record_type") == 0),
                                 F.col("base_offset") + F.col("rel_offset")),
        "read_events": lambda: aggregate(manager.read_events(SCOPE, STREAM)),
    }


def session():
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cold(root: str, name: str) -> None:
    fn = variants(ps.StreamManager(session(), root))[name]
    start = time.perf_counter()
    fn()
    print(f"{time.perf_counter() - start:.3f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_010_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--root", default="/tmp/bench-read")
    parser.add_argument("--cold", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold:
        cold(args.root, args.cold)
        return 0
    shutil.rmtree(args.root, ignore_errors=True)
    manager = ps.StreamManager(session(), args.root)
    manager.create_scope(SCOPE)
    manager.create_stream(SCOPE, STREAM, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    source_df = source(manager.spark, args.events, args.size)
    manager.create_event_writer(SCOPE, STREAM, writer_id="bench").write_events(source_df)
    fns = variants(manager)
    first = {}

    def warm(name):
        def run(r: int):
            result = fns[name]()
            if r == 0:  # the warm-up round: both give the same answer
                first[name] = result
                assert len(first) < 2 or first["raw"] == first["read_events"], first
        return run

    def cold_run(name):
        def run(r: int) -> float:
            out = subprocess.run([sys.executable, __file__, "--root", args.root, "--cold", name],
                                 capture_output=True, text=True, check=True).stdout.split()
            return Seconds(float(out[-1]))
        return run

    print(f"{args.events} events of ~{args.size} B, 4 segments; aggregate of event, routing_key, segment_id, offset")
    print("warm (one process):", flush=True)
    alternate(("raw", warm("raw")), ("read_events", warm("read_events")), rounds=args.rounds, label="warm",
              targets=0.8)
    print("cold (each query the first of a new process):", flush=True)
    alternate(("raw", cold_run("raw")), ("read_events", cold_run("read_events")), rounds=args.rounds,
              label="cold", targets=0.8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
