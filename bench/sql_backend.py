"""The public-API (``sql``) backend's operations added by issue #45, beside the classic backend's.

    .venv/bin/python bench/sql_backend.py [--appends 100] [--per-append 1000] [--size 200] [--rounds 5]

Both backends run in this one classic session (``PRAVEGA_SPARK_BACKEND`` switches them per call),
on copies of one template store, so each round compares the same work on the same machine state:

- **compaction**: a stream written by APPENDS small appends of PER-APPEND events (~SIZE bytes, 4
  segments: a file per segment per append), compacted by ``StreamManager.compact``; each round
  compacts a fresh copy with each backend. Ratio: sql seconds / classic seconds (a cost).
- **a numbered write of 10 events** (the write mark in the fenced MERGE) against the same write
  without a number, both on sql: what the mark costs. Ratio: numbered / plain (a cost).

Transactions and large events are not on the sql backend yet (``UnsupportedOperationError``): no
figures for them. The targets come in issue #46; these are reported, not judged.
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=100)
    p.add_argument("--per-append", type=int, default=1000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", default="/tmp/bench-sql-backend")
    a = p.parse_args(argv)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                "spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    template = f"{a.root}/template"
    build_template(spark, template, a.appends, a.per_append, a.size)
    alternate(("classic compact", compaction(spark, template, a.root, "classic")),
              ("sql compact", compaction(spark, template, a.root, "sql")),
              rounds=a.rounds, label="compaction", orientation=COST)
    plain, numbered = numbered_writes(spark, template)
    alternate(("sql write of 10", plain), ("sql numbered write of 10", numbered),
              rounds=a.rounds, label="write mark", orientation=COST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
