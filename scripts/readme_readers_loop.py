"""Run the README's two-reader block (two ``jobs/group_reader.py`` processes started at once) many
times, each on a fresh copy of the demo's store whose reader-groups table is removed first, so
that both processes race to create it, the group and the sink (issue #29's failure).

    .venv/bin/python scripts/readme_readers_loop.py [--runs 10]

Each run must end with both processes reporting their batches and the sink holding each of the
demo's 24,000 events once, in append order per routing key. Prints one line per run and exits 1
if any run failed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pyspark.sql import Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import pravega_spark as ps  # noqa: E402
from jobs import demo_pipeline  # noqa: E402


def readme_block() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    return next(b for b in blocks if "group_reader.py" in b)


def check_sink(spark, sink: Path) -> str | None:
    """None if the sink holds each event once in order per key, else what is wrong."""
    df = spark.read.format("delta").load(str(sink))
    rows, distinct = df.count(), df.select("segment_id", "offset").distinct().count()
    if rows != 24000 or distinct != 24000:
        return f"sink has {rows} rows, {distinct} distinct events (want 24000)"
    per_key = Window.partitionBy("routing_key").orderBy("revision", "segment_id", "offset")
    seq = F.get_json_object(F.col("event").cast("string"), "$.seq").cast("long")
    wrong = df.withColumn("n", F.row_number().over(per_key) - 1).where(seq != F.col("n")).count()
    return f"{wrong} events out of order" if wrong else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    spark = ps.spark_session()
    work = Path(tempfile.mkdtemp(prefix="readme-readers-"))
    template = work / "template"
    template.mkdir()
    assert demo_pipeline.main(["--root", str(template / "store" / "demo")]) == 0
    block, failed = readme_block(), 0
    for run in range(1, args.runs + 1):
        here = work / f"run{run}"
        shutil.copytree(template, here, symlinks=True)
        shutil.rmtree(here / "store" / "demo" / "_pravega" / "reader_groups")
        (here / ".venv").symlink_to(REPO / ".venv")
        (here / "jobs").symlink_to(REPO / "jobs")
        started = time.monotonic()
        done = subprocess.run(["bash", "-c", block], cwd=here, capture_output=True, text=True, timeout=900)
        problem = None
        if done.returncode != 0 or done.stdout.count("batches") != 2:
            problem = f"exit {done.returncode}, stdout {done.stdout.strip()!r}, stderr ...{done.stderr[-1500:]}"
        else:
            problem = check_sink(spark, here / "store" / "dashboard")
        failed += problem is not None
        print(f"run {run}: {'FAILED ' + problem if problem else 'ok'} ({time.monotonic() - started:.1f} s)",
              flush=True)
        if problem is None:
            shutil.rmtree(here)
    print(f"{args.runs - failed} of {args.runs} runs passed (work dir {work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
