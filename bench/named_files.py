"""What naming each file under its partition directory at commit costs an append (issue #47).

    .venv/bin/python bench/named_files.py [--events 1000000] [--rounds 5] [--root /tmp/pravega-bench-named]
    scripts/local_s3.sh start > /tmp/s3.env
    .venv/bin/python bench/named_files.py --root s3a://pravega/bench --settings /tmp/s3.env

Alternates, in one process, ``write_events`` of the same N events (~200 bytes, 4 segments) as
today (each file written under its task's placeholder directory, then named at commit under
``segment_id=S/base_offset=B/end_offset=E/``: a hard link locally, a server-side copy on S3, the
first name deleted after the commit) and with the naming switched off (the layout before #47:
files committed under their placeholder directories). Ratio = without / with: > 1 means naming is
free; the target is >= 0.95x ("as fast"). Each side appends to a stream of its own.
"""

from __future__ import annotations

import argparse
import shutil
import uuid

import _common
from _common import alternate, settings_conf, source

import pravega_spark as ps
import pravega_spark._delta.transaction as delta_transaction


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=_common.MIN_ROUNDS)
    p.add_argument("--root", default="/tmp/pravega-bench-named")
    p.add_argument("--settings", help="KEY=value lines (scripts/local_s3.sh start): the spark.* ones configure the session")
    a = p.parse_args(argv)
    conf = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false", **settings_conf(a.settings)}
    if "://" not in a.root or a.root.startswith("file:"):
        shutil.rmtree(a.root, ignore_errors=True)
    else:  # an object store: a fresh folder per run
        a.root = f"{a.root.rstrip('/')}/{uuid.uuid4().hex[:8]}"
    spark = ps.spark_session(**conf)
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, a.root)
    manager.create_scope("b")
    config = ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4))
    for name in ("named", "placeholder"):
        manager.create_stream("b", name, config)
    rows = source(spark, a.events, a.size).cache()
    rows.count()
    named = manager.create_event_writer("b", "named", writer_id="w")
    placeholder = manager.create_event_writer("b", "placeholder", writer_id="w")
    real = delta_transaction.misplaced

    def old_layout(_round):
        delta_transaction.misplaced = lambda entry, columns: False
        try:
            placeholder.write_events(rows)
        finally:
            delta_transaction.misplaced = real

    print(f"append of {a.events:,} events of ~{a.size} B to 4 segments, root {a.root}", flush=True)
    alternate(("placeholder dirs", old_layout), ("named at commit", lambda _r: named.write_events(rows)),
              rounds=a.rounds, label="named at commit vs placeholder directories", targets=0.95)
    misplaced = [f for f in spark.read.format("delta").load(f"{a.root}/b/named").inputFiles()
                 if "base_offset=-" in f or "transient=" in f]
    print(f"files of the named stream under a placeholder directory: {len(misplaced)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
