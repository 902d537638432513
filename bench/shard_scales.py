"""#68's control-plane target, through the library: K processes, each scaling its own stream
(a split, then a merge back, OPS times), all in ONE store or each in a store of its own.

Each process is its own JVM (``local[1]``), its store and stream created before the round and
waiting at a barrier file, so JVM start-up and creation are outside the measure. A round runs
both configurations, alternating which goes first; a configuration's seconds are the slowest
process's wall time for its scales. The ratio is SPEED: separate / one store (#68's target:
>= 0.9x for 2 processes, >= 0.8x for 4). The streams are named as a user would name them
(``stream-0``, ``stream-1``, ...); the shards they fall in (of ``--shards``) are printed, since two
streams of one shard share its log (format 3's design: ``docs/notes/issue68_design.md`` §2).

Usage: .venv/bin/python bench/shard_scales.py [--procs 2] [--ops 10] [--rounds 5] [--shards 16]
       [--backend classic]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import SPEED, Ratios, run_at_barrier  # noqa: E402

CONF = {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false",
        "spark.driver.memory": "768m"}


def child(root: str, stream: str, ops: int, shards: int, barrier: str) -> None:
    import pravega_spark as ps

    spark = ps.spark_session(**CONF)
    manager = ps.StreamManager(spark, root, shards=shards)
    manager.create_scope("bench")
    manager.create_stream("bench", stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))

    def split_and_merge() -> None:
        [current] = [s for s in manager.segments("bench", stream).collect() if s.sealed_epoch is None]
        manager.scale_stream("bench", stream, [current.segment_id], [(0.0, 0.5), (0.5, 1.0)])
        halves = sorted(s.segment_id for s in manager.segments("bench", stream).collect() if s.sealed_epoch is None)
        manager.scale_stream("bench", stream, halves, [(0.0, 1.0)])

    split_and_merge()  # warm
    print("READY", flush=True)
    while not os.path.exists(barrier):
        time.sleep(0.02)
    started = time.perf_counter()
    for _ in range(ops):
        split_and_merge()
    print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


def run(base: Path, procs: int, ops: int, shards: int, one_store: bool, backend: str) -> float:
    """One configuration: the slowest process's seconds."""
    barrier = base / f"go-{time.time_ns()}"
    env = dict(os.environ, PRAVEGA_SPARK_BACKEND=backend, SPARK_LOCAL_IP="127.0.0.1")
    roots = [str(base / ("store" if one_store else f"store-{i}")) for i in range(procs)]
    if one_store:  # the store made once, so that no process's creation races another's
        subprocess.run([sys.executable, "-c", f"import pravega_spark as ps; ps.StreamManager("
                        f"ps.spark_session(**{CONF!r}), {roots[0]!r}, shards={shards})"], check=True, env=env,
                       capture_output=True)
    results = run_at_barrier(__file__, [(roots[i], f"stream-{i}", ops, shards) for i in range(procs)], barrier, env)
    seconds = [r["seconds"] for r in results]
    return max(seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--ops", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--backend", default="classic", choices=("classic", "sql"))
    parser.add_argument("--child", nargs=5, metavar=("ROOT", "STREAM", "OPS", "SHARDS", "BARRIER"))
    args = parser.parse_args(argv)
    if args.child:
        root, stream, ops, shards, barrier = args.child
        child(root, stream, int(ops), int(shards), barrier)
        return 0
    from pravega_spark.store.schema import shard_of
    from pravega_spark.store.shard_store import stream_key

    placed = {f"stream-{i}": shard_of(stream_key("bench", f"stream-{i}"), args.shards) for i in range(args.procs)}
    print(f"shards of the streams (of {args.shards}): {placed}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="shard-scales-"))
    ratios = Ratios(f"{args.procs} processes x {args.ops} split+merge scales of their own streams, one store vs "
                    f"separate stores ({args.backend}, {args.shards} shards)", [], SPEED,
                    target=0.9 if args.procs <= 2 else 0.8, note="ratio = separate s / one-store s")
    try:
        for n in range(args.rounds + 1):  # round 0 is the warm-up
            order = (True, False) if n % 2 else (False, True)
            got = {}
            for one_store in order:
                shutil.rmtree(base, ignore_errors=True)
                base.mkdir()
                got[one_store] = run(base, args.procs, args.ops, args.shards, one_store, args.backend)
            ratio = got[False] / got[True]
            print(f"round {n}{' (warm-up)' if n == 0 else ''}: one store {got[True]:.2f} s, separate "
                  f"{got[False]:.2f} s: {ratio:.2f}x", flush=True)
            if n:
                ratios.ratios.append(ratio)
        print(ratios.line())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
