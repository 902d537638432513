"""``read_stream`` into a Delta sink vs Delta's own ``readStream`` of the same events table into
the same kind of sink, and the latency from a commit to the event's arrival.

    .venv/bin/python bench/streaming.py [--events 1000000] [--size 200] [--rounds 3] [--latency 20]

Drain: 1,000,000 events of ~200 B over 4 segments, one ``availableNow`` query from a new
checkpoint into a new Delta table, alternating ``read_stream`` (its columns, through
``spark.readStream.format("delta")`` on the events table (event rows, ``base_offset +
rel_offset`` as the offset, the same columns), both into the same sink: a Delta table written
through ``idempotent_delta_sink`` (``foreachBatch``). Issue
#19's target: >= 0.8x. Latency: a ``processingTime`` 1 s query into a ``foreachBatch`` that
notes each batch's arrival time; the clock starts when ``write_event`` returns (median and p95).
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
from bench._common import fresh_store, source

SCOPE, STREAM = "bench", "stream"


def drain_ours(manager, out: str) -> float:
    start = time.perf_counter()
    query = (manager.read_stream(SCOPE, STREAM).writeStream
             .foreachBatch(ps.idempotent_delta_sink(f"{out}/sink", "bench"))
             .option("checkpointLocation", f"{out}/ck").trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - start


def drain_raw(manager, out: str) -> float:
    path = f"{manager.root}/{SCOPE}/{STREAM}/events"
    start = time.perf_counter()
    events = (manager.spark.readStream.format("delta").load(path).where(F.col("record_type") == 0)
              .select(F.lit(SCOPE).alias("scope"), F.lit(STREAM).alias("stream"), "segment_id",
                      (F.col("base_offset") + F.col("rel_offset")).alias("offset"), "event", "routing_key",
                      "writer_id", "write_time"))
    query = (events.writeStream.foreachBatch(ps.idempotent_delta_sink(f"{out}/sink", "bench"))
             .option("checkpointLocation", f"{out}/ck").trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - start


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
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--latency", type=int, default=20)
    p.add_argument("--root", default="/tmp/bench-streaming")
    a = p.parse_args()
    manager = fresh_store(a.root, SCOPE)
    spark = manager.spark
    manager.create_stream(SCOPE, STREAM, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    manager.create_event_writer(SCOPE, STREAM, "bench").write_events(source(spark, a.events, a.size))
    times = {"read_stream": [], "raw": []}
    for r in range(a.rounds + 1):  # the first round warms up
        for name, fn in (("raw", drain_raw), ("read_stream", drain_ours)):
            out = f"{a.root}/{name}-{r}"
            seconds = fn(manager, out)
            rows = spark.read.format("delta").load(f"{out}/sink").count()
            assert rows == a.events, (name, rows)
            if r:
                times[name].append(seconds)
            print(f"round {r} {name}: {seconds:.2f} s ({rows} events)", flush=True)
    ours, raw = statistics.median(times["read_stream"]), statistics.median(times["raw"])
    print(f"drain of {a.events} events: read_stream {ours:.2f} s, Delta readStream {raw:.2f} s: "
          f"{raw / ours:.2f}x (medians of {a.rounds}; target >= 0.8x)")
    if a.latency:
        lat = latency(manager, a.root, a.latency)
        p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
        print(f"commit-to-arrival latency, processingTime 1 s, {len(lat)} events: median "
              f"{statistics.median(lat) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")


if __name__ == "__main__":
    main()
