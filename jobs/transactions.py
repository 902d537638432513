"""Transaction timeout job: abort every transaction whose lease expired (Pravega's timeout service).

    python jobs/transactions.py --root DIR [--scope S [--stream T]] [--now 2026-01-01T00:00:00Z] [--vacuum]
    spark-submit ... jobs/transactions.py --root s3a://lake/pravega

Each aborted transaction's staged events are removed in the same Delta commit that records the
abort, so the job is safe to run while writers commit: a transaction ends either committed or
aborted, never both (the loser of a race retries and sees the winner's outcome). ``--vacuum``
then removes the staged files from storage (``vacuum_retention_hours`` in ``conf/transactions.json``;
null keeps the tables' own deleted-file retention window).
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
    parser.add_argument("--conf", default=None, help="JSON config (default conf/transactions.json)")
    parser.add_argument("--scope", default=None)
    parser.add_argument("--stream", default=None)
    parser.add_argument("--now", default=None, help="ISO time the run takes as now (default: the clock)")
    parser.add_argument("--vacuum", action="store_true", help="VACUUM the streams where something was aborted")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("transactions", args.conf)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    aborted = manager.abort_timed_out_transactions(parse_now(args.now), args.scope, args.stream)
    for name, ids in sorted(aborted.items()):
        log.info("%s: aborted %d timed-out transactions: %s", name, len(ids), ", ".join(ids))
    if args.vacuum or conf.get("vacuum"):
        hours = conf.get("vacuum_retention_hours")
        for name in aborted:
            scope, stream = name.split("/", 1)
            manager.vacuum(scope, stream, None if hours is None else timedelta(hours=hours))
    print(f"transactions: {sum(len(v) for v in aborted.values())} timed-out transactions aborted "
          f"in {len(aborted)} streams")
    return 0


if __name__ == "__main__":
    sys.exit(main())
