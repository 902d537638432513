"""Watermark job: Pravega's periodic watermarking over every stream's writer marks.

    python jobs/watermarks.py --root DIR [--scope S [--stream T]] [--now 2026-01-01T00:00:00Z]
                              [--rounds N] [--interval-seconds S]
    spark-submit ... jobs/watermarks.py --root s3a://lake/pravega --rounds 0   # run until stopped

Each round, per stream: writers whose noted time passed the last watermark participate; a silent
writer blocks new watermarks until it is shut down (``writer.close()``) or has been stale for the
stream's ``timestamp_aggregation_timeout``, then it is removed; when every active writer
participates, a watermark (min and max time, and a stream cut bounding their positions) is
emitted. ``--rounds 0`` loops forever, every ``interval_seconds`` (``conf/watermarks.json``,
10 s as in Pravega).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from jobs._common import load_conf, parse_now, setup_logging


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="store root (any Hadoop path)")
    parser.add_argument("--conf", default=None, help="JSON config (default conf/watermarks.json)")
    parser.add_argument("--scope", default=None)
    parser.add_argument("--stream", default=None)
    parser.add_argument("--now", default=None, help="ISO time the round takes as now (default: the clock)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds to run; 0 = until stopped (default 1)")
    parser.add_argument("--interval-seconds", type=float, default=None)
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("watermarks", args.conf)
    rounds = args.rounds if args.rounds is not None else conf.get("rounds", 1)
    interval = args.interval_seconds if args.interval_seconds is not None else conf.get("interval_seconds", 10)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    done = emitted = 0
    while rounds == 0 or done < rounds:
        started = time.monotonic()
        out = manager.compute_watermarks(args.scope, args.stream, parse_now(args.now))
        for name, watermark in sorted(out.items()):
            log.info("%s: emitted %r", name, watermark)
        done += 1
        emitted += len(out)
        if rounds == 0 or done < rounds:
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    print(f"watermarks: {done} rounds, {emitted} watermarks emitted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
