"""Probe for the consumers issue (#31): per-reader member rows in one Delta table.

    .venv/bin/python bench/member_rows_probe.py [--processes 2] [--commits 40] [--root /tmp/member-probe]

Each of ``--processes`` worker processes (own JVM) commits ``--commits`` times to its own
partition of one small table (a compare-and-set of its member row: ``Store.rewrite_rows`` on
the partition, the commit a reader's position refresh would make), all at once. Prints per
process the commits per second, the median and worst commit time and the attempts lost to
conflicts; then, for the table, how many versions have a checksum file, and whether the latest
version's checksum still lists the table's files (the job-free read path) or a Spark job is
needed to read the rows.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

import pravega_spark as ps  # noqa: E402
from pravega_spark import _delta  # noqa: E402
from pravega_spark.store.store import Store

SCHEMA = StructType([StructField("member", StringType()), StructField("position", LongType()),
                     StructField("last_seen", LongType())])
CONF = {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}


class Attempts(logging.Handler):
    """Counts the conflicting attempts ``_delta.retrying`` logs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.conflicts = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "conflict on attempt" in record.getMessage():
            self.conflicts += 1


def worker(root: str, member: str, commits: int, start_at: float) -> dict:
    spark = ps.spark_session(**CONF)
    _delta.backend_for(spark).configure_session()
    store = Store(spark, root)
    path = f"{root}/members"
    attempts = Attempts()
    logging.getLogger("pravega_spark").addHandler(attempts)
    logging.getLogger("pravega_spark").setLevel(logging.DEBUG)
    store.rewrite_rows(path, SCHEMA, lambda rows: [(member, 0, 0)], "warm-up", partition={"member": member})
    time.sleep(max(0.0, start_at - time.time()))
    attempts.conflicts = 0
    took = []
    began = time.perf_counter()
    for i in range(1, commits + 1):
        t = time.perf_counter()
        store.rewrite_rows(path, SCHEMA, lambda rows, i=i: [(member, i, int(time.time() * 1000))],
                           f"refresh {member}", partition={"member": member})
        took.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - began
    spark.stop()
    return {"member": member, "commits_per_s": commits / elapsed, "median_ms": statistics.median(took) * 1000,
            "max_ms": max(took) * 1000, "conflicts": attempts.conflicts}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--commits", type=int, default=40)
    p.add_argument("--root", default="/tmp/member-probe")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker is not None:
        print(json.dumps(worker(a.root, a.worker, a.commits, a.start_at)), flush=True)
        return 0
    shutil.rmtree(a.root, ignore_errors=True)
    spark = ps.spark_session(**CONF)
    _delta.backend_for(spark).configure_session()
    root = _delta.backend_for(spark).qualify(a.root)
    _delta.backend_for(spark).create_table(f"{root}/members", SCHEMA, ("member",), {"delta.checkpointInterval": "100"})
    start_at = time.time() + 25  # every JVM up before the first commit
    procs = [subprocess.Popen([sys.executable, __file__, "--root", root, "--commits", str(a.commits),
                               "--worker", f"reader-{i}", "--start-at", str(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for i in range(a.processes)]
    results = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in procs]
    for r in results:
        print(f"{r['member']}: {r['commits_per_s']:.2f} commits/s, median {r['median_ms']:.0f} ms, "
              f"worst {r['max_ms']:.0f} ms, {r['conflicts']} attempts lost to conflicts")
    log_dir = Path(a.root) / "members" / "_delta_log"
    versions = sorted(int(f.stem) for f in log_dir.glob("[0-9]*.json"))
    crcs = {int(f.stem) for f in log_dir.glob("[0-9]*.crc")}
    missing = [v for v in versions if v not in crcs]
    state = _delta.table_state(spark, f"{root}/members")
    print(f"table: {len(versions)} versions, {len(missing)} without a checksum file "
          f"(e.g. {missing[:8]}); latest version {state.version}: files "
          f"{'listed by its checksum (no Spark job)' if state.files is not None else 'NOT listed: reads need a Spark job'}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
