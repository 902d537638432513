"""#68's control-plane target, through the library: K processes, each scaling its own stream
(a split, then a merge back, OPS times), all in ONE store or each in a store of its own.

Each process is its own JVM (``local[1]``), alive for every round, with its stream in the shared
store and in a store of its own, created and warmed before the first round, so JVM start-up and
creation are outside the measure. A round runs both configurations, alternating which goes
first, each started in every process at once (a line on its stdin); a configuration's seconds are
the slowest process's wall time for its scales. The ratio is SPEED: separate / one store (#68's target:
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

from bench._common import SPEED, Ratios  # noqa: E402

CONF = {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false",
        "spark.driver.memory": "768m"}


def child(one_root: str, own_root: str, stream: str, ops: int, shards: int) -> None:
    """One measured process, alive for every round: its stream in the shared store and in a store
    of its own; each line on stdin names the configuration to run (``one`` or ``separate``), and
    it prints the seconds its scales took."""
    import pravega_spark as ps

    spark = ps.spark_session(**CONF)
    managers = {"one": ps.StreamManager(spark, one_root, shards=shards),
                "separate": ps.StreamManager(spark, own_root, shards=shards)}
    for manager in managers.values():
        manager.create_scope("bench")
        manager.create_stream("bench", stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))

    def split_and_merge(manager) -> None:
        [current] = [s for s in manager.segments("bench", stream).collect() if s.sealed_epoch is None]
        manager.scale_stream("bench", stream, [current.segment_id], [(0.0, 0.5), (0.5, 1.0)])
        halves = sorted(s.segment_id for s in manager.segments("bench", stream).collect() if s.sealed_epoch is None)
        manager.scale_stream("bench", stream, halves, [(0.0, 1.0)])

    for manager in managers.values():
        split_and_merge(manager)  # warm
    print("READY", flush=True)
    for line in sys.stdin:
        manager = managers[line.strip()]
        started = time.perf_counter()
        for _ in range(ops):
            split_and_merge(manager)
        print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


def start(base: Path, procs: int, ops: int, shards: int, backend: str) -> list[subprocess.Popen]:
    """The measured processes, each READY (JVM started, streams created and warmed)."""
    env = dict(os.environ, PRAVEGA_SPARK_BACKEND=backend, SPARK_LOCAL_IP="127.0.0.1")
    one = str(base / "store")
    # the shared store made first, so that no process's creation races another's
    subprocess.run([sys.executable, "-c", f"import pravega_spark as ps; ps.StreamManager("
                    f"ps.spark_session(**{CONF!r}), {one!r}, shards={shards})"], check=True, env=env,
                   capture_output=True)
    children = [subprocess.Popen([sys.executable, __file__, "--child", one, str(base / f"store-{i}"), f"stream-{i}",
                                  str(ops), str(shards)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=open(base / f"child-{i}.err", "w"), text=True, env=env)
                for i in range(procs)]
    for i, c in enumerate(children):
        line = c.stdout.readline()
        assert line.startswith("READY"), (base / f"child-{i}.err").read_text()[-3000:]
    return children


def run(children: list[subprocess.Popen], configuration: str) -> float:
    """One configuration, all processes at once: the slowest process's seconds."""
    for c in children:
        c.stdin.write(configuration + "\n")
        c.stdin.flush()
    return max(json.loads(c.stdout.readline())["seconds"] for c in children)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--ops", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--backend", default="classic", choices=("classic", "sql"))
    parser.add_argument("--child", nargs=5, metavar=("ONE_ROOT", "OWN_ROOT", "STREAM", "OPS", "SHARDS"))
    args = parser.parse_args(argv)
    if args.child:
        one_root, own_root, stream, ops, shards = args.child
        child(one_root, own_root, stream, int(ops), int(shards))
        return 0
    from pravega_spark.store.schema import shard_of
    from pravega_spark.store.shard_store import stream_key

    placed = {f"stream-{i}": shard_of(stream_key("bench", f"stream-{i}"), args.shards) for i in range(args.procs)}
    print(f"shards of the streams (of {args.shards}): {placed}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="shard-scales-"))
    ratios = Ratios(f"{args.procs} processes x {args.ops} split+merge scales of their own streams, one store vs "
                    f"separate stores ({args.backend}, {args.shards} shards)", [], SPEED,
                    target=0.9 if args.procs <= 2 else 0.8, note="ratio = separate s / one-store s")
    children = start(base, args.procs, args.ops, args.shards, args.backend)
    try:
        for n in range(args.rounds + 1):  # round 0 is the warm-up
            order = ("one", "separate") if n % 2 else ("separate", "one")
            got = {configuration: run(children, configuration) for configuration in order}
            ratio = got["separate"] / got["one"]
            print(f"round {n}{' (warm-up)' if n == 0 else ''}: one store {got['one']:.2f} s, separate "
                  f"{got['separate']:.2f} s: {ratio:.2f}x", flush=True)
            if n:
                ratios.ratios.append(ratio)
        print(ratios.line())
    finally:
        for c in children:
            c.stdin.close()
            c.wait(timeout=120)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
