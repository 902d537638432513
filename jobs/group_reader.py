"""Group reader job: one reader of a reader group, writing each batch it reads to a Delta table.

    python jobs/group_reader.py --root DIR --stream SCOPE/STREAM --group G --reader ID --sink PATH
                                [--until-tail] [--idle-seconds N] [--pause SECONDS]

Start it once per reader, in as many processes (or machines) as you like: they share the group's
segments through the store. The group (in the stream's scope) is created if it does not exist,
from the stream's head, and with ``--until-tail`` up to the stream's tail at that moment (the
readers then stop at the end of data). Without ``--until-tail`` a reader runs until it has read
nothing new for ``--idle-seconds`` (default: forever).

Each batch goes through the group's exactly-once sink (``ReaderGroup.delta_sink``): its rows,
with the columns ``reader`` and ``revision`` next to ``read_events``' columns, and one Delta
application version per segment (its end offset in the batch) land in one commit. A replayed
batch writes nothing; a reader the group has taken offline (silent past the group's limit) but
that still runs cannot write a segment it no longer owns. A reader that dies is taken offline by
the others after the silence limit, at the offsets the sink holds, so its segments continue
exactly where its output ends; a reader restarted with the same id takes its old self offline the
same way, then joins again. Sort the sink by ``(revision, segment_id, offset)`` for each routing
key's append order.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from jobs._common import setup_logging


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="store root (any Hadoop path)")
    parser.add_argument("--stream", required=True, help="the stream to read, as scope/stream")
    parser.add_argument("--group", required=True, help="the reader group (in the stream's scope)")
    parser.add_argument("--reader", required=True, help="this reader's id (unique in the group)")
    parser.add_argument("--sink", required=True, help="the Delta table the batches are appended to")
    parser.add_argument("--until-tail", action="store_true", help="a new group ends at the stream's tail now")
    parser.add_argument("--idle-seconds", type=float, default=None, help="stop after this long with nothing new")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between two empty reads")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def join_group(manager: ps.StreamManager, args, log) -> tuple[ps.EventStreamReader, ps.ReaderGroupSink]:
    """Create the group if needed and record its sink; if this reader id is still online (a
    crashed run), take it offline at the offsets the sink holds, then join."""
    scope, stream = args.stream.split("/")
    end = manager.tail_stream_cut(scope, stream) if args.until_tail else None
    config = ps.ReaderGroupConfig({args.stream: ("earliest", end)})
    if manager.create_reader_group(scope, args.group, config):
        log.info("created reader group %s/%s: %r", scope, args.group, config)
    group = manager.reader_group(scope, args.group)
    empty = manager.spark.createDataFrame([], group.batch_schema())
    sink = group.delta_sink(args.sink, sink_rows(empty, args.reader, 0).schema)
    if args.reader in group.online_readers():
        group.reader_offline(args.reader)
        log.warning("reader %s was still online (a crashed run): offline where its sink's output ends", args.reader)
    return group.create_reader(args.reader), sink


def sink_rows(events, reader_id: str, revision: int):
    """What the sink holds of a batch: its events, the reader's id and the batch's revision."""
    return events.withColumn("reader", F.lit(reader_id)).withColumn("revision", F.lit(revision))


def write_batch(batch: ps.ReadBatch, reader_id: str, sink: ps.ReaderGroupSink) -> int:
    """One exactly-once commit of the batch's events and positions; the segments written."""
    return sink.write(batch, sink_rows(batch.events, reader_id, batch.revision))


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    reader, sink = join_group(manager, args, log)
    batches, read_bytes, idle_since = 0, 0, time.monotonic()
    while True:
        batch = reader.read_next()
        if batch.checkpoint is not None:
            log.info("%s: checkpoint %s", args.reader, batch.checkpoint)
        elif batch.ranges:
            write_batch(batch, args.reader, sink)
            size = sum(hi - lo for lo, hi in batch.ranges.values())
            batches, read_bytes, idle_since = batches + 1, read_bytes + size, time.monotonic()
            log.info("%s: batch at revision %d: %d segment ranges, %d bytes; position %s", args.reader,
                     batch.revision, len(batch.ranges), size, batch.position)
        if batch.end_of_data:
            break
        if args.idle_seconds is not None and time.monotonic() - idle_since >= args.idle_seconds:
            log.info("%s: nothing new for %.0f s", args.reader, args.idle_seconds)
            break
        if not batch.ranges:
            time.sleep(args.pause)
    reader.close()
    print(f"group reader {args.reader}: {batches} batches, {read_bytes:,} bytes (framed) written to {args.sink}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
