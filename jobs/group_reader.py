"""Group reader job: one reader of a reader group, writing each batch it reads to a Delta table.

    python jobs/group_reader.py --root DIR --stream SCOPE/STREAM --group G --reader ID --sink PATH
                                [--until-tail] [--idle-seconds N] [--pause SECONDS]

Start it once per reader, in as many processes (or machines) as you like: they share the group's
segments through the store. The group (in the stream's scope) is created if it does not exist,
from the stream's head, and with ``--until-tail`` up to the stream's tail at that moment (the
readers then stop at the end of data). Without ``--until-tail`` a reader runs until it has read
nothing new for ``--idle-seconds`` (default: forever).

Each batch is one idempotent Delta append to ``--sink`` (``txnAppId`` = group/reader,
``txnVersion`` = the batch's revision), with the columns ``reader``, ``revision`` and
``position`` (the reader's position after the batch, as JSON) next to ``read_events``' columns:
the position lands in the same commit as the events it covers. A reader restarted with the same
id after a crash goes offline at the last position it wrote and joins again, so the sink gets
every event exactly once. Sort the sink by ``(revision, segment_id, offset)`` for each routing
key's append order.
"""

from __future__ import annotations

import argparse
import json
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


def join_group(manager: ps.StreamManager, args, log) -> ps.EventStreamReader:
    """Create the group if needed; if this reader id is still online (a crashed run), take it
    offline at the last position its sink holds, then join."""
    scope, stream = args.stream.split("/")
    end = manager.tail_stream_cut(scope, stream) if args.until_tail else None
    config = ps.ReaderGroupConfig({args.stream: ("earliest", end)})
    if manager.create_reader_group(scope, args.group, config):
        log.info("created reader group %s/%s: %r", scope, args.group, config)
    group = manager.reader_group(scope, args.group)
    if args.reader in group.online_readers():
        last = last_position(manager.spark, args.sink, args.reader)
        group.reader_offline(args.reader, last)
        log.warning("reader %s was still online (a crashed run): offline at %s", args.reader,
                    "its recorded offsets" if last is None else f"its sink's last position {last}")
    return group.create_reader(args.reader)


def last_position(spark, sink: str, reader_id: str) -> dict[int, int] | None:
    """The position after the last batch this reader wrote to the sink (None: none written)."""
    try:
        rows = spark.read.format("delta").load(sink)
    except Exception:  # noqa: BLE001 (no sink table yet: nothing written)
        return None
    row = rows.where(F.col("reader") == reader_id).orderBy(F.col("revision").desc()).select("position").first()
    return None if row is None else {int(sid): off for sid, off in json.loads(row.position).items()}


def write_batch(batch: ps.ReadBatch, reader_id: str, app_id: str, sink: str) -> None:
    """One idempotent append (``txnVersion`` = the batch's revision); safe when several readers
    create the sink at once (``ps.idempotent_delta_sink`` retries a lost race)."""
    position = json.dumps({str(sid): off for sid, off in batch.position.items()})
    rows = (batch.events.withColumn("reader", F.lit(reader_id)).withColumn("revision", F.lit(batch.revision))
            .withColumn("position", F.lit(position)))
    ps.idempotent_delta_sink(sink, app_id)(rows, batch.revision)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    manager = ps.StreamManager(ps.spark_session(), args.root)
    reader = join_group(manager, args, log)
    app_id = f"{args.stream.split('/')[0]}/{args.group}/{args.reader}"
    batches, read_bytes, idle_since = 0, 0, time.monotonic()
    while True:
        batch = reader.read_next()
        if batch.checkpoint is not None:
            log.info("%s: checkpoint %s", args.reader, batch.checkpoint)
        elif batch.ranges:
            write_batch(batch, args.reader, app_id, args.sink)
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
