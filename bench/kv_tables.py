"""Key-value tables: bulk updates, single puts and gets, each against a raw Delta baseline.

In one process and one session, each comparison alternates the baseline and ours for ``--runs``
rounds (>= 5) after a warm-up round (``bench/_common.alternate``), prints each round's ratio and
reports the MEDIAN of the per-round ratios with min and max; targets apply to the median:

- ``update_all``: 100,000 keys (half new, half updates at their current versions) into a KVT
  holding the 50,000 updated keys, vs a raw Delta MERGE of the same rows (ON partition and key:
  update when matched, insert when not) into a plain table holding the same 50,000 rows.
  Ratio = raw seconds / ours, a speed: > 1 means ours is faster (target >= 0.8).
- ``put``: the median latency of 20 single unconditional puts vs the median of 20 raw single-row
  blind appends to a small Delta table (``spark.createDataFrame`` of one row, ``mode("append")``).
  Ratio = ours / raw, a cost: < 1 means ours is cheaper (target <= 1.0).
- ``get``: the median latency of 30 gets of random keys on a 1,000,000-key KVT vs the same raw
  append; the data files each get read are reported. Ratio = ours / raw, a cost (target <= 0.2).

Usage: ``.venv/bin/python bench/kv_tables.py [--runs 5] [--keys 1000000] [--root DIR]``
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
from bench._common import COST, Seconds, alternate, fresh_store, timed  # noqa: E402
from pravega_spark.tables import table_entries  # noqa: E402

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


def update_all_rows(spark):
    """The 100,000 keys of a round: the 50,000 loaded keys with new values, and 50,000 new ones."""
    return keys_frame(spark, 0, 50_000).withColumn("value", F.concat(F.col("value"), F.lit(b"u"))) \
        .unionByName(keys_frame(spark, 50_000, 50_000))


def update_all_ours(manager, run: int) -> float:
    spark = manager.spark
    name = f"bulk{run}"
    manager.create_key_value_table("bench", name, CONFIG)
    kvt = manager.key_value_table("bench", name)
    kvt.update_all(keys_frame(spark, 0, 50_000)).count()
    current = kvt.entries().select("key", "version")
    source = update_all_rows(spark).join(current, "key", "left").localCheckpoint()  # new keys: version null
    return timed(lambda: kvt.update_all(source, version="version").count())


def update_all_raw(spark, root: str, run: int) -> float:
    """The same rows, the same partitioning, one MERGE."""
    raw = f"{root}/raw{run}"
    with_partition = keys_frame(spark, 0, 50_000).transform(table_entries.with_entry_columns, config=CONFIG) \
        .withColumn("version", F.lit(1).cast("long"))
    with_partition.write.format("delta").partitionBy("partition").save(raw)
    src = update_all_rows(spark).transform(table_entries.with_entry_columns, config=CONFIG) \
        .withColumn("version", F.lit(2).cast("long")).localCheckpoint()
    merge = (f"MERGE INTO delta.`{raw}` t USING {{src}} s ON t.partition = s.partition AND t.key = s.key "
             "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    return timed(lambda: spark.sql(merge, src=src).collect())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds after a warm-up round")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--root", default=None)
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="kv-bench-")
    manager = fresh_store(root, "bench")
    spark = manager.spark
    print(f"store {root}; {args.runs} rounds after a warm-up", flush=True)
    print("update_all of 100,000 keys vs a raw MERGE", flush=True)
    alternate(("raw MERGE", lambda r: Seconds(update_all_raw(spark, root, r))),
              ("update_all", lambda r: Seconds(update_all_ours(manager, r))), rounds=args.runs, targets=0.8)

    manager.create_key_value_table("bench", "big", CONFIG)
    big = manager.key_value_table("bench", "big")
    load = timed(lambda: big.update_all(keys_frame(spark, 0, args.keys)).count())
    print(f"loaded {args.keys:,} keys with update_all in {load:.1f} s", flush=True)
    manager.create_key_value_table("bench", "small", CONFIG)
    small = manager.key_value_table("bench", "small")
    rnd = random.Random(7)
    sample = [r["key"] for r in keys_frame(spark, 0, args.keys).where(F.rand(7) < 200 / args.keys).collect()]
    files: list[int] = []

    def put(r: int) -> float:
        return Seconds(statistics.median(timed(lambda i=i: small.put(b"p%07d" % (i % 64) + b"s%07d" % i, b"v" * VALUE_SIZE))
                                         for i in range(20)))

    def get(r: int) -> float:
        latencies = []
        for key in rnd.sample(sample, min(30, len(sample))):
            start = time.perf_counter()
            entry = big.get(bytes(key))
            latencies.append(time.perf_counter() - start)
            assert entry is not None
            files.append(big.files_read)
        return Seconds(statistics.median(latencies))

    print("put and get latency (medians of 20 puts and 30 gets per round) vs a raw single-row append "
          "(the median of 20 per round)", flush=True)
    alternate(("raw append", lambda r: Seconds(raw_append_latency(spark, f"{root}/append{r}", 20))),
              [("put", put), ("get", get)], rounds=args.runs, orientation=COST, targets={"put": 1.0, "get": 0.2})
    print(f"  files read per get: {min(files)}-{max(files)} (median {statistics.median(files)})")
    return 0

if __name__ == "__main__":
    sys.exit(main())
