"""#68's P4: the store's own tables after many control operations: their files, and whether a
control operation is slower than on a fresh store.

In one process and one classic session (library defaults, 16 shards): an AGED store, whose one
stream takes ``--ops`` control operations (``update_stream``, each a commit to its catalogue
shard: the worst case, every operation in one shard table), with the seconds per operation
printed every 1,000; then the files of the store's own tables (live files, data files on disk,
log files and checkpoints), and again after ``vacuum_store_tables(timedelta(0))``. Then
``--rounds`` rounds (>= 5) after a warm-up alternate ``--per-round`` operations on a FRESH store's
stream and on the aged stream; each round's ratio is a COST: aged seconds / fresh seconds
(target: no slower, <= 1x beyond the spread). ``--max-minutes`` caps the ageing (the operations
done are printed).

Usage: .venv/bin/python bench/control_growth.py [--ops 10000] [--rounds 5] [--per-round 20]
       [--max-minutes 25] [--root /tmp/pravega-bench-growth]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps  # noqa: E402
from bench._common import COST, alternate  # noqa: E402

SCOPE, STREAM = "bench", "controlled"


def config(i: int) -> ps.StreamConfiguration:
    """The i-th configuration: each differs from the one before it."""
    return ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1),
                                  retention_policy=ps.RetentionPolicy.by_time(timedelta(days=1 + i % 7)))


def store_at(spark, root: str) -> ps.StreamManager:
    shutil.rmtree(root, ignore_errors=True)
    manager = ps.StreamManager(spark, root)
    manager.create_scope(SCOPE)
    for name in (STREAM, "other-1", "other-2", "other-3"):
        manager.create_stream(SCOPE, name, config(0))
    return manager


def files(manager: ps.StreamManager) -> dict[str, int]:
    """The store's own tables: live data files, data files on disk, log commits, checkpoints."""
    spark, store = manager.spark, manager.controller.store
    counts = {"tables": 0, "live": 0, "on disk": 0, "log json": 0, "checkpoints": 0}
    for path in store.own_tables():
        local = path.removeprefix("file:")
        counts["tables"] += 1
        counts["live"] += spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().numFiles
        for folder, _, names in os.walk(local):
            if "_delta_log" in folder:
                counts["log json"] += sum(n.endswith(".json") and n[:20].isdigit() for n in names)
                counts["checkpoints"] += sum(".checkpoint." in n for n in names)
            else:
                counts["on disk"] += sum(n.endswith(".parquet") for n in names)
    return counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=20)
    parser.add_argument("--max-minutes", type=float, default=25)
    parser.add_argument("--root", default="/tmp/pravega-bench-growth")
    args = parser.parse_args(argv)
    spark = ps.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    aged, fresh = store_at(spark, f"{args.root}/aged"), store_at(spark, f"{args.root}/fresh")
    print(f"the fresh store's own tables: {files(fresh)}", flush=True)
    started = last = time.perf_counter()
    done = 0
    while done < args.ops and time.perf_counter() - started < args.max_minutes * 60:
        done += 1
        assert aged.update_stream(SCOPE, STREAM, config(done))
        if done % 1000 == 0:
            now = time.perf_counter()
            print(f"  {done} operations: {(now - last) / 1000 * 1000:.1f} ms per operation for the last 1,000",
                  flush=True)
            last = now
    print(f"aged by {done} control operations in {time.perf_counter() - started:.0f} s", flush=True)
    print(f"the aged store's own tables: {files(aged)}", flush=True)
    aged.vacuum_store_tables(timedelta(0))
    print(f"after vacuum_store_tables(timedelta(0)): {files(aged)}", flush=True)
    count = [done]

    def operations(manager: ps.StreamManager):
        def run(_round: int) -> None:
            for _ in range(args.per_round):
                count[0] += 1
                assert manager.update_stream(SCOPE, STREAM, config(count[0]))
        return run

    alternate(("fresh store", operations(fresh)), ("aged store", operations(aged)), rounds=args.rounds,
              label=f"{args.per_round} control operations", orientation=COST, targets=1.0)
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
