"""Auto-scaling job: apply every stream's by-rate scaling policy once (Pravega's auto-scaler).

    python jobs/autoscale.py --root DIR [--scope S [--stream T]] [--bucket I --buckets N]
                             [--now 2026-01-01T00:00:00Z]
    spark-submit ... jobs/autoscale.py --root s3a://lake/pravega --bucket 0 --buckets 4

Run it every minute or so (Pravega's segment stores report at most every 2 minutes). Each run
measures every open segment's rates over the last 20 minutes from the events tables' logs,
splits hot segments and merges cold neighbours with Pravega's rules, and logs each scale with
the rates behind it. ``conf/autoscale.json``: ``cooldown_seconds`` (600: a segment younger than
this is left alone) and ``mute_seconds`` (600: the quiet time after a request), Pravega's
``AutoScalerConfig`` defaults; ``buckets`` lets n instances share a store. Streams with a fixed
policy are never touched.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from jobs._common import Progress, load_conf, parse_now, setup_logging, stream_names


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="store root (any Hadoop path)")
    parser.add_argument("--conf", default=None, help="JSON config (default conf/autoscale.json)")
    parser.add_argument("--scope", default=None)
    parser.add_argument("--stream", default=None)
    parser.add_argument("--bucket", type=int, default=0)
    parser.add_argument("--buckets", type=int, default=None, help="default from the config (1)")
    parser.add_argument("--now", default=None, help="ISO time the run takes as now (default: the clock)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("autoscale", args.conf)
    spark = ps.spark_session()
    manager = ps.StreamManager(spark, args.root)
    names = stream_names(manager, args.scope, args.stream)
    progress = Progress("autoscale", len(names))
    outcomes = []
    for scope, stream in names:
        try:
            found = manager.run_autoscale(scope, stream, parse_now(args.now), bucket=args.bucket,
                                          buckets=args.buckets or conf.get("buckets", 1),
                                          cooldown=timedelta(seconds=conf.get("cooldown_seconds", 600)),
                                          mute=timedelta(seconds=conf.get("mute_seconds", 600)))
        except ps.PravegaSparkError as exc:
            progress.step(f"{scope}/{stream}", f"FAILED: {type(exc).__name__}: {exc}", failed=True)
            continue
        outcomes += found
        if not found:
            progress.step(f"{scope}/{stream}", "not scaled by rate (or another bucket's)")
        for o in found:
            hot = max(o.rates.items(), key=lambda kv: kv[1].r2, default=None)
            progress.step(f"{o.scope}/{o.stream}", f"{len(o.rates)} open segments, busiest "
                          f"{f'{hot[0]} ({hot[1]})' if hot else 'none'}; {o!r}")
    progress.summary(f"autoscale: {len(outcomes)} streams by rate, {sum(len(o.scaled) for o in outcomes)} scales, "
                     f"{sum(len(o.skipped) for o in outcomes)} skipped")
    log.debug("autoscale job done")
    return 1 if progress.failures else 0


if __name__ == "__main__":
    sys.exit(main())
