"""VACUUM job: remove the files Delta no longer references from every stream's tables.

    python jobs/vacuum.py --root DIR [--scope S [--stream T]] [--retention-hours H]

Runs ``StreamManager.vacuum`` per stream (staged transaction data and large events' chunks are
kept: see its docstring), then ``vacuum_store_tables`` once for the store's own tables: one line
per stream with the tables vacuumed, one for the store's tables, a progress bar on a terminal,
and a summary. ``--retention-hours`` below the tables' own retention breaks readers of
older table versions (time travel). Exits 1 if a stream failed.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from jobs._common import Progress, parse_store_walk, setup_logging, store_walk_parser, stream_names


def parse_args(argv):
    parser = store_walk_parser(__doc__)
    parser.add_argument("--retention-hours", type=float, default=None, help="default: the tables' own")
    return parse_store_walk(parser, argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_logging(args.verbose)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    names = stream_names(manager, args.scope, args.stream)
    retention = None if args.retention_hours is None else timedelta(hours=args.retention_hours)
    progress = Progress("vacuum", len(names))
    tables = 0
    for scope, stream in names:
        try:
            done = manager.vacuum(scope, stream, retention, store_tables=False)
        except ps.PravegaSparkError as exc:
            progress.step(f"{scope}/{stream}", f"FAILED: {type(exc).__name__}: {exc}", failed=True)
            continue
        tables += len(done)
        progress.step(f"{scope}/{stream}", f"VACUUMED {len(done)} tables")
    try:  # the store's own tables, each once (a scope's shard tables hold other scopes' rows too)
        own = manager.vacuum_store_tables(retention)
        tables += len(own)
        print(f"store tables: VACUUMED {len(own)} tables", flush=True)
    except ps.PravegaSparkError as exc:
        progress.failures += 1
        print(f"store tables: FAILED: {type(exc).__name__}: {exc}", flush=True)
    progress.summary(f"vacuum: {tables} tables")
    return 1 if progress.failures else 0


if __name__ == "__main__":
    sys.exit(main())
