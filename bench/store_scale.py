"""#68's P12: a store of 100, 500 and 2,000 streams; the time per stream of the store's work
(create a stream, write 10 events, and its share of one retention pass) at each size.

Three stores are built with the library's defaults (16 shards): streams ``stream-00000``... with
a time-based retention policy, each created and written (10 events) through the library by
``--build-procs`` processes sharing the work, then one retention pass over the store in the
measuring process (its first: a record is due for every stream, so every tail is read). Then ``--rounds`` rounds (>= 5) after a
warm-up alternate the three stores; a round adds ``--per-round`` streams to each store (created
and written, timed) and runs one retention pass over it (timed: records are due for the new
streams only). A store's seconds per stream in a round: its create-and-write seconds per new
stream, plus its pass's seconds divided by its streams. Each round's ratio is a COST: the larger
store's seconds per stream / the 100-stream store's (target for 2,000: <= 1.2x, flat).

Usage: .venv/bin/python bench/store_scale.py [--rounds 5] [--per-round 10] [--sizes 100,500,2000]
       [--build-procs 2] [--root /tmp/pravega-bench-scale]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps  # noqa: E402
from bench._common import COST, Seconds, alternate  # noqa: E402

SCOPE = "bench"
CONFIG = ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1),
                                retention_policy=ps.RetentionPolicy.by_time(timedelta(days=1)))


class Grown:
    """One store being grown: its manager and how many streams it has."""

    def __init__(self, spark, root: str, streams: int = 0) -> None:
        self.spark, self.manager, self.streams = spark, ps.StreamManager(spark, root), streams
        self.manager.create_scope(SCOPE)

    def add(self, count: int, progress: bool = False) -> float:
        """Create and write ``count`` more streams: the seconds."""
        started, last = time.perf_counter(), time.perf_counter()
        for _ in range(count):
            name = f"stream-{self.streams:05d}"
            self.manager.create_stream(SCOPE, name, CONFIG)
            events = self.spark.createDataFrame([(f"k{j}", f"{name}:{j}".encode()) for j in range(10)],
                                                "routing_key string, event binary")
            self.manager.create_event_writer(SCOPE, name, "w").write_events(events)
            self.streams += 1
            if progress and self.streams % 100 == 0:
                now = time.perf_counter()
                print(f"    {self.streams} streams ({(now - last) / 100:.3f} s per stream for the last 100)", flush=True)
                last = now
        return time.perf_counter() - started

    def retention_pass(self) -> float:
        """One retention pass over the store: the seconds."""
        started = time.perf_counter()
        outcomes = self.manager.run_retention(SCOPE)
        assert len(outcomes) == self.streams, (len(outcomes), self.streams)
        return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--sizes", default="100,500,2000")
    parser.add_argument("--root", default="/tmp/pravega-bench-scale")
    parser.add_argument("--build-procs", type=int, default=2, help="processes creating each store's streams")
    parser.add_argument("--build", nargs=3, metavar=("ROOT", "FIRST", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build:  # a builder: streams FIRST.. FIRST+COUNT-1 of the store at ROOT
        root, first, count = args.build
        spark = ps.spark_session()
        spark.sparkContext.setLogLevel("ERROR")
        Grown(spark, root, streams=int(first)).add(int(count), progress=True)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    spark = ps.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    stores = {}
    for size in sizes:
        print(f"building a store of {size} streams ({args.build_procs} processes)", flush=True)
        root = f"{args.root}/s{size}"
        shutil.rmtree(root, ignore_errors=True)
        Grown(spark, root)  # the store and its scope, before the builders race to them
        started = time.perf_counter()
        share = -(-size // args.build_procs)
        builders = [subprocess.Popen([sys.executable, __file__, "--build", root, str(first), str(min(share, size - first))],
                                     env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
                    for first in range(0, size, share)]
        assert all(b.wait() == 0 for b in builders), "a builder failed"
        built = time.perf_counter() - started
        store = stores[size] = Grown(spark, root, streams=size)
        first = store.retention_pass()
        print(f"  built in {built:.0f} s; first retention pass {first:.1f} s "
              f"({first / size:.4f} s per stream)", flush=True)

    def per_stream(size: int):
        def run(_round: int) -> Seconds:
            store = stores[size]
            written = store.add(args.per_round)
            passed = store.retention_pass()
            return Seconds(written / args.per_round + passed / store.streams)
        return run

    smallest, larger = sizes[0], sizes[1:]
    alternate((f"{smallest} streams", per_stream(smallest)),
              [(f"{size} streams", per_stream(size)) for size in larger],
              rounds=args.rounds, label="seconds per stream (create, write 10 events, share of a retention pass)",
              orientation=COST, targets={f"{sizes[-1]} streams": 1.2})
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
