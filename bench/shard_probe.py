"""Probe P5 of #68 (``docs/notes/issue68_design.md`` §6), at the Delta level: K processes, each
doing compare-and-set commits of its own stream's row (``replace_rows`` on the partition
``stream_key = k``: the fence every shard commit uses), either all in ONE shared table (a shard
holding K streams) or each in a table of its own (separate stores). Nothing here is the library's
format-3 code: it asks whether partition-disjoint fenced commits sharing one log slow each other.

Each process is its own JVM (``local[1]``), started before the round and waiting at a barrier
file, so JVM start-up is outside the measure. A round runs both configurations, alternating which
goes first; a configuration's seconds are the slowest process's wall time for its OPS commits.
The ratio is SPEED: separate / shared (>= 0.9x is #68's target for 2 processes, >= 0.8x for 4).
Prints each round's ratio, the median with min and max, and the retries (lost version races and
conflicts) per commit in the shared table.

Usage: .venv/bin/python bench/shard_probe.py [--procs 2] [--ops 20] [--rounds 5] [--backend classic]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

from bench._common import SPEED, Ratios, run_at_barrier  # noqa: E402

SCHEMA = StructType([StructField("stream_key", StringType(), False), StructField("row_version", LongType(), False),
                     StructField("payload", StringType(), False)])
CONF = {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false",
        "spark.driver.memory": "768m"}


def child(table: str, key: str, ops: int, barrier: str) -> None:
    import pravega_spark as ps
    from pravega_spark import _delta

    spark = ps.spark_session(**CONF)
    backend = _delta.backend_for(spark)
    backend.create_table(table, SCHEMA, ("stream_key",), {"delta.isolationLevel": "Serializable"})

    def bump(rows: list[dict]) -> list[tuple]:
        version = max((r["row_version"] for r in rows), default=0)
        return [(key, version + 1, "x" * 2000)]  # a stream row's size, about

    backend.replace_rows(table, SCHEMA, bump, "probe", partition={"stream_key": key})  # warm, and the partition
    print("READY", flush=True)
    while not os.path.exists(barrier):
        time.sleep(0.02)
    before = _delta.retries()
    started = time.perf_counter()
    for _ in range(ops):
        backend.replace_rows(table, SCHEMA, bump, "probe", partition={"stream_key": key})
    print(json.dumps({"seconds": time.perf_counter() - started, "retries": _delta.retries() - before}), flush=True)


def run(base: Path, procs: int, ops: int, shared: bool, backend: str) -> dict:
    """One configuration: the slowest process's seconds and the retries of all."""
    barrier = base / f"go-{time.time_ns()}"
    env = dict(os.environ, PRAVEGA_SPARK_BACKEND=backend, SPARK_LOCAL_IP="127.0.0.1")
    tables = [str(base / ("shared" if shared else f"own-{i}")) for i in range(procs)]
    results = run_at_barrier(__file__, [(tables[i], f"{i:04x}{'0' * 12}", ops) for i in range(procs)], barrier, env,
                             timeout=1800)
    return {"seconds": max(r["seconds"] for r in results), "retries": sum(r["retries"] for r in results)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--ops", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="classic", choices=("classic", "sql"))
    parser.add_argument("--child", nargs=4, metavar=("TABLE", "KEY", "OPS", "BARRIER"))
    args = parser.parse_args(argv)
    if args.child:
        table, key, ops, barrier = args.child
        child(table, key, int(ops), barrier)
        return 0
    base = Path(tempfile.mkdtemp(prefix="shard-probe-"))
    ratios = Ratios(f"{args.procs} processes x {args.ops} CAS commits, one shared table vs separate tables "
                    f"({args.backend})", [], SPEED, target=0.9 if args.procs <= 2 else 0.8,
                    note="ratio = separate s / shared s, > 1: shared faster")
    retries = []
    try:
        for n in range(args.rounds + 1):  # round 0 is the warm-up
            order = (True, False) if n % 2 else (False, True)
            got = {}
            for shared in order:
                shutil.rmtree(base, ignore_errors=True)
                base.mkdir()
                got[shared] = run(base, args.procs, args.ops, shared, args.backend)
            ratio = got[False]["seconds"] / got[True]["seconds"]
            print(f"round {n}{' (warm-up)' if n == 0 else ''}: shared {got[True]['seconds']:.2f} s "
                  f"({got[True]['retries']} retries), separate {got[False]['seconds']:.2f} s "
                  f"({got[False]['retries']} retries): {ratio:.2f}x", flush=True)
            if n:
                ratios.ratios.append(ratio)
                retries.append(got[True]["retries"] / (args.procs * args.ops))
        print(ratios.line())
        print(f"retries per commit in the shared table: median {statistics.median(retries):.2f}, "
              f"max {max(retries):.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
