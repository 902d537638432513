"""What a stopped streaming query keeps on a Spark Connect server (issue #49).

    .venv/bin/python bench/stopped_queries.py [--queries 5] [--events 1000]

Spark Connect's server keeps every streaming query a client started, with its last plan, its
sources and its sink, for an hour after the query stops (``SparkConnectStreamingQueryCache``'s
``stoppedQueryInactivityTimeout``: not a setting in Spark 4.1). This bench starts a Connect
server of its own (``scripts/connect_server.sh``, 1 GiB as the soak's), then alternates two kinds of
``availableNow`` queries, each reading a table of its own into a Delta sink of its own (as a
long-lived server sees them: new tables, not ones the log cache still holds):

- ``plain delta``: ``readStream`` of a plain Delta table of ``--events`` rows;
- ``read_stream``: ``StreamManager.read_stream`` of a new stream with ``--events`` events.

Then it dumps the server's heap and prints, for each kind, what each stopped query alone keeps
alive (its retained size, ``bench/hprof.py``): the median with min and max.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=5, help="queries of each kind")
    parser.add_argument("--events", type=int, default=1000, help="rows or events in each query's source")
    args = parser.parse_args()
    from bench._common import connect_server

    os.environ.pop("SPARK_REMOTE", None)  # a server of its own: its heap is what is read
    with tempfile.TemporaryDirectory() as work:
        os.environ["CONNECT_SERVER_DIR"] = f"{work}/server"
        with connect_server(memory="1g") as remote:
            run(remote, int(Path(work, "server", "pid").read_text()), work, args.queries, args.events)


def run(remote: str, pid: int, work: str, queries: int, events: int) -> None:
    from pyspark.sql import SparkSession

    import pravega_spark as ps
    from bench.hprof import STREAMING_QUERY, HeapDump

    spark = SparkSession.builder.remote(remote).getOrCreate()

    def plain(i: int) -> None:
        source = f"{work}/plain-{i}"
        spark.range(events).selectExpr("id", "cast(id as string) as v").write.format("delta").save(source)
        (spark.readStream.format("delta").load(source).writeStream.format("delta")
         .option("checkpointLocation", f"{work}/plain-ck-{i}").trigger(availableNow=True)
         .start(f"{work}/plain-out-{i}").awaitTermination())

    def ours(i: int) -> None:
        manager = ps.StreamManager(spark, f"{work}/store-{i}")
        manager.create_scope("s")
        manager.create_stream("s", "t", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
        manager.create_event_writer("s", "t", "w").write_events(
            spark.range(events).selectExpr("cast(id % 7 as string) as routing_key", "cast(id as string) as event"))
        (manager.read_stream("s", "t").writeStream.format("delta")
         .option("checkpointLocation", f"{work}/ours-ck-{i}").trigger(availableNow=True)
         .start(f"{work}/ours-out-{i}").awaitTermination())

    try:
        for i in range(queries):
            plain(i)
            ours(i)
            print(f"[stopped-queries] round {i + 1}/{queries}: one query of each kind ran and stopped", flush=True)
    finally:
        spark.stop()  # before the server stops: else the client's listener thread retries it for good
    dump = f"{work}/server.hprof"
    subprocess.run(["jcmd", str(pid), "GC.heap_dump", dump], check=True, capture_output=True, timeout=600)
    heap = HeapDump(dump)
    kept: dict[str, list[float]] = {"plain delta": [], "read_stream": []}
    for row, mib in heap.retained_each_mib(STREAMING_QUERY):
        checkpoint = heap.string(heap.field(heap.field(row, "_streamingQuery"), "resolvedCheckpointRoot")) or ""
        kept["plain delta" if "/plain-ck-" in checkpoint else "read_stream"].append(mib)
    print(f"server: {heap.live_mib():.0f} MiB reachable after {2 * queries} stopped queries")
    for kind, values in kept.items():
        print(f"{kind:12s} {len(values)} stopped queries, each keeps {statistics.median(values):.2f} MiB "
              f"(min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
