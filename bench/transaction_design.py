"""Evidence for issue 4's design decision: where a transaction's time goes, and whether a
shuffle-free staging plus a map-only commit would reach 0.7x of a plain write.

    .venv/bin/python bench/transaction_design.py [--batches 20] [--events 10000] [--root /tmp/bench-txn-design]

Not a product path. Per batch of EVENTS events of 100 B over 1,000 keys, 4 segments, it times
(interleaved, medians printed):
  plain        our ``write_events`` (the baseline);
  txn          our begin + ``write_events`` + commit;
  begin        our ``begin_txn`` + ``abort`` (two commits);
  stage_cur    a raw Delta append of the rows as staged today (map-only, no routing);
  commit_cur   read those staged rows, route, per-segment running sum (a shuffle), raw append;
  stage_new    route and rank inside each Spark partition (``mapInArrow``, no shuffle), raw append;
  commit_new   read those rows, sum per (segment, partition) on the driver, map-only raw append.
It checks that both raw designs give every segment the same length and count.
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import functions as F
from transactions import batch  # bench/transactions.py: the same source batches

import pravega_spark as ps
from pravega_spark.routing import with_key_position, with_offsets

HEADER = 8
TAILS = {0: 0, 1: 0, 2: 0, 3: 0}
RANKED = "routing_key string, event binary, segment_id long, local_pos long, size long, part long"


def routed(df):
    """Four equal key ranges, as a fixed(4) stream has."""
    return (df.transform(with_key_position)
              .withColumn("segment_id", F.floor(F.col("key_position") * 4).cast("long")).drop("key_position"))


def rank_in_partition(batches):
    """Each row's byte position among its segment's rows of this Spark partition (no shuffle)."""
    part, carry = TaskContext.get().partitionId(), {}
    for b in batches:
        segments = b.column("segment_id").to_numpy()
        size = pc.binary_length(b.column("event")).to_numpy().astype(np.int64) + HEADER
        pos = np.empty(len(segments), np.int64)
        for s in np.unique(segments):
            mask = segments == s
            ends = carry.get(int(s), 0) + np.cumsum(size[mask])
            pos[mask] = ends - size[mask]
            carry[int(s)] = int(ends[-1])
        yield pa.RecordBatch.from_arrays(
            [*b.columns, pa.array(pos), pa.array(size), pa.array(np.full(len(segments), part, np.int64))],
            names=[*b.schema.names, "local_pos", "size", "part"])


def append(df, path: str, partition_by: str = "segment_id") -> None:
    df.write.format("delta").mode("append").partitionBy(partition_by).save(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--root", default="/tmp/bench-txn-design")
    a = p.parse_args(argv)
    shutil.rmtree(a.root, ignore_errors=True)
    raw = f"{a.root}/raw"
    spark = ps.spark_session(**{"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, f"{a.root}/store")
    manager.create_scope("bench")
    for name in ("plain", "txn"):
        manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    plain = manager.create_event_writer("bench", "plain", writer_id="plain")
    txw = manager.create_transactional_writer("bench", "txn", writer_id="txn")

    def staged(name: str, i: int):
        return spark.read.format("delta").load(f"{raw}/{name}").where(F.col("txn") == i)

    def stage_cur(i, df):
        append(df.select(F.lit(i).alias("txn"), "routing_key", "event", F.monotonically_increasing_id().alias("seq")),
               f"{raw}/staged_cur", "txn")

    def commit_cur(i, _df):
        rows = routed(staged("staged_cur", i)).transform(with_offsets, tails=TAILS, order=[F.col("seq")])
        append(rows.drop("txn", "seq"), f"{raw}/events_cur")

    def stage_new(i, df):
        append(routed(df).mapInArrow(rank_in_partition, RANKED).withColumn("txn", F.lit(i)), f"{raw}/staged_new", "txn")

    def commit_new(i, _df):
        rows = staged("staged_new", i)
        totals = rows.groupBy("segment_id", "part").agg(F.sum("size").alias("n")).collect()
        run, base = dict(TAILS), None
        for r in sorted(totals, key=lambda r: (r.segment_id, r.part)):
            hit = (F.col("segment_id") == r.segment_id) & (F.col("part") == r.part)
            base = F.when(hit, F.lit(run[r.segment_id])) if base is None else base.when(hit, F.lit(run[r.segment_id]))
            run[r.segment_id] += r.n
        append(rows.withColumn("offset", base + F.col("local_pos"))
                   .withColumn("next_offset", F.col("offset") + F.col("size"))
                   .drop("txn", "local_pos", "size", "part"), f"{raw}/events_new")

    def txn(_i, df):
        t = txw.begin_txn(timedelta(seconds=600))
        t.write_events(df)
        t.commit()

    steps = {"plain": lambda _i, df: plain.write_events(df), "txn": txn,
             "begin": lambda _i, _df: txw.begin_txn(timedelta(seconds=600)).abort(),
             "stage_cur": stage_cur, "commit_cur": commit_cur, "stage_new": stage_new, "commit_new": commit_new}
    batches = [batch(spark, i, a.events, 100) for i in range(a.batches)]
    warm = batch(spark, a.batches, a.events, 100)
    for fn in steps.values():
        fn(-1, warm)
    times: dict[str, list[float]] = {k: [] for k in steps}
    for i, df in enumerate(batches):
        for name, fn in steps.items():
            start = time.perf_counter()
            fn(i, df)
            times[name].append(time.perf_counter() - start)
        print(f"  {i + 1}/{a.batches}", {k: round(v[-1], 2) for k, v in times.items()}, flush=True)

    def ends(name):
        return (spark.read.format("delta").load(f"{raw}/{name}").where("offset >= 0 AND next_offset > 0")
                .groupBy("segment_id").agg(F.sum(F.col("next_offset") - F.col("offset")), F.count("*"))
                .orderBy("segment_id").collect())

    assert ends("events_cur") == ends("events_new"), "the two raw designs disagree"
    med = {k: statistics.median(v) for k, v in times.items()}
    print("medians, s:", {k: round(v, 3) for k, v in med.items()})
    print(f"transaction / plain today: {med['plain'] / med['txn']:.2f}x")
    print(f"raw commit, map-only vs shuffled: {med['commit_new'] / med['commit_cur']:.2f}x the time; "
          f"raw staging, ranked vs as today: {med['stage_new'] / med['stage_cur']:.2f}x")
    bound = med["plain"] / (med["plain"] + med["stage_cur"])
    print(f"bound for any design that writes the events twice (free begin, commit as cheap as a plain "
          f"write, staging as cheap as today's raw append): {bound:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
