"""Validation job: check every stream of a store (or one) against its invariants.

    python jobs/validate.py --root DIR [--scope S [--stream T]] [--docs DIR]
    spark-submit ... jobs/validate.py --root s3a://lake/pravega --docs /dbfs/pravega-docs

Runs ``StreamManager.validate_stream`` (Great Expectations suites: key-space coverage of every
epoch, contiguous unique offsets with Pravega's framing, nothing beyond a seal or below the head,
complete large events, hidden staged data, head/tail/subscriber/retention/watermark cuts) and
prints one line per stream (with a progress bar on a terminal), then each failing expectation with example rows. With ``--docs``,
Great Expectations Data Docs go to ``DIR/<scope>/<stream>/index.html``. Key-value tables are
checked too (one line each: one live entry per key, versions increasing per key, keys in their
hash partitions, key lengths), unless ``--stream`` names one stream. Exits 1 if any
expectation fails on any stream, 2 if a stream named does not exist.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from jobs._common import Progress, parse_store_walk, setup_logging, store_walk_parser, stream_names


def parse_args(argv):
    parser = store_walk_parser(__doc__)
    parser.add_argument("--docs", default=None, help="folder for Great Expectations Data Docs")
    return parse_store_walk(parser, argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    names = stream_names(manager, args.scope, args.stream)
    # key-value tables too (not when one stream was named)
    scopes = [] if args.stream else [args.scope] if args.scope else sorted(r.scope for r in manager.list_scopes().collect())
    kvts = [(s, r.key_value_table) for s in scopes for r in manager.list_key_value_tables(s).collect()]
    progress = Progress("validate", len(names) + len(kvts))
    failed = 0
    for scope, stream in names:
        try:
            result = manager.validate_stream(scope, stream)
        except ps.StreamNotFoundError as exc:
            progress.step(f"{scope}/{stream}", f"MISSING: {exc}", failed=True)
            return 2
        c = result.counts
        progress.step(f"{scope}/{stream}", f"{'OK' if result.success else 'FAILED'}: {len(result.results)} "
                      f"expectations, {c.get('epochs', 0)} epochs, {c.get('segment', 0)} segments, "
                      f"{c.get('event', 0)} event rows, {c.get('chunk', 0)} chunk rows, {c.get('staged', 0)} staged rows",
                      failed=not result.success)
        for r in result.failures:
            print(f"  {r.expectation}: {r.details['unexpected_count']} of {r.details['element_count']} "
                  f"{r.details['table']} rows: {r.details['description']}")
            for example in r.details["examples"][:3]:
                print(f"    {example}")
        if args.docs:
            index = result.to_html(os.path.join(args.docs, scope, stream))
            log.info("Data Docs of %s/%s: %s", scope, stream, index)
        failed += not result.success
    for scope, kvt in kvts:
        result = manager.validate_key_value_table(scope, kvt)
        progress.step(f"key-value table {scope}/{kvt}", f"{'OK' if result.success else 'FAILED'}: "
                      f"{len(result.results)} expectations, {result.counts.get('entry', 0)} entries, "
                      f"{result.counts.get('tombstone', 0)} tombstones", failed=not result.success)
        for r in result.failures:
            print(f"  {r.expectation}: {r.details['unexpected_count']} of {r.details['element_count']} "
                  f"entries: {r.details['description']}")
        if args.docs:
            log.info("Data Docs of %s/%s: %s", scope, kvt, result.to_html(os.path.join(args.docs, scope, kvt)))
        failed += not result.success
    progress.summary(f"validate: {len(names)} streams, {len(kvts)} key-value tables, {failed} with violations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
