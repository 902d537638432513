"""Transaction throughput and idempotent-retry cost, against plain writes in the same process.

    .venv/bin/python bench/transactions.py [--txns 100] [--events 10000] [--size 100] [--rounds 5]
                                           [--retry-rounds 10] [--commit-events 100000] [--root /tmp/bench-txn]
    .venv/bin/python bench/transactions.py --connect   # over Spark Connect (SPARK_REMOTE, else a local server)

Prints, each comparison alternating for its rounds after a warm-up round
(``bench/_common.alternate``), each round's ratio printed, the measure the MEDIAN of the
per-round ratios with min and max (targets on the median):
  1. TXNS transactions of EVENTS events each (begin, write_events, commit) vs the same events
     written as TXNS plain ``write_events`` calls, on two fresh 4-segment streams, in ROUNDS
     rounds of TXNS/ROUNDS of each (and a warm-up round as large); ratio = plain seconds /
     transactions' = the transactional throughput / the plain one, a speed (target >= 0.8x);
  2. an idempotent write of EVENTS events vs its skipped retry (same writer id and write number),
     RETRY-ROUNDS rounds; ratio = retry seconds / write's, a cost (target: under 0.1x, the retry
     costs under 10% of the write);
  3. the commit of one transaction holding COMMIT-EVENTS staged events vs a raw Delta append of
     the same rows to a plain table, ROUNDS rounds; ratio = commit seconds / append's, a cost
     (target <= 1.5x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import COST, Seconds, alternate, connect_server


def batch(spark, index: int, events: int, size: int):
    """EVENTS events of ~SIZE bytes over 1,000 keys, cached (the source's cost is not measured)."""
    df = spark.range(index * events, (index + 1) * events).select(
        F.concat(F.lit("device-"), (F.col("id") % 1000).cast("string")).alias("routing_key"),
        F.concat(F.col("id").cast("string"), F.lit(":"), F.expr(f"repeat('x', {max(size - 12, 1)})"))
        .cast("binary").alias("event")).cache()
    df.count()
    return df


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--txns", type=int, default=100)
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5, help="1.: rounds after a warm-up round")
    p.add_argument("--retry-rounds", type=int, default=10, help="2.: rounds after a warm-up round")
    p.add_argument("--commit-events", type=int, default=100_000, help="3.: staged events per committed transaction")
    p.add_argument("--root", default="/tmp/bench-txn")
    p.add_argument("--connect", action="store_true", help="on a Spark Connect session")
    p.add_argument("--only", default="123", help="which measures to run (digits)")
    a = p.parse_args(argv)
    a.root = str(Path(a.root).resolve())
    shutil.rmtree(a.root, ignore_errors=True)
    if a.connect:
        with connect_server():
            print(f"== Spark Connect session ({os.environ['SPARK_REMOTE']})", flush=True)
            return run(a, ps.spark_session())
    spark = ps.spark_session(**{"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return run(a, spark)


def run(a, spark) -> int:
    manager = ps.StreamManager(spark, a.root)
    manager.create_scope("bench")
    for name in ("plain", "txn", "idem", "commit"):
        manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    plain = manager.create_event_writer("bench", "plain", writer_id="plain")
    txw = manager.create_transactional_writer("bench", "txn", writer_id="txn")
    batches = ([batch(spark, i, a.events, a.size) for i in range(max(1, a.txns // a.rounds) * (a.rounds + 1))]
               if "1" in a.only or "2" in a.only else [])

    def write_plain(df):
        plain.write_events(df)

    steps: dict[str, list[float]] = {"begin": [], "write_events": [], "commit": []}

    def write_txn(df):
        t0 = time.perf_counter()
        txn = txw.begin_txn(timedelta(seconds=600))
        t1 = time.perf_counter()
        txn.write_events(df)
        t2 = time.perf_counter()
        txn.commit()
        for name, took in zip(steps, (t1 - t0, t2 - t1, time.perf_counter() - t2), strict=True):
            steps[name].append(took)

    per_round = max(1, a.txns // a.rounds)

    def writes(fn):
        def run(r: int) -> None:
            for i in range(r * per_round, (r + 1) * per_round):
                fn(batches[i % len(batches)])
        return run

    n = per_round * a.events
    if "1" in a.only:
        print(f"{per_round} transactions x {a.events:,} events per round vs the same events as {per_round} "
              "plain writes", flush=True)
        alternate(("plain writes", writes(write_plain)), ("transactions", writes(write_txn)), rounds=a.rounds,
                  label="transactional vs plain throughput", targets=0.8)
        print(f"  ({n:,} events per side per round; per transaction, medians: "
              + ", ".join(f"{k} {statistics.median(v) * 1000:.0f} ms" for k, v in steps.items()) + ")")
    if "2" in a.only:
        bench_retry(manager, a, batches)
    if "3" in a.only:
        bench_commit(spark, manager, a)
    return 0


def bench_retry(manager, a, batches) -> None:
    """2.: an idempotent write vs its skipped retry."""
    idem = manager.create_event_writer("bench", "idem", writer_id="idem")

    def first_write(r: int) -> None:
        assert idem.write_events(batches[r % len(batches)], write_number=r).event_count == a.events

    def retry(r: int) -> None:
        assert idem.write_events(batches[r % len(batches)], write_number=r).event_count == 0

    print(f"idempotent write of {a.events:,} events vs its skipped retry", flush=True)
    alternate(("write", first_write), ("skipped retry", retry), rounds=a.retry_rounds, label="idempotent retry",
              orientation=COST, targets=0.1)


def bench_commit(spark, manager, a) -> None:
    """3.: one transaction's commit of COMMIT-EVENTS staged events vs a raw append of its rows."""
    committer = manager.create_transactional_writer("bench", "commit", writer_id="commit")
    rows = batch(spark, 10_000, a.commit_events, a.size)
    raw_path = f"{a.root}/raw_commit"

    def commit(r: int) -> Seconds:  # staged first, not timed: the commit's own seconds
        txn = committer.begin_txn(timedelta(seconds=600))
        txn.write_events(rows)
        start = time.perf_counter()
        assert txn.commit().event_count == a.commit_events
        return Seconds(time.perf_counter() - start)

    def raw_append(r: int) -> None:
        rows.write.format("delta").mode("append").save(raw_path)

    print(f"commit of a transaction of {a.commit_events:,} staged events vs a raw Delta append of the same rows",
          flush=True)
    alternate(("raw Delta append", raw_append), ("transaction commit", commit),
              rounds=a.rounds, label="transaction commit", orientation=COST, targets=1.5)


if __name__ == "__main__":
    sys.exit(main())
