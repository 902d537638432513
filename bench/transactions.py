"""Transaction throughput and idempotent-retry cost, against plain writes in the same process.

    .venv/bin/python bench/transactions.py [--txns 100] [--events 10000] [--size 100] [--root /tmp/bench-txn]

Prints:
  1. TXNS transactions of EVENTS events each (begin, write_events, commit) vs the same events
     written as TXNS plain ``write_events`` calls, on two fresh 4-segment streams (target: the
     transactional throughput is at least 0.8x the plain one);
  2. an idempotent write of EVENTS events vs its skipped retry (same writer id and write number)
     (target: the retry costs under 10% of the write).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps


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
    p.add_argument("--root", default="/tmp/bench-txn")
    a = p.parse_args(argv)
    shutil.rmtree(a.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, a.root)
    manager.create_scope("bench")
    for name in ("plain", "txn", "idem"):
        manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    plain = manager.create_event_writer("bench", "plain", writer_id="plain")
    txw = manager.create_transactional_writer("bench", "txn", writer_id="txn")
    batches = [batch(spark, i, a.events, a.size) for i in range(a.txns)]

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

    for fn in (write_plain, write_txn):  # warm-up (JIT, caches), not measured
        fn(batches[0])
    totals = {"plain": 0.0, "txn": 0.0}
    for i, df in enumerate(batches):  # interleaved, so both see the same machine state
        for name, fn in (("plain", write_plain), ("txn", write_txn)):
            start = time.perf_counter()
            fn(df)
            totals[name] += time.perf_counter() - start
        if (i + 1) % 10 == 0:
            print(f"  {i + 1}/{a.txns}: plain {totals['plain']:.1f} s, transactions {totals['txn']:.1f} s", flush=True)
    n = a.txns * a.events
    plain_rate, txn_rate = n / totals["plain"], n / totals["txn"]
    print(f"{a.txns} transactions x {a.events:,} events: {txn_rate:,.0f} events/s "
          f"({totals['txn'] / a.txns:.2f} s per txn: begin + write + commit)")
    print(f"same events, {a.txns} plain writes: {plain_rate:,.0f} events/s ({totals['plain'] / a.txns:.2f} s per write)")
    print(f"transactional / plain throughput: {txn_rate / plain_rate:.2f}x (target >= 0.8x)")
    print("  per transaction (medians): " + ", ".join(f"{k} {statistics.median(v) * 1000:.0f} ms" for k, v in steps.items()))

    idem = manager.create_event_writer("bench", "idem", writer_id="idem")
    writes, retries = [], []
    for number in range(10):
        df = batches[number % len(batches)]
        start = time.perf_counter()
        first = idem.write_events(df, write_number=number)
        writes.append(time.perf_counter() - start)
        start = time.perf_counter()
        retry = idem.write_events(df, write_number=number)
        retries.append(time.perf_counter() - start)
        assert first.event_count == a.events and retry.event_count == 0
    w, r = statistics.median(writes), statistics.median(retries)
    print(f"idempotent write of {a.events:,} events: {w * 1000:.0f} ms; skipped retry: {r * 1000:.0f} ms "
          f"-> {r / w:.1%} of the write (target < 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
