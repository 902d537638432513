"""Retention job: apply every stream's retention policy once (Pravega's retention bucket service).

    python jobs/retention.py --root DIR [--scope S [--stream T]] [--bucket I --buckets N]
                             [--now 2026-01-01T00:00:00Z] [--frequency-minutes M] [--vacuum]
    spark-submit ... jobs/retention.py --root s3a://lake/pravega --bucket 0 --buckets 4

Each run records a tail cut in each stream's retention set when the newest record is older than
the frequency (``conf/retention.json``, 30 minutes out of the box), truncates where the stream's
time, size or consumption-based policy says, and logs what it truncated. ``--bucket i --buckets n``
lets n instances share a store: each takes the streams whose scoped name hashes to its bucket.
``--vacuum`` then removes the deleted files from storage (``vacuum_retention_hours`` in the conf;
null keeps the tables' own deleted-file retention window, 0 removes them now): each visited
stream's table, then the store's own tables once.
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
    parser.add_argument("--conf", default=None, help="JSON config (default conf/retention.json)")
    parser.add_argument("--scope", default=None)
    parser.add_argument("--stream", default=None)
    parser.add_argument("--bucket", type=int, default=0)
    parser.add_argument("--buckets", type=int, default=None, help="default from the config (1)")
    parser.add_argument("--now", default=None, help="ISO time the run takes as now (default: the clock)")
    parser.add_argument("--frequency-minutes", type=float, default=None)
    parser.add_argument("--vacuum", action="store_true", help="VACUUM the visited streams' tables afterwards")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("retention", args.conf)
    frequency = timedelta(minutes=args.frequency_minutes if args.frequency_minutes is not None
                          else conf.get("frequency_minutes", 30))
    buckets = args.buckets or conf.get("buckets", 1)
    spark = ps.spark_session()
    manager = ps.StreamManager(spark, args.root)
    names = stream_names(manager, args.scope, args.stream)
    progress = Progress("retention", len(names))
    outcomes = []
    hours = conf.get("vacuum_retention_hours")
    retention = None if hours is None else timedelta(hours=hours)
    vacuum = args.vacuum or conf.get("vacuum")
    for scope, stream in names:
        try:
            found = manager.run_retention(scope, stream, parse_now(args.now), frequency, bucket=args.bucket,
                                          buckets=buckets)
            for o in found:
                if vacuum:  # the stream's table; the store's own tables once, after the walk
                    manager.vacuum(o.scope, o.stream, retention, store_tables=False)
        except ps.PravegaSparkError as exc:
            progress.step(f"{scope}/{stream}", f"FAILED: {type(exc).__name__}: {exc}", failed=True)
            continue
        outcomes += found
        if not found:
            progress.step(f"{scope}/{stream}", "no retention to apply (no policy, sealed, or another bucket's)")
        for o in found:
            if o.truncated_at is not None:
                progress.step(f"{o.scope}/{o.stream}", f"truncated at {o.truncated_at.as_text()}: "
                              f"{o.bytes_truncated:,} bytes, segments deleted {list(o.segments_deleted)}")
            else:
                progress.step(f"{o.scope}/{o.stream}", "nothing to truncate"
                              + (" (recorded a retention cut)" if o.recorded else ""))
    if vacuum and outcomes:
        try:
            print(f"store tables: VACUUMED {len(manager.vacuum_store_tables(retention))} tables", flush=True)
        except ps.PravegaSparkError as exc:
            progress.failures += 1
            print(f"store tables: FAILED: {type(exc).__name__}: {exc}", flush=True)
    progress.summary(f"retention: {len(outcomes)} streams with a policy, "
                     f"{sum(o.truncated_at is not None for o in outcomes)} truncated, "
                     f"{sum(o.bytes_truncated for o in outcomes):,} bytes truncated")
    log.debug("retention job done")
    return 1 if progress.failures else 0


if __name__ == "__main__":
    sys.exit(main())
