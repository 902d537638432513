"""Key-value tables: bulk updates, single puts and gets, each against a raw Delta baseline.

In one process and one session, ``--runs`` rounds (best and spread printed):

- ``update_all``: 100,000 keys (half new, half updates at their current versions) into a KVT
  holding the 50,000 updated keys, vs a raw Delta MERGE of the same rows (ON partition and key:
  update when matched, insert when not) into a plain table holding the same 50,000 rows.
  Ratio = raw seconds / ours (target >= 0.8).
- ``put``: the median latency of single unconditional puts vs the median of raw single-row blind
  appends to a small Delta table (``spark.createDataFrame`` of one row, ``mode("append")``).
  Ratio = ours / raw (target <= 1.0).
- ``get``: the median latency of gets of random keys on a 1,000,000-key KVT vs the same raw
  append; the data files each get read are reported. Ratio = ours / raw (target <= 0.2).

Usage: ``.venv/bin/python bench/kv_tables.py [--runs 3] [--keys 1000000] [--root DIR]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import functions as F  # noqa: E402

import pravega_spark as ps  # noqa: E402
from bench._common import fresh_store, timed  # noqa: E402

CONFIG = ps.KeyValueTableConfiguration(8, primary_key_length=8, secondary_key_length=8)
VALUE_SIZE = 100


def keys_frame(spark, start: int, count: int):
    """``key`` (16 bytes: an 8-byte primary key shared by 4 keys, and a secondary key), ``value``."""
    return spark.range(start, start + count).select(
        F.concat(F.lpad(F.hex(F.floor(F.col("id") / 4)), 8, "0"),
                 F.lpad(F.hex(F.col("id")), 8, "0")).cast("binary").alias("key"),
        F.concat(F.col("id").cast("string"), F.lit(":"), F.expr(f"repeat('v', {VALUE_SIZE - 12})")).cast("binary")
        .alias("value"))


def raw_append_latency(spark, path: str, n: int) -> float:
    spark.createDataFrame([(0, b"k", b"v")], "partition int, key binary, value binary").write.format("delta") \
        .mode("append").save(path)
    times = [timed(lambda i=i: spark.createDataFrame([(i % 8, b"k%d" % i, b"v")], "partition int, key binary, value binary")
                   .write.format("delta").mode("append").save(path)) for i in range(n)]
    return statistics.median(times)


def bench_update_all(manager, root: str, run: int) -> tuple[float, float]:
    spark = manager.spark
    name = f"bulk{run}"
    manager.create_key_value_table("bench", name, CONFIG)
    kvt = manager.key_value_table("bench", name)
    kvt.update_all(keys_frame(spark, 0, 50_000)).count()
    current = kvt.entries().select("key", "version")
    updates = keys_frame(spark, 0, 50_000).withColumn("value", F.concat(F.col("value"), F.lit(b"u"))) \
        .join(current, "key")
    source = updates.unionByName(keys_frame(spark, 50_000, 50_000).withColumn("version", F.lit(None).cast("long")))
    source = source.localCheckpoint()
    ours = timed(lambda: kvt.update_all(source, version="version").count())
    # the raw baseline: the same rows, the same partitioning, one MERGE
    raw = f"{root}/raw{run}"
    with_partition = keys_frame(spark, 0, 50_000).transform(ps.table_entries.with_entry_columns, config=CONFIG) \
        .withColumn("version", F.lit(1).cast("long"))
    with_partition.write.format("delta").partitionBy("partition").save(raw)
    src = source.drop("version").transform(ps.table_entries.with_entry_columns, config=CONFIG) \
        .withColumn("version", F.lit(2).cast("long")).localCheckpoint()
    merge = (f"MERGE INTO delta.`{raw}` t USING {{src}} s ON t.partition = s.partition AND t.key = s.key "
             "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    base = timed(lambda: spark.sql(merge, src=src).collect())
    return ours, base


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--root", default=None)
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="kv-bench-")
    manager = fresh_store(root, "bench")
    spark = manager.spark
    bulk, puts, gets, files = [], [], [], []
    print(f"store {root}; {args.runs} runs", flush=True)
    for run in range(args.runs):
        ours, base = bench_update_all(manager, root, run)
        bulk.append((ours, base))
        print(f"run {run}: update_all 100,000 keys {ours:.2f} s, raw MERGE {base:.2f} s: {base / ours:.2f}x", flush=True)

    manager.create_key_value_table("bench", "big", CONFIG)
    big = manager.key_value_table("bench", "big")
    load = timed(lambda: big.update_all(keys_frame(spark, 0, args.keys)).count())
    print(f"loaded {args.keys:,} keys with update_all in {load:.1f} s", flush=True)
    manager.create_key_value_table("bench", "small", CONFIG)
    small = manager.key_value_table("bench", "small")
    rnd = random.Random(7)
    sample = [r["key"] for r in keys_frame(spark, 0, args.keys).where(F.rand(7) < 200 / args.keys).collect()]
    for run in range(args.runs):
        raw = raw_append_latency(spark, f"{root}/append{run}", 20)
        put = statistics.median(timed(lambda i=i: small.put(b"p%07d" % (i % 64) + b"s%07d" % i, b"v" * VALUE_SIZE))
                                for i in range(20))
        latencies = []
        for key in rnd.sample(sample, 30):
            start = time.perf_counter()
            entry = big.get(bytes(key))
            latencies.append(time.perf_counter() - start)
            assert entry is not None
            files.append(big.files_read)
        get = statistics.median(latencies)
        puts.append(put / raw)
        gets.append(get / raw)
        print(f"run {run}: raw append {raw * 1000:.0f} ms; put {put * 1000:.0f} ms ({put / raw:.2f}x); "
              f"get {get * 1000:.1f} ms ({get / raw:.3f}x)", flush=True)

    ratios = [b / o for o, b in bulk]
    print("\nRESULT (best of runs, spread)")
    print(f"update_all vs raw MERGE: {max(ratios):.2f}x (spread {min(ratios):.2f}-{max(ratios):.2f}; target >= 0.8)")
    print(f"put vs raw append:       {min(puts):.2f}x (spread {min(puts):.2f}-{max(puts):.2f}; target <= 1.0)")
    print(f"get vs raw append:       {min(gets):.3f}x (spread {min(gets):.3f}-{max(gets):.3f}; target <= 0.2); "
          f"files read per get: {min(files)}-{max(files)} (median {statistics.median(files)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
