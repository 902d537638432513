"""Retention costs: the subscribers' lower bound at scale, and truncation vs segments deleted.

    .venv/bin/python bench/retention.py [--root /tmp/pravega-bench-retention] [--skip-lower-bound]
                                        [--skip-truncation]

Prints, in the same process, each comparison alternating for ``--rounds`` rounds (>= 5) after a
warm-up round (``bench/_common.alternate``), each round's ratio printed, the measure the MEDIAN
of the per-round ratios with min and max (targets on the median). Both ratios are costs (the
larger case's seconds / the smaller's: < 1 means the larger case is cheaper):
  1. the lower bound over N subscriber cuts x 64 segments, the cuts spread over 3 epochs, for
     N = 1,000, 10 and 10,000 in each round, and the growth 10,000 / 1,000, plain and beyond the
     fixed job overhead (the round's N = 10 time) (target: under 2x beyond the overhead);
  2. a truncation that deletes 100 sealed segments vs one that deletes 1 (fresh streams each
     round; target: under 2x), with the data files each rewrote (target: 0).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from delta.tables import DeltaTable

import pravega_spark as ps
from bench._common import COST, Ratios, Seconds, alternate
from pravega_spark.controller.subscribers import lower_bound_cut
from pravega_spark.store.schema import EVENTS_PARTITIONS, EVENTS_SCHEMA, SEGMENTS_SCHEMA
from pravega_spark.stream.scaling import apply_transition, plan_scale
from pravega_spark.stream.segments import epoch_members, initial_segments

SEGMENTS = 64
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def three_epochs():
    """64 segments in epoch 0; epoch 1 splits the even ones in two; epoch 2 merges those halves back."""
    records = initial_segments(SEGMENTS, T0)
    for epoch in (0, 1):
        current = sorted(epoch_members(records, epoch), key=lambda r: r.key_start)
        if epoch == 0:
            chosen = [r for i, r in enumerate(current) if i % 2 == 0]
            ranges = [b for r in chosen for b in ((r.key_start, (r.key_start + r.key_end) / 2),
                                                  ((r.key_start + r.key_end) / 2, r.key_end))]
        else:
            halves = [r for r in current if r.creation_epoch == 1]
            chosen = halves
            ranges = [(halves[i].key_start, halves[i + 1].key_end) for i in range(0, len(halves), 2)]
        plan = plan_scale(records, [r.segment_id for r in chosen], ranges, 1, T0 + timedelta(minutes=epoch + 1))
        records = apply_transition(records, plan, {r.segment_id: 10_000 for r in chosen})
    return records


def subscriber_rows(records, subscribers: int, seed: int = 7):
    """Each subscriber's cut is a tail-like cut of epoch 0, 1 or 2 at random offsets."""
    rng = random.Random(seed)
    members = [epoch_members(records, e) for e in range(3)]
    rows = []
    for s in range(subscribers):
        epoch = rng.randrange(3)
        for r in members[epoch]:
            rows.append((f"rg-{s}", r.segment_id, rng.randrange(0, 10_000)))
    return rows


def bench_lower_bound(spark, rounds: int) -> None:
    records = three_epochs()
    segments = spark.createDataFrame(
        [(r.segment_id, r.segment_number, r.creation_epoch, r.key_start, r.key_end, r.creation_time,
          r.sealed_epoch, r.sealed_size) for r in records], SEGMENTS_SCHEMA).cache()
    segments.count()
    warm = spark.createDataFrame(subscriber_rows(records, 100), "subscriber string, segment_id long, offset long")
    for _ in range(3):
        lower_bound_cut(warm, segments=segments, stream="bench/lb")  # JIT and plan warm-up
    cuts = {}
    for n in (10, 1_000, 10_000):
        cuts[n] = spark.createDataFrame(subscriber_rows(records, n), "subscriber string, segment_id long, offset long")
        cuts[n] = cuts[n].cache()
        cuts[n].count()

    def bound(n: int):
        def run(r: int) -> None:
            result = lower_bound_cut(cuts[n], segments=segments, stream="bench/lb")
            assert len(result.positions) > 0
        return run

    out = alternate(("1,000 subscribers", bound(1_000)),
                    [("10 subscribers", bound(10)), ("10,000 subscribers", bound(10_000))],
                    rounds=rounds, label="lower bound", orientation=COST, report=False)
    out["10,000 subscribers"].report("  ")
    fixed = out["10 subscribers"].times["10 subscribers"]
    t1k, t10k = out["10,000 subscribers"].times["1,000 subscribers"], out["10,000 subscribers"].times["10,000 subscribers"]
    Ratios("lower bound: growth 10,000 / 1,000 subscribers beyond the fixed overhead (the round's 10-subscriber time)",
           [max(b - f, 1e-9) / max(a - f, 1e-9) for a, b, f in zip(t1k, t10k, fixed, strict=True)], COST, 2.0,
           "ratio = (10,000 s - 10 s) / (1,000 s - 10 s), < 1: 10,000 cheaper", show_rounds=True).report("  ")
    for n in cuts.values():
        n.unpersist()


def truncation_with_deletes(manager, name: str, deleted: int) -> tuple[float, int, int]:
    """A stream whose first ``deleted`` segments are sealed (each with one event), then truncated
    past them: returns (seconds, data files rewritten, files removed)."""
    spark = manager.spark
    manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    writer = manager.create_event_writer("bench", name)
    store = manager.controller.store
    # seal `deleted` segments in bulk: each split-merge pair is one scale's worth of history
    records = store.segment_records("bench", name)
    latest = store.stream_record("bench", name)
    for _ in range(deleted):
        (current,) = epoch_members(records, max(r.creation_epoch for r in records))
        plan = plan_scale(records, [current.segment_id], [(0.0, 1.0)], 1,
                          latest.creation_time + timedelta(seconds=current.creation_epoch + 1))
        records = apply_transition(records, plan, {current.segment_id: 0})
    latest = store.stream_record("bench", name)
    store.compare_and_set_stream(latest, latest.transition("ACTIVE", latest.update_time,
                                                           current_epoch=max(r.creation_epoch for r in records)),
                                 records)
    # one file per sealed segment, so a whole-segment delete removes `deleted` files
    sealed = [r.segment_id for r in records if r.sealed_epoch is not None]
    rows = [(sid, 0, 0, 0, 0, 1, None, None, None, latest.update_time, None) for sid in sealed]
    (spark.createDataFrame(rows, EVENTS_SCHEMA)
     .repartition(len(sealed), "segment_id").write.format("delta").mode("append")
     .partitionBy(*EVENTS_PARTITIONS).save(store.events_path("bench", name)))
    writer.write_event(b"x" * 100, routing_key="k")
    cut = manager.tail_stream_cut("bench", name)
    t = time.perf_counter()
    manager.truncate_stream("bench", name, cut)
    elapsed = time.perf_counter() - t
    history = DeltaTable.forPath(spark, store.events_path("bench", name)).history().where("operation = 'DELETE'")
    rewritten = removed = 0
    for row in history.collect():
        rewritten += int(row.operationMetrics.get("numAddedFiles", "0"))
        removed += int(row.operationMetrics.get("numRemovedFiles", "0"))
    return elapsed, rewritten, removed


def bench_truncation(spark, root: str, rounds: int) -> None:
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    files = {1: [], 100: []}

    def truncation(deleted: int):
        def run(r: int) -> float:
            elapsed, rewritten, removed = truncation_with_deletes(manager, f"t{deleted}-{r}", deleted)
            files[deleted].append((rewritten, removed))
            return Seconds(elapsed)
        return run

    alternate(("deleting 1 sealed segment", truncation(1)), ("deleting 100 sealed segments", truncation(100)),
              rounds=rounds, label="truncation", orientation=COST, targets=2.0)
    rewritten = sum(x[0] for runs in files.values() for x in runs)
    print(f"  files removed per truncation: deleting 1: {sorted({x[1] for x in files[1]})}, deleting 100: "
          f"{sorted({x[1] for x in files[100]})}; data files rewritten in all runs: {rewritten} (target 0: "
          f"{'met' if rewritten == 0 else 'not met'})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="/tmp/pravega-bench-retention")
    p.add_argument("--skip-lower-bound", action="store_true")
    p.add_argument("--skip-truncation", action="store_true")
    p.add_argument("--rounds", type=int, default=5, help="rounds after a warm-up round")
    a = p.parse_args(argv)
    shutil.rmtree(a.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "4"})
    if not a.skip_lower_bound:
        print("subscribers' lower bound")
        bench_lower_bound(spark, a.rounds)
    if not a.skip_truncation:
        print("truncation (fresh streams each round)")
        bench_truncation(spark, a.root, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
