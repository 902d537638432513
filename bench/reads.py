"""Reads at raw speed (issue #50): each read of a stream against the read a user would otherwise run
on a plain Delta table of the same rows.

    .venv/bin/python bench/reads.py [--events 1000000] [--rounds 5] [--root /tmp/bench-reads]
    .venv/bin/python bench/reads.py --connect      # the same over a real Spark Connect server
    make bench-reads                               # both, one after the other

The baseline table holds the same rows as the stream (``routing_key``, ``event``), routed to the
same segments and partitioned by ``segment_id``, plus the number of the append (``round``) that
wrote them, each append a raw Delta append. Every comparison alternates the baseline and ours for
``--rounds`` rounds after a warm-up round (``bench/_common.alternate``) and reports the median of
the per-round ratios with min and max; targets apply to the median.

On 4 segments, 5 appends of ``--events`` events of ~200 B, then 1,000 more (the tail):
  - whole stream: ``read_events(scope, stream)`` vs the whole table, ``sum(length(event))``
    (speed, raw s / ours; target >= 0.95x classic, >= 0.9x over Connect);
  - between two cuts: the tail cuts after appends 1 and 4 (3 of the 5 appends' events) vs a
    filter on ``round`` (target >= 0.9x on both, issue #67 decision 5);
  - the tail: ``read_events(cut, "latest")`` of the last 1,000 events, collected, vs the same
    rows by a filter on ``round`` (a cost, ours s / raw; target <= 1.5x).
On 64 segments and ~5,000 files (``--wide-appends`` appends of ``--wide-events``, a file per segment
each): the same three.
Drain: ``read_stream`` (``availableNow``) of a stream of ``--drain-events`` events into a Delta sink
vs Delta's ``readStream`` of the plain table into the same kind of sink (target >= 0.95x); then
both into ``ps.idempotent_delta_sink``, ours with ``head="sink"`` (target >= 0.8x over Connect).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F

import pravega_spark as ps
from bench._common import COST, Seconds, alternate, connect_server, source
from pravega_spark.stream.segments import epoch_members
from pravega_spark.writers.routing import with_key_position, with_segment_id

SCOPE = "bench"
TAIL_EVENTS = 1000


@dataclass
class Pair:
    """A stream and its plain twin: the same rows, with the append (``round``) that wrote them."""

    manager: ps.StreamManager
    stream: str
    raw: str
    cuts: list = field(default_factory=list)  # the tail cut after each append (index 0: before any)

    def sides(self, label: str, rounds: int, connect: bool, first: int, last: int) -> None:
        """Whole stream, between the cuts after appends ``first`` and ``last``, and the tail."""
        m, spark = self.manager, self.manager.spark
        appends = len(self.cuts) - 2  # the last cut is after the tail's append

        def total(df):
            return df.agg(F.sum(F.length("event")), F.count(F.lit(1))).first()

        def check(name, ours, raw):
            a, b = ours(), raw()
            assert tuple(a) == tuple(b), (name, a, b)
            return a

        def raw_table():
            return spark.read.format("delta").load(self.raw)

        whole_ours = lambda: total(m.read_events(SCOPE, self.stream))  # noqa: E731
        whole_raw = lambda: total(raw_table())  # noqa: E731
        n = check("whole", whole_ours, whole_raw)
        print(f"{label}: whole stream, {n[1]:,} events ({n[0]:,} payload bytes)", flush=True)
        alternate(("raw Delta read", lambda r: whole_raw()), ("read_events", lambda r: whole_ours()),
                  rounds=rounds, label=f"{label} whole stream", targets=0.9 if connect else 0.95)

        start, end = self.cuts[first], self.cuts[last]
        between_ours = lambda: total(m.read_events(SCOPE, self.stream, start, end))  # noqa: E731
        between_raw = lambda: total(raw_table().where(F.col("round").between(first + 1, last)))  # noqa: E731
        n = check("between", between_ours, between_raw)
        print(f"{label}: between the cuts after appends {first} and {last} of {appends}, {n[1]:,} events",
              flush=True)
        alternate(("raw filtered Delta read", lambda r: between_raw()), ("read_events", lambda r: between_ours()),
                  rounds=rounds, label=f"{label} between cuts", targets=0.9)

        tail_cut = self.cuts[-2]
        tail_ours = lambda: m.read_events(SCOPE, self.stream, tail_cut, "latest").select("event").collect()  # noqa: E731
        tail_raw = lambda: raw_table().where(F.col("round") == appends + 1).select("event").collect()  # noqa: E731
        got, want = tail_ours(), tail_raw()
        assert sorted(r[0] for r in got) == sorted(r[0] for r in want) and len(got) == TAIL_EVENTS
        print(f"{label}: the tail's {TAIL_EVENTS:,} events, collected (latency)", flush=True)
        alternate(("raw filtered Delta read", lambda r: tail_raw()), ("read_events", lambda r: tail_ours()),
                  rounds=rounds, label=f"{label} tail", orientation=COST, targets=1.5)


def build(manager: ps.StreamManager, stream: str, segments: int, appends: int, events: int, size: int,
          root: str) -> Pair:
    """A stream of ``segments`` fixed segments and its plain twin, each given ``appends`` appends
    of ``events`` events, then one of ``TAIL_EVENTS`` (the tail). Prints the files of each."""
    spark = manager.spark
    manager.create_stream(SCOPE, stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(segments)))
    routed = epoch_members(manager.controller.store.segment_records(SCOPE, stream), 0)
    pair = Pair(manager, stream, f"{root}/raw-{stream}", [manager.tail_stream_cut(SCOPE, stream)])
    writer = manager.create_event_writer(SCOPE, stream, writer_id="bench")
    start_time = time.perf_counter()
    for i in range(appends + 1):
        n, first = (events, i * events) if i < appends else (TAIL_EVENTS, appends * events)
        pair.cuts.append(writer.write_events(source(spark, n, size, first)).tail_stream_cut)
        (source(spark, n, size, first).withColumn("round", F.lit(i + 1)).transform(with_key_position)
         .transform(with_segment_id, segments=routed).drop("key_position")
         .write.format("delta").partitionBy("segment_id").mode("append").save(pair.raw))
    ours_files = manager.controller.store.backend.read(manager.controller.store.events_path(SCOPE, stream)) \
        .inputFiles()
    raw_files = spark.read.format("delta").load(pair.raw).inputFiles()
    print(f"built {stream}: {segments} segments, {appends} x {events:,} + {TAIL_EVENTS:,} events of ~{size} B; "
          f"files: ours {len(ours_files):,}, raw {len(raw_files):,} ({time.perf_counter() - start_time:.0f} s)",
          flush=True)
    return pair


def drain(manager: ps.StreamManager, stream: str, raw: str, events: int, root: str, rounds: int,
          connect: bool) -> None:
    """``read_stream`` vs Delta's ``readStream`` of the plain table, each ``availableNow`` from a
    new checkpoint: into a Delta sink (the head in the plan), then into
    ``ps.idempotent_delta_sink``, where the library's sink applies the head (``head="sink"``; over
    Spark Connect the sink runs on the server and reads the head from its batch's session)."""
    spark = manager.spark
    columns = ("segment_id", "routing_key", "event")  # the same columns into both sinks

    def run(name, frame, library_sink):
        def go(r: int) -> Seconds:
            out = f"{root}/drain-{name}-{r}"
            begin = time.perf_counter()
            writer = frame().select(*columns).writeStream.option("checkpointLocation", f"{out}/ck")
            writer = writer.trigger(availableNow=True)
            if library_sink:
                query = writer.foreachBatch(ps.idempotent_delta_sink(f"{out}/sink", f"bench-{name}-{r}")).start()
            else:
                query = writer.format("delta").start(f"{out}/sink")
            query.awaitTermination()
            took = time.perf_counter() - begin
            rows = spark.read.format("delta").load(f"{out}/sink").count()
            assert rows == events, (name, rows)
            return Seconds(took)
        return go

    plain = lambda: spark.readStream.format("delta").load(raw)  # noqa: E731
    print(f"drain: {events:,} events, availableNow, into a Delta sink", flush=True)
    alternate(("Delta readStream", run("raw", plain, False)),
              ("read_stream", run("ours", lambda: manager.read_stream(SCOPE, stream), False)),
              rounds=rounds, label="drain", targets=0.95)
    print(f"drain: {events:,} events, availableNow, into ps.idempotent_delta_sink (foreachBatch)", flush=True)
    alternate(("Delta readStream", run("raw-fb", plain, True)),
              ("read_stream head=sink", run("ours-fb", lambda: manager.read_stream(SCOPE, stream, head="sink"),
                                            True)),
              rounds=rounds, label="drain foreachBatch", targets=0.8 if connect else 0.95)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events per append (4 segments, 5 appends)")
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--wide-appends", type=int, default=78, help="appends to the 64-segment stream")
    p.add_argument("--wide-events", type=int, default=15_000, help="events per append to the 64-segment stream")
    p.add_argument("--drain-events", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", default="/tmp/bench-reads")
    p.add_argument("--only", default="narrow,wide,drain", help="which parts to run (comma-separated)")
    p.add_argument("--connect", action="store_true", help="on a Spark Connect session (SPARK_REMOTE, else a "
                   "local server started for the run)")
    a = p.parse_args(argv)
    if a.connect:
        with connect_server():
            return run(a, connect=True)
    return run(a, connect=False)


def run(a, connect: bool) -> int:
    root = os.path.abspath(a.root + ("-connect" if connect else "-classic"))
    shutil.rmtree(root, ignore_errors=True)
    if connect:
        spark = ps.spark_session()
    else:
        spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                    "spark.driver.memory": "4g"})
        spark.sparkContext.setLogLevel("ERROR")
    print(f"== {'Spark Connect (' + os.environ['SPARK_REMOTE'] + ')' if connect else 'classic'} session",
          flush=True)
    manager = ps.StreamManager(spark, f"{root}/store")
    manager.create_scope(SCOPE)
    parts = set(a.only.split(","))
    if "narrow" in parts:
        build(manager, "narrow", 4, 5, a.events, a.size, root).sides("4 segments", a.rounds, connect, 1, 4)
    if "wide" in parts:
        appends = a.wide_appends
        build(manager, "wide", 64, appends, a.wide_events, a.size, root).sides(
            "64 segments", a.rounds, connect, appends // 5, appends * 4 // 5)
    if "drain" in parts:
        pair = build(manager, "drain", 4, 1, a.drain_events - TAIL_EVENTS, a.size, root)
        drain(manager, "drain", pair.raw, a.drain_events, root, a.rounds, connect)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
