"""Auto-scaling demo: a hot key range gets split while the demo writes, then merges back when the
load moves away. Fifty minutes of traffic are simulated in about a minute.

    python jobs/autoscale_demo.py [--root DIR] [--minutes 50]

The stream has policy ``by_event_rate(20, 2, 2)`` (20 events/s per segment, split in 2 at most,
2 segments at least). For 13 minutes devices in the key range [0, 0.25) send 100 events/s
and a few others 5 events/s; then the hot devices go quiet. The auto-scaler runs every 2 minutes
(Pravega's segment stores report at most that often): once the first segment is past its 10
minutes of cooldown it is split in two; 20 minutes after that split the two halves have been
cold long enough and merge back. The demo prints each run's scales and the epochs before and
after, and exits 0 when both scales happened and every event was read back once, in order per
device.

Simulated time: the store's clock (commit and epoch times) is moved forward by the demo through
an internal seam of the library (``pravega_spark._delta.set_clock``), because Pravega's rules need
minutes of real traffic. Applications never set it: ``run_autoscale`` uses the wall clock.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import Window
from pyspark.sql import functions as F

import pravega_spark as ps
from jobs._common import setup_logging
from pravega_spark import _delta

SCOPE, STREAM = "demo", "autoscale"
STEP = timedelta(minutes=1)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="store/autoscale-demo", help="store root (any Hadoop path)")
    parser.add_argument("--minutes", type=int, default=50, help="simulated minutes")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def keys_in(spark, lo: float, hi: float, n: int) -> list[str]:
    """``n`` device ids whose key-space position is in ``[lo, hi)``."""
    ids = spark.range(0, 400 * n).select(F.concat(F.lit("dev-"), F.col("id").cast("string")).alias("k"))
    return [r.k for r in ids.where((ps.key_position("k") >= lo) & (ps.key_position("k") < hi)).limit(n).collect()]


def epochs_text(manager) -> str:
    """Each epoch's segments as key ranges, one line per epoch."""
    ranges = {r.segment_id: (r.key_start, r.key_end) for r in manager.segments(SCOPE, STREAM).collect()}
    lines = []
    for e in manager.epochs(SCOPE, STREAM).orderBy("epoch").collect():
        spans = sorted(ranges[s] for s in e.segment_ids)
        lines.append(f"  epoch {e.epoch} ({e.creation_time:%H:%M}): " + " ".join(f"[{a:.3f}, {b:.3f})" for a, b in spans))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    spark = ps.spark_session()
    shutil.rmtree(args.root, ignore_errors=True)
    manager = ps.StreamManager(spark, args.root)
    started = time.perf_counter()
    clock = datetime.now(timezone.utc)
    _delta.set_clock(lambda: clock.timestamp())  # simulated time (see the module docstring)
    try:
        manager.create_scope(SCOPE)
        manager.create_stream(SCOPE, STREAM, ps.StreamConfiguration(
            scaling_policy=ps.ScalingPolicy.by_event_rate(20, 2, 2)))
        hot, cool = keys_in(spark, 0.0, 0.25, 8), keys_in(spark, 0.5, 1.0, 8)
        print("epochs before:\n" + epochs_text(manager))
        writer = manager.create_event_writer(SCOPE, STREAM, "devices")
        seq: dict[str, int] = {}
        scales = []
        for minute in range(1, args.minutes + 1):
            clock += STEP
            rows = []
            for keys, per_minute in ((hot, 6000 if minute <= 13 else 0), (cool, 300)):
                for i in range(per_minute):
                    k = keys[i % len(keys)]
                    rows.append((k, f'{{"seq": {seq.get(k, 0)}, "minute": {minute}}}'))
                    seq[k] = seq.get(k, 0) + 1
            writer.write_events(spark.createDataFrame(rows, "routing_key string, event string"))
            if minute % 2 == 0:
                [outcome] = manager.run_autoscale(SCOPE, STREAM, now=clock)
                for request, epoch in outcome.scaled:
                    scales.append(request.direction)
                    print(f"minute {minute}: scale {request.direction} of {list(request.sealed)} -> epoch {epoch}: "
                          f"{request.reason}")
    finally:
        _delta.set_clock(None)
    print("epochs after:\n" + epochs_text(manager))
    events = manager.read_events(SCOPE, STREAM)
    per_key = Window.partitionBy("routing_key").orderBy("segment_id", "offset")
    late = (events.withColumn("seq", F.get_json_object(F.col("event").cast("string"), "$.seq").cast("long"))
            .withColumn("expected", F.row_number().over(per_key) - 1).where("seq != expected").count())
    count, written = events.count(), sum(seq.values())
    ok = "up" in scales and "down" in scales and late == 0 and count == written
    log.info("autoscale demo: %d events written, %d read, %d out of order, scales %s, %.0f s", written, count, late,
             scales, time.perf_counter() - started)
    print(f"RESULT: {'OK' if ok else 'FAILED'}: {len(scales)} scales ({', '.join(scales)}), {count} of {written} "
          f"events read back, {late} out of order per device")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
