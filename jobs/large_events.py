"""Transient clean-up job: abort large events left idle and remove their staged chunks.

    python jobs/large_events.py --root DIR [--scope S [--stream T]] [--now 2026-01-01T00:00:00Z] [--vacuum]
    spark-submit ... jobs/large_events.py --root s3a://lake/pravega

A large event whose writer staged no chunk for ``idle_timeout_seconds`` (``conf/large_events.json``,
10 minutes out of the box) is aborted (Pravega deletes a transient segment whose writer went away)
and its staged data is removed. Safe to run while writers commit: the abort and a commit of the
same event are both Delta commits on the decision, so exactly one wins (a late commit raises
``LargeEventFailedError``). Data whose commit landed but whose removal was cut off by a crash is
removed too, without aborting anything. ``--vacuum`` then frees the bytes on storage
(``vacuum_retention_hours``; null keeps the tables' own deleted-file retention window).
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from jobs._common import load_conf, parse_now, setup_logging


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="store root (any Hadoop path)")
    parser.add_argument("--conf", default=None, help="JSON config (default conf/large_events.json)")
    parser.add_argument("--scope", default=None)
    parser.add_argument("--stream", default=None)
    parser.add_argument("--now", default=None, help="ISO time the run takes as now (default: the clock)")
    parser.add_argument("--vacuum", action="store_true", help="VACUUM the streams where something was removed")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("large_events", args.conf)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    idle = timedelta(seconds=float(conf.get("idle_timeout_seconds", 600)))
    done = manager.clean_transient_data(args.scope, args.stream, parse_now(args.now), idle)
    for name, cleanup in sorted(done.items()):
        log.info("%s: removed %d large events (%d aborted: %s), %d staged files, %d bytes", name,
                 len(cleanup.removed), len(cleanup.aborted), ", ".join(cleanup.aborted), cleanup.files,
                 cleanup.bytes)
    if args.vacuum or conf.get("vacuum"):
        hours = conf.get("vacuum_retention_hours")
        for name in done:
            scope, stream = name.split("/", 1)
            manager.vacuum(scope, stream, None if hours is None else timedelta(hours=hours))
    removed = sum(len(c.removed) for c in done.values())
    aborted = sum(len(c.aborted) for c in done.values())
    print(f"large events: {removed} large events removed ({aborted} aborted), "
          f"{sum(c.bytes for c in done.values())} staged bytes, in {len(done)} streams")
    return 0


if __name__ == "__main__":
    sys.exit(main())
