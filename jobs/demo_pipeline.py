"""Demo pipeline: ingest device telemetry into a stream, scale its hottest segment mid-way,
read everything back, check per-key order, and print a summary.

    python jobs/demo_pipeline.py [--root DIR] [--conf conf/demo.json]
    spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0 \
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
        jobs/demo_pipeline.py --root /tmp/pravega-demo

Exit status 0 when every event was read back exactly once and in order per device.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

import pravega_spark as ps
from jobs._common import load_conf, setup_logging
from pravega_spark.stream.scaling import split_ranges

TELEMETRY_SCHEMA = ("device_id string, seq long, ts timestamp, site string, firmware string, "
                    "temperature_c double, humidity_pct double, battery_pct double, status string")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="store/demo", help="store root (any Hadoop path)")
    parser.add_argument("--conf", default=None, help="JSON config (default conf/demo.json)")
    parser.add_argument("--data", default=None, help="telemetry JSONL (default from the config)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def batches(readings: DataFrame, count: int) -> list[DataFrame]:
    """Split the readings into ``count`` consecutive time slices."""
    bounds = readings.select(F.min("ts").cast("double"), F.max("ts").cast("double")).first()
    lo, hi = bounds[0], bounds[1] + 1
    step = (hi - lo) / count
    return [readings.where((F.col("ts").cast("double") >= lo + i * step)
                           & (F.col("ts").cast("double") < lo + (i + 1) * step)) for i in range(count)]


def order_violations(events: DataFrame) -> int:
    """Events whose device sequence number does not follow the previous one in read order."""
    per_key = Window.partitionBy("routing_key").orderBy("segment_id", "offset")
    return (events.withColumn("seq", F.get_json_object(F.col("event").cast("string"), "$.seq").cast("long"))
            .withColumn("expected", F.row_number().over(per_key) - 1)
            .where(F.col("seq") != F.col("expected")).count())


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("demo", args.conf)
    scope, stream = conf["scope"], conf["stream"]
    started = time.monotonic()
    spark = ps.spark_session()
    manager = ps.StreamManager(spark, args.root)
    log.info("store %s (master=%s)", manager.root, spark.sparkContext.master)

    manager.create_scope(scope)
    if manager.check_stream_exists(scope, stream):
        log.info("removing the previous run's stream %s/%s", scope, stream)
        manager.seal_stream(scope, stream)
        manager.delete_stream(scope, stream)
    manager.create_stream(scope, stream, ps.StreamConfiguration(
        scaling_policy=ps.ScalingPolicy.fixed(conf["initial_segments"]), tags=["demo"]))

    data = args.data or str(Path(__file__).resolve().parent.parent / conf["data"])
    readings = spark.read.schema(TELEMETRY_SCHEMA).json(data)
    payloads = readings.select("device_id", "ts", F.to_json(F.struct(*readings.columns)).alias("payload"))
    total = readings.count()
    writer = manager.create_event_writer(scope, stream, writer_id="demo-ingest")
    for i, batch in enumerate(batches(payloads, conf["batches"]), start=1):
        result = writer.write_events(batch, routing_key="device_id", event="payload", order_by="ts")
        log.info("batch %d/%d: %d events, %d bytes, version %s, tail %s", i, conf["batches"],
                 result.event_count, result.byte_count, result.version, result.tail_stream_cut)
        if i == conf["scale_after_batch"]:
            hot_id, hot_bytes = max(result.tail_stream_cut.positions.items(), key=lambda kv: kv[1])
            hot = manager.segments(scope, stream).where(F.col("segment_id") == hot_id).first()
            epoch = manager.scale_stream(scope, stream, [hot_id],
                                         split_ranges(hot.key_start, hot.key_end, 2))
            log.info("scaled hot segment %d (%d bytes) into 2: epoch %d", hot_id, hot_bytes, epoch)

    events = manager.read_events(scope, stream).cache()
    read = events.count()
    violations = order_violations(events)
    info = manager.stream_info(scope, stream)

    print(f"\n=== pravega-spark demo: {scope}/{stream} at {manager.root} ===")
    print(f"events ingested: {total}, read back: {read}, per-device order violations: {violations}")
    print("\nsegments per epoch:")
    for row in manager.epochs(scope, stream).collect():
        print(f"  epoch {row.epoch} ({row.creation_time:%H:%M:%S}): {row.segment_ids}")
    print("\nevents and bytes per segment:")
    per_segment = (events.groupBy("segment_id")
                   .agg(F.count("*").alias("events"), F.sum(F.length("event") + 8).alias("bytes")))
    segments = manager.segments(scope, stream).join(per_segment, "segment_id", "left").orderBy("segment_id")
    for s in segments.collect():
        state = f"sealed in epoch {s.sealed_epoch} at {s.sealed_size} B" if s.sealed_epoch is not None else "open"
        print(f"  {s.segment_number}.#epoch.{s.creation_epoch} [{s.key_start:.3f}, {s.key_end:.3f}) "
              f"{s.events or 0:6d} events {s.bytes or 0:9d} bytes  {state}")
    print(f"\nhead: {info.head_stream_cut}\ntail: {info.tail_stream_cut}")
    print(f"size: {info.size_bytes} bytes; took {time.monotonic() - started:.1f}s")
    events.unpersist()
    validation = manager.validate_stream(scope, stream)
    print(f"\ninvariants: {validation}")
    ok = read == total and violations == 0 and validation.success
    print("RESULT:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
