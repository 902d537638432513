"""#68 probe: milliseconds per ``update_stream`` as a store ages, under table-property variants of
the store's own tables (session 46: none bounded the cost; the log listing did, see
``docs/ARCHITECTURE.md``, "Listing a long local log").

One process, one classic session; per variant a new store whose one stream takes ``OPS``
``update_stream`` calls (two commits each, in one catalogue shard), printing the milliseconds per
operation of each ``STEP`` and the log files of the store's own tables at the end. Variants:
``base`` (the library's properties), ``ckpt10`` (``delta.checkpointInterval`` 10),
``ckpt10_tomb_log`` (also 1-second tombstone and log retention: Delta removes no log file written
the same day, so nothing goes).

Usage: .venv/bin/python bench/log_properties_probe.py OPS STEP VARIANT... [--root /tmp/pravega-bench-props]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps  # noqa: E402
from bench.control_growth import SCOPE, STREAM, config  # noqa: E402

VARIANTS = {
    "base": {},
    "ckpt10": {"delta.checkpointInterval": "10"},
    "ckpt10_tomb_log": {"delta.checkpointInterval": "10", "delta.deletedFileRetentionDuration": "interval 1 seconds",
                        "delta.logRetentionDuration": "interval 1 seconds"},
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", type=int)
    parser.add_argument("step", type=int)
    parser.add_argument("variants", nargs="+", choices=sorted(VARIANTS))
    parser.add_argument("--root", default="/tmp/pravega-bench-props")
    args = parser.parse_args(argv)
    spark = ps.spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    for name in args.variants:
        root = f"{args.root}/{name}"
        shutil.rmtree(root, ignore_errors=True)
        manager = ps.StreamManager(spark, root)
        manager.create_scope(SCOPE)
        for stream in (STREAM, "other-1"):
            manager.create_stream(SCOPE, stream, config(0))
        manager.update_stream(SCOPE, STREAM, config(1))
        own = manager.controller.store.own_tables()
        if VARIANTS[name]:
            settings = ", ".join(f"'{k}' = '{v}'" for k, v in VARIANTS[name].items())
            for path in own:
                spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({settings})")
        steps, last = [], time.perf_counter()
        for i in range(1, args.ops + 1):
            manager.update_stream(SCOPE, STREAM, config(i + 1))
            if i % args.step == 0:
                now = time.perf_counter()
                steps.append(f"{(now - last) / args.step * 1000:.0f}")
                last = now
        logs = sum(len(os.listdir(f"{p.removeprefix('file:')}/_delta_log")) for p in own)
        print(f"{name}: ms per operation, per {args.step}: {' '.join(steps)}; log files {logs}", flush=True)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
