"""The public-API (``sql``) backend's operations added by issue #45, beside the classic backend's.

    .venv/bin/python bench/sql_backend.py [--appends 100] [--per-append 1000] [--size 200] [--rounds 5]
        [--txn-events 100000] [--only compaction,mark,txn,large]

Both backends run in this one classic session (``PRAVEGA_SPARK_BACKEND`` switches them per call),
on copies of one template store, so each round compares the same work on the same machine state:

- **compaction**: a stream written by APPENDS small appends of PER-APPEND events (~SIZE bytes, 4
  segments: a file per segment per append), compacted by ``StreamManager.compact``; each round
  compacts a fresh copy with each backend. Ratio: sql seconds / classic seconds (a cost).
- **a numbered write of 10 events** (the write mark in the fenced MERGE) against the same write
  without a number, both on sql: what the mark costs. Ratio: numbered / plain (a cost).

- **a transaction commit** of TXN-EVENTS staged events (~SIZE bytes, from one ``write_events``),
  each backend on a stream of its own; the commit alone is timed. Ratio: sql / classic (a cost).
- **a 64 MiB large event** written in 4 MiB chunks (1 MiB pieces) and read back (its length and
  SHA-256 computed by Spark), each backend on a stream of its own. Ratio: sql / classic (a cost).

The targets come in issue #46; these are reported, not judged.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from bench._common import COST, Seconds, alternate, source

ENV = "PRAVEGA_SPARK_BACKEND"


def on(kind: str) -> None:
    os.environ[ENV] = kind


def build_template(spark, root: str, appends: int, per_append: int, size: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    on("classic")
    m = ps.StreamManager(spark, root)
    m.create_scope("bench")
    m.create_stream("bench", "many", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = m.create_event_writer("bench", "many")
    for i in range(appends):
        writer.write_events(spark.createDataFrame(source(spark, per_append, size, start=i * per_append).toArrow()))
    print(f"template: {appends} appends x {per_append} events of ~{size} B over 4 segments", flush=True)


def compaction(spark, template: str, work: str, kind: str):
    def run(r: int) -> Seconds:
        root = f"{work}/{kind}-{r}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(template, root)
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the copy is read afresh
        on(kind)
        m = ps.StreamManager(spark, root)
        before = m.read_events("bench", "many").count()
        start = time.perf_counter()
        result = m.compact("bench", "many", target_file_size=64 << 20)
        took = time.perf_counter() - start
        assert result.runs >= 4 and m.read_events("bench", "many").count() == before, result
        shutil.rmtree(root, ignore_errors=True)
        return Seconds(took)

    return run


def numbered_writes(spark, root: str):
    on("sql")
    m = ps.StreamManager(spark, root)
    for name in ("plain", "numbered"):  # a stream each: neither writer's known tails go stale
        m.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    numbered, plain = m.create_event_writer("bench", "numbered", "numbered"), m.create_event_writer("bench", "plain")
    rows = source(spark, 10, 200).toArrow()

    def write(writer, number: bool):
        def run(r: int) -> None:
            on("sql")
            writer.write_events(spark.createDataFrame(rows), write_number=r if number else None)
        return run

    return write(plain, False), write(numbered, True)


def transaction_commits(spark, root: str, kind: str, events: int, size: int):
    """A round: begin a transaction on ``kind``'s stream, stage ``events`` events, time the commit."""
    on(kind)
    m = ps.StreamManager(spark, root)
    m.create_stream("bench", f"txn-{kind}", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = m.create_transactional_writer("bench", f"txn-{kind}", f"tx-{kind}")
    rows = source(spark, events, size).toArrow()

    def run(r: int) -> Seconds:
        on(kind)
        txn = writer.begin_txn()
        txn.write_events(spark.createDataFrame(rows))
        start = time.perf_counter()
        result = txn.commit()
        took = time.perf_counter() - start
        assert result.event_count == events, result
        return Seconds(took)

    return run


def large_events(spark, root: str, kind: str, mib: int = 64, chunk: int = 4 << 20):
    """A round: a ``mib`` MiB large event written through ``chunk``-byte chunks, then read back."""
    import hashlib

    from pyspark.sql import functions as F

    on(kind)
    m = ps.StreamManager(spark, root)
    m.create_stream("bench", f"large-{kind}", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = m.create_event_writer("bench", f"large-{kind}", f"big-{kind}")
    piece = os.urandom(1 << 20)

    def run(r: int) -> None:
        on(kind)
        digest = hashlib.sha256()
        with writer.stream_event(f"k{r}", chunk_size=chunk) as event:
            for i in range(mib):
                block = piece[:8] + i.to_bytes(8, "big") + piece[16:]
                digest.update(block)
                event.write(block)
            result = event.commit()
        cut = result.tail_stream_cut
        found = (m.read_events("bench", f"large-{kind}").where(F.col("routing_key") == f"k{r}")
                 .select(F.length("event").alias("n"), F.sha2("event", 256).alias("sha")).collect())
        assert [(x.n, x.sha) for x in found] == [(mib << 20, digest.hexdigest())], (found, cut)

    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=100)
    p.add_argument("--per-append", type=int, default=1000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", default="/tmp/bench-sql-backend")
    p.add_argument("--txn-events", type=int, default=100_000)
    p.add_argument("--only", default="compaction,mark,txn,large", help="which benches, comma-separated")
    a = p.parse_args(argv)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                "spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    only = set(a.only.split(","))
    template = f"{a.root}/template"
    if "compaction" in only or "mark" in only:
        build_template(spark, template, a.appends, a.per_append, a.size)
    if "compaction" in only:
        alternate(("classic compact", compaction(spark, template, a.root, "classic")),
                  ("sql compact", compaction(spark, template, a.root, "sql")),
                  rounds=a.rounds, label="compaction", orientation=COST)
    if "mark" in only:
        plain, numbered = numbered_writes(spark, template)
        alternate(("sql write of 10", plain), ("sql numbered write of 10", numbered),
                  rounds=a.rounds, label="write mark", orientation=COST)
    if "txn" in only or "large" in only:
        store = f"{a.root}/txn"
        shutil.rmtree(store, ignore_errors=True)
        on("classic")
        ps.StreamManager(spark, store).create_scope("bench")
    if "txn" in only:
        alternate((f"classic commit of {a.txn_events}", transaction_commits(spark, store, "classic", a.txn_events, a.size)),
                  (f"sql commit of {a.txn_events}", transaction_commits(spark, store, "sql", a.txn_events, a.size)),
                  rounds=a.rounds, label="transaction commit", orientation=COST)
    if "large" in only:
        alternate(("classic 64 MiB large event", large_events(spark, store, "classic")),
                  ("sql 64 MiB large event", large_events(spark, store, "sql")),
                  rounds=a.rounds, label="64 MiB large event written and read", orientation=COST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
