"""Retention costs: the subscribers' lower bound at scale, and truncation vs segments deleted.

    .venv/bin/python bench/retention.py [--root /tmp/pravega-bench-retention] [--skip-lower-bound]
                                        [--skip-truncation]

Prints, in the same process:
  1. the lower bound over N subscriber cuts x 64 segments, the cuts spread over 3 epochs, for
     N = 10, 1,000 and 10,000 (best of 3 each), and the growth 10,000 / 1,000
     (target: under 2x per 10x more subscribers beyond the fixed job overhead, the N = 10 time);
  2. a truncation that deletes 100 sealed segments vs one that deletes 1 (best of 3 fresh streams
     each; target: under 2x), with the data files each rewrote (target: 0).
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
from pravega_spark.scaling import apply_transition, plan_scale
from pravega_spark.schema import EVENTS_PARTITIONS, EVENTS_SCHEMA, SEGMENTS_SCHEMA
from pravega_spark.segments import epoch_members, initial_segments
from pravega_spark.subscribers import lower_bound_cut

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


def timed(fn, repeat: int = 3):
    best, result = None, None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def bench_lower_bound(spark) -> None:
    records = three_epochs()
    segments = spark.createDataFrame(
        [(r.segment_id, r.segment_number, r.creation_epoch, r.key_start, r.key_end, r.creation_time,
          r.sealed_epoch, r.sealed_size) for r in records], SEGMENTS_SCHEMA).cache()
    segments.count()
    warm = spark.createDataFrame(subscriber_rows(records, 100), "subscriber string, segment_id long, offset long")
    for _ in range(3):
        lower_bound_cut(warm, segments=segments, stream="bench/lb")  # JIT and plan warm-up
    times = {}
    for n in (10, 1_000, 10_000):
        cuts = spark.createDataFrame(subscriber_rows(records, n), "subscriber string, segment_id long, offset long")
        cuts = cuts.cache()
        cuts.count()
        times[n], bound = timed(lambda c=cuts: lower_bound_cut(c, segments=segments, stream="bench/lb"))
        cuts.unpersist()
        print(f"  {n:6,d} subscribers x {SEGMENTS} segments ({n * SEGMENTS:9,d} cut rows): "
              f"{times[n] * 1000:8.1f} ms, lower bound of {len(bound.positions)} segments")
    print(f"  growth 10,000 / 1,000 subscribers: {times[10_000] / times[1_000]:.2f}x "
          f"(beyond the {times[10] * 1000:.0f} ms fixed overhead: "
          f"{max(times[10_000] - times[10], 1e-9) / max(times[1_000] - times[10], 1e-9):.2f}x; target < 2x)")


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
    store.merge_segments("bench", name, records)
    latest = store.stream_record("bench", name)
    store.compare_and_set_stream(latest, latest.transition("ACTIVE", latest.update_time,
                                                           current_epoch=max(r.creation_epoch for r in records)))
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


def bench_truncation(spark, root: str, rounds: int = 3) -> None:
    manager = ps.StreamManager(spark, root)
    manager.create_scope("bench")
    truncation_with_deletes(manager, "warm", 1)
    results = {1: [], 100: []}
    for r in range(rounds):
        for deleted in (1, 100):
            results[deleted].append(truncation_with_deletes(manager, f"t{deleted}-{r}", deleted))
    for deleted, runs in results.items():
        best = min(runs)
        print(f"  truncation deleting {deleted:3d} sealed segments: {best[0]:6.2f} s "
              f"(files removed {best[2]}, data files rewritten {best[1]})")
    ratio = min(results[100])[0] / min(results[1])[0]
    rewritten = sum(x[1] for runs in results.values() for x in runs)
    print(f"  ratio 100 / 1 segments: {ratio:.2f}x (target < 2x); data files rewritten in all runs: {rewritten}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="/tmp/pravega-bench-retention")
    p.add_argument("--skip-lower-bound", action="store_true")
    p.add_argument("--skip-truncation", action="store_true")
    a = p.parse_args(argv)
    shutil.rmtree(a.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "4"})
    if not a.skip_lower_bound:
        print("subscribers' lower bound (best of 3)")
        bench_lower_bound(spark)
    if not a.skip_truncation:
        print("truncation (best of 3 fresh streams each)")
        bench_truncation(spark, a.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
