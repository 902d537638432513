"""``read_stream`` vs Delta's own ``readStream`` of the same events table into the same kind of sink,
the per-batch cost of the head in the library's sink, and the latency from a commit to arrival.

    .venv/bin/python bench/streaming.py [--events 1000000] [--size 200] [--rounds 5] [--latency 20]
    .venv/bin/python bench/streaming.py --connect   # the drains over Spark Connect (issue #46)

Drain: 1,000,000 events of ~200 B over 4 segments, one ``availableNow`` query from a new
checkpoint into a new Delta table. Two pairs, each alternating the raw query and ours for
``--rounds`` rounds after a warm-up round (``bench/_common.alternate``); the measure is the
median of the per-round ratios (Delta's readStream seconds / ours: > 1 means ours is faster),
printed with min and max:
- ``read_stream(head="sink")`` into ``ps.idempotent_delta_sink`` (``foreachBatch``) vs
  ``spark.readStream.format("delta")`` on the events table (event rows, ``base_offset +
  rel_offset`` as the offset, the same columns) into the same sink. Issue #31's target: median
  >= 0.9x.
- ``read_stream`` (``head="plan"``: the head subquery in the plan) into a plain Delta sink
  (``writeStream.format("delta")``) vs the raw ``readStream`` into the same kind of sink. Reported.
Head: after a truncation (a non-empty head), a ``processingTime`` query under ``ps.foreach_batch``
gets ``--latency`` small batches; the time from the wrapper's start to the function's is the head's
cost per batch (reading it on the driver and filtering). Target <= 20 ms.
Latency: a ``processingTime`` 1 s query into a ``foreachBatch`` that notes each batch's arrival
time; the clock starts when ``write_event`` returns (median and p95).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import Seconds, alternate, connect_server, fresh_store, source
from pravega_spark import _delta

SCOPE, STREAM = "bench", "stream"


def into(events, out: str, plain: bool):
    writer = events.writeStream.option("checkpointLocation", f"{out}/ck").trigger(availableNow=True)
    if plain:
        return writer.format("delta").start(f"{out}/sink")
    return writer.foreachBatch(ps.idempotent_delta_sink(f"{out}/sink", "bench")).start()


def drain_ours(manager, out: str, plain: bool = False) -> float:
    """Our drain: into the foreachBatch sink with ``head="sink"`` (over Spark Connect too, where the
    sink reads the head on the server), into a plain Delta sink with ``head="plan"``."""
    start = time.perf_counter()
    head = "plan" if plain else "sink"
    into(manager.read_stream(SCOPE, STREAM, head=head), out, plain).awaitTermination()
    return time.perf_counter() - start


def drain_raw(manager, out: str, plain: bool = False) -> float:
    path = f"{manager.root}/{SCOPE}/{STREAM}"
    start = time.perf_counter()
    events = (manager.spark.readStream.format("delta").load(path).where(F.col("record_type") == 0)
              .select(F.lit(SCOPE).alias("scope"), F.lit(STREAM).alias("stream"), "segment_id",
                      (F.col("base_offset") + F.col("rel_offset")).alias("offset"), "event", "routing_key",
                      "writer_id", "write_time"))
    into(events, out, plain).awaitTermination()
    return time.perf_counter() - start


def head_cost(manager, out: str, batches: int) -> list[float]:
    """Per batch, the seconds from ``ps.foreach_batch``'s start to the wrapped function's start."""
    marks: dict[int, float] = {}
    costs: list[float] = []
    inner = ps.foreach_batch(lambda df, batch_id: costs.append(time.perf_counter() - marks[batch_id]))

    def outer(df, batch_id):
        marks[batch_id] = time.perf_counter()
        inner(df, batch_id)

    manager.truncate_stream(SCOPE, STREAM, manager.tail_stream_cut(SCOPE, STREAM))  # a head to apply
    query = (manager.read_stream(SCOPE, STREAM, start="latest", head="sink").writeStream.foreachBatch(outer)
             .option("checkpointLocation", f"{out}/ck-head").trigger(processingTime="500 milliseconds").start())
    writer = manager.create_event_writer(SCOPE, STREAM, "head")
    try:
        while len(costs) < batches:
            writer.write_event(b"head", routing_key=f"k{len(costs)}")
            time.sleep(0.6)
    finally:
        query.stop()
    return costs


def latency(manager, out: str, samples: int) -> list[float]:
    arrivals: dict[str, float] = {}
    lock = threading.Lock()

    def note(df, batch_id):
        now = time.time()
        for r in df.select("event").collect():
            with lock:
                arrivals.setdefault(bytes(r.event).decode(), now)

    query = (manager.read_stream(SCOPE, STREAM, start="latest").writeStream.foreachBatch(note)
             .option("checkpointLocation", f"{out}/ck-latency").trigger(processingTime="1 second").start())
    writer = manager.create_event_writer(SCOPE, STREAM, "latency")
    sent = {}
    try:
        time.sleep(3)
        for i in range(samples):
            writer.write_event(f"lat-{i}".encode(), routing_key=f"k{i}")
            sent[f"lat-{i}"] = time.time()
            while f"lat-{i}" not in arrivals:
                time.sleep(0.01)
            time.sleep(0.37)  # land at different points of the trigger interval
    finally:
        query.stop()
    return sorted(arrivals[k] - t for k, t in sent.items())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--latency", type=int, default=20)
    p.add_argument("--root", default="/tmp/bench-streaming")
    p.add_argument("--connect", action="store_true",
                   help="on a Spark Connect session (SPARK_REMOTE, else a local server started for the run): the drains only")
    a = p.parse_args()
    if a.connect:
        a.latency = 0  # the head and latency clocks run in foreachBatch functions, on the server there
        with connect_server():
            return run(a)
    return run(a)


def run(a) -> None:
    manager = fresh_store(a.root, SCOPE)
    spark = manager.spark
    manager.create_stream(SCOPE, STREAM, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    manager.create_event_writer(SCOPE, STREAM, "bench").write_events(source(spark, a.events, a.size))
    classic = _delta.foreach_batch_here(spark)
    pairs = {"foreachBatch": ("read_stream head=sink", 0.9 if classic else 0.8),
             "plain Delta sink": ("read_stream head=plan", None)}
    for kind, (ours_name, target) in pairs.items():
        plain = kind != "foreachBatch"

        def drain(fn, name, plain=plain, kind=kind):
            def run(r: int) -> float:
                out = f"{a.root}/{kind.replace(' ', '-')}-{name.replace(' ', '-').replace('=', '-')}-{r}"
                seconds = fn(manager, out, plain)
                rows = spark.read.format("delta").load(f"{out}/sink").count()
                assert rows == a.events, (name, rows)
                return Seconds(seconds)
            return run

        print(f"drain of {a.events:,} events into a {kind}:", flush=True)
        alternate(("Delta readStream", drain(drain_raw, "raw")), (ours_name, drain(drain_ours, ours_name)),
                  rounds=a.rounds, label=kind, targets=target)
    if a.latency:
        costs = head_cost(manager, a.root, a.latency)
        med = statistics.median(costs) * 1000
        print(f"head applied by the library's sink, {len(costs)} batches: median {med:.1f} ms (min "
              f"{min(costs) * 1000:.1f} ms, max {max(costs) * 1000:.1f} ms); target <= 20 ms "
              f"{'met' if med <= 20 else 'not met'} (on the median)")
    if a.latency:
        lat = latency(manager, a.root, a.latency)
        p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
        print(f"commit-to-arrival latency, processingTime 1 s, {len(lat)} events: median "
              f"{statistics.median(lat) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
    spark.stop()  # before Python exits: the listener bus must not call back into a gone process


if __name__ == "__main__":
    main()
