"""Compaction job: merge each segment's runs of small consecutive files (offsets unchanged).

    python jobs/compact.py --root DIR [--scope S [--stream T]] [--target-file-size BYTES] [--vacuum-hours H]
    spark-submit ... jobs/compact.py --root s3a://lake/pravega

Every append adds a file per segment it writes to, and per-file base offsets stop Delta's
``OPTIMIZE`` from merging them: run this periodically (e.g. hourly) instead. Each stream is one
``dataChange=false`` commit, safe to run while writers, truncations and readers go on. It prints
one line per stream (commit version, runs, files removed and added, bytes rewritten).
``--vacuum-hours`` then VACUUMs with that retention, which is what frees the replaced files'
bytes (readers of older versions need them until then).
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
    parser.add_argument("--target-file-size", type=int, default=None, help="bytes per rewritten file (128 MiB)")
    parser.add_argument("--vacuum-hours", type=float, default=None, help="VACUUM afterwards with this retention")
    return parse_store_walk(parser, argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_logging(args.verbose)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    names = stream_names(manager, args.scope, args.stream)
    progress = Progress("compact", len(names))
    rewritten = 0
    for scope, stream in names:
        try:
            result = manager.compact(scope, stream, target_file_size=args.target_file_size)
            if args.vacuum_hours is not None:
                manager.vacuum(scope, stream, retention=timedelta(hours=args.vacuum_hours))
        except ps.PravegaSparkError as exc:
            progress.step(f"{scope}/{stream}", f"FAILED: {type(exc).__name__}: {exc}", failed=True)
            continue
        rewritten += result.bytes_rewritten
        progress.step(f"{scope}/{stream}", f"COMPACTED version {result.version}, {result.runs} runs, "
                      f"{result.files_removed} files -> {result.files_added}, {result.bytes_rewritten} bytes rewritten")
    progress.summary(f"compact: {len(names)} streams, {rewritten:,} bytes rewritten")
    return 1 if progress.failures else 0


if __name__ == "__main__":
    sys.exit(main())
