"""Control-plane latency: each StreamManager operation against a raw single-row Delta append.

In one process and one session: the median of ``--runs`` calls of each operation (a fresh stream
per run where the operation needs one), printed next to the median of a raw single-row blind
Delta append to a small table, and as a multiple of it. ``first write_events`` is a writer's
first write of 10 events; ``write_events`` is a write of 10 events by a writer that has written
before, from a DataFrame made of a Python list (an RDD whose size Spark does not know);
``write_events (local)`` the same from a pandas DataFrame (a local relation of known size, written
by one task without a shuffle).

Usage: ``.venv/bin/python bench/control_plane.py [--runs 5] [--root DIR]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pravega_spark as ps  # noqa: E402
from bench._common import timed  # noqa: E402

TARGETS = {"create_stream": 4.0, "scale_stream": 5.0, "truncate_stream": 5.0, "seal_stream": 5.0,
           "write_events": 1.5, "tail_stream_cut": 0.5, "stream_info": 0.5}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--root", default=None)
    args = parser.parse_args(argv)
    base = Path(args.root or tempfile.mkdtemp(prefix="pravega-spark-cp-"))
    shutil.rmtree(base, ignore_errors=True)
    spark = ps.spark_session(**{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    manager = ps.StreamManager(spark, str(base / "store"))
    raw_path = str(base / "raw")
    schema = "k string, v long"
    spark.createDataFrame([("a", 0)], schema).write.format("delta").save(raw_path)
    times: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    def events(n: int = 10):
        return spark.createDataFrame([(f"k{i}", b"x" * 100) for i in range(n)], "routing_key string, event binary")

    def one_run(run: int) -> None:
        raw_append = lambda: (spark.createDataFrame([("a", run)], schema)  # noqa: E731
                              .write.format("delta").mode("append").save(raw_path))
        record("raw append", timed(raw_append))
        scope = f"s{run}"
        record("create_scope", timed(lambda: manager.create_scope(scope)))
        record("create_stream", timed(lambda: manager.create_stream(
            scope, "t", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))))
        writer = manager.create_event_writer(scope, "t", writer_id=f"w{run}")
        batch = events()
        record("first write_events", timed(lambda: writer.write_events(batch)))
        record("write_events", timed(lambda: writer.write_events(batch)))
        local = spark.createDataFrame(batch.toPandas())  # a local relation: Spark knows its size
        record("write_events (local)", timed(lambda: writer.write_events(local)))
        record("raw append", timed(raw_append))
        manager.tail_stream_cut(scope, "t")
        record("tail_stream_cut", timed(lambda: manager.tail_stream_cut(scope, "t")))
        record("stream_info", timed(lambda: manager.stream_info(scope, "t")))
        cut = manager.tail_stream_cut(scope, "t")
        record("scale_stream", timed(lambda: manager.scale_stream(scope, "t", [1], [(0.5, 0.75), (0.75, 1.0)])))
        writer.write_events(batch)
        record("truncate_stream", timed(lambda: manager.truncate_stream(scope, "t", cut)))
        record("seal_stream", timed(lambda: manager.seal_stream(scope, "t")))
        record("delete_stream", timed(lambda: manager.delete_stream(scope, "t")))

    for run in range(args.runs):
        one_run(run)
        print(f"run {run + 1}/{args.runs} done", flush=True)

    raw = statistics.median(times["raw append"])
    print(f"\n{'operation':<20} {'median s':>9} {'x raw':>7} {'target':>8}")
    print(f"{'raw append':<20} {raw:>9.3f} {1.0:>7.2f}")
    for name, values in times.items():
        if name == "raw append":
            continue
        med = statistics.median(values)
        target = TARGETS.get(name)
        verdict = "" if target is None else f"<= {target:.1f} {'ok' if med / raw <= target else 'MISSED'}"
        print(f"{name:<20} {med:>9.3f} {med / raw:>7.2f} {verdict:>8}")
    spark.stop()
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
