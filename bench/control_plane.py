"""Control-plane latency: each StreamManager operation against a raw single-row Delta append.

In one process and one session, ``--runs`` rounds (>= 5) after a warm-up round; each round calls
every operation once (a fresh stream per round where the operation needs one) between raw
single-row blind Delta appends to a small table (two per round: the round's unit is their mean).
Each round's ratio is the operation's seconds / the unit's (a cost: an operation's latency as a
multiple of the raw append, < 1 means cheaper); printed per operation: its median seconds and the
MEDIAN of its per-round ratios with min and max, the target applying to the median
(``bench/_common``'s rule). ``first write_events`` is a writer's
first write of 10 events; ``write_events`` is a write of 10 events by a writer that has written
before, from a DataFrame made of a Python list (an RDD whose size Spark does not know);
``write_events (local)`` the same from a pandas DataFrame (a local relation of known size, written
by one task without a shuffle).

With ``--connect`` the same operations run on a Spark Connect session (``SPARK_REMOTE``, else a
local server that ``scripts/connect_server.sh`` starts and stops), beside the classic figures (a
classic run of this script in a subprocess). Connect's unit is the cheapest fenced commit there:
a raw insert-only MERGE of one row whose ON clause holds a literal partition predicate, into a
small partitioned table; the raw blind append and a raw single-row query are printed too.

Usage: ``.venv/bin/python bench/control_plane.py [--runs 5] [--root DIR] [--connect]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pravega_spark as ps  # noqa: E402
from bench._common import COST, Ratios, timed  # noqa: E402

TARGETS = {"create_stream": 4.0, "scale_stream": 5.0, "truncate_stream": 5.0, "seal_stream": 5.0,
           "write_events": 1.5, "tail_stream_cut": 0.5, "stream_info": 0.5}
# over Connect (issue #46): multiples of the raw fenced MERGE (tail_stream_cut and stream_info: of
# a raw query)
CONNECT_TARGETS = {"write_events": 1.3, "create_stream": 4.0, "scale_stream": 4.0, "truncate_stream": 4.0,
                   "seal_stream": 4.0}
CONNECT_QUERY_TARGETS = {"tail_stream_cut": 1.0, "stream_info": 1.0}
REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds after a warm-up round")
    parser.add_argument("--root", default=None)
    parser.add_argument("--connect", action="store_true", help="on a Spark Connect session, beside classic")
    parser.add_argument("--json", default=None, help="write the rounds' seconds here (used by --connect's classic run)")
    args = parser.parse_args(argv)
    if not args.connect:
        rounds = measure(ps.spark_session(**{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}),
                         args, connect=False)
        if args.json:
            Path(args.json).write_text(json.dumps(rounds))
        else:
            report(rounds)
        return 0
    # classic first, in a process of its own (a classic session and SPARK_REMOTE do not mix)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "classic.json"
        env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
        subprocess.run([sys.executable, __file__, "--runs", str(args.runs), "--json", str(out)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        classic = json.loads(out.read_text())
    started = False
    if not os.environ.get("SPARK_REMOTE"):
        lines = subprocess.run([str(REPO / "scripts" / "connect_server.sh"), "start"], check=True,
                               capture_output=True, text=True).stdout
        os.environ["SPARK_REMOTE"] = lines.strip().split("SPARK_REMOTE=")[-1]
        started = True
    try:
        connect = measure(ps.spark_session(), args, connect=True)
    finally:
        if started:
            subprocess.run([str(REPO / "scripts" / "connect_server.sh"), "stop"], check=False)
    report(connect, classic)
    return 0


def measure(spark, args, connect: bool) -> dict[str, list[float]]:
    """The seconds of each operation (and of the raw baselines) in each of ``args.runs`` rounds,
    after a warm-up round (not returned); ``raw append``: the mean of the round's two."""
    base = Path(args.root or tempfile.mkdtemp(prefix="pravega-spark-cp-"))
    shutil.rmtree(base, ignore_errors=True)
    manager = ps.StreamManager(spark, str(base / "store"))
    raw_path = str(base / "raw")
    schema = "k string, v long"
    spark.createDataFrame([("a", 0)], schema).write.format("delta").partitionBy("k").save(raw_path)
    times: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    def events(n: int = 10):
        return spark.createDataFrame([(f"k{i}", b"x" * 100) for i in range(n)], "routing_key string, event binary")

    def one_run(run: int) -> None:
        raw_append = lambda: (spark.createDataFrame([("a", run)], schema)  # noqa: E731
                              .write.format("delta").mode("append").save(raw_path))
        record("raw append", timed(raw_append))
        if connect:
            row = spark.createDataFrame([("a", 1000 + run)], schema)
            record("raw fenced MERGE", timed(lambda: spark.sql(
                f"MERGE INTO delta.`{raw_path}` AS t USING {{row}} AS s ON t.k = 'a' AND t.v = s.v "
                "WHEN NOT MATCHED THEN INSERT *", row=row).collect()))
            record("raw query", timed(lambda: spark.read.format("delta").load(raw_path).where("k = 'a'").limit(1)
                                      .collect()))
        scope = f"s{run}"
        record("create_scope", timed(lambda: manager.create_scope(scope)))
        record("create_stream", timed(lambda: manager.create_stream(
            scope, "t", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))))
        writer = manager.create_event_writer(scope, "t", writer_id=f"w{run}")
        batch = events()
        record("first write_events", timed(lambda: writer.write_events(batch)))
        record("write_events", timed(lambda: writer.write_events(batch)))
        local = spark.createDataFrame(batch.toPandas())  # a local relation: Spark knows its size
        record("write_events (local)", timed(lambda: writer.write_events(local)))
        record("raw append", timed(raw_append))
        manager.tail_stream_cut(scope, "t")
        record("tail_stream_cut", timed(lambda: manager.tail_stream_cut(scope, "t")))
        record("stream_info", timed(lambda: manager.stream_info(scope, "t")))
        cut = manager.tail_stream_cut(scope, "t")
        record("scale_stream", timed(lambda: manager.scale_stream(scope, "t", [1], [(0.5, 0.75), (0.75, 1.0)])))
        writer.write_events(batch)
        record("truncate_stream", timed(lambda: manager.truncate_stream(scope, "t", cut)))
        record("seal_stream", timed(lambda: manager.seal_stream(scope, "t")))
        record("delete_stream", timed(lambda: manager.delete_stream(scope, "t")))

    for run in range(args.runs + 1):  # run 0 warms up
        one_run(run)
        if run == 0:
            times.clear()
        print(f"{'warm-up' if run == 0 else f'round {run}/{args.runs}'} done", flush=True)
    spark.stop()
    shutil.rmtree(base, ignore_errors=True)
    appends = times["raw append"]
    times["raw append"] = [(x + y) / 2 for x, y in zip(appends[0::2], appends[1::2], strict=True)]
    return times


def report(rounds: dict[str, list[float]], classic: dict[str, list[float]] | None = None) -> None:
    """One line per operation: its median seconds, the median of its per-round multiples of the
    session type's unit (min and max), the target's verdict on the median (and, beside them,
    classic's)."""
    connect = classic is not None
    unit = rounds["raw fenced MERGE"] if connect else rounds["raw append"]
    query = rounds.get("raw query", unit)

    def ratios(name, values, base) -> Ratios:
        return Ratios(name, [v / b for v, b in zip(values, base, strict=True)], COST)

    head = f"{'operation':<20} {'median s':>9} {'x unit':>7} {'min-max':>11} {'target':>14}"
    if connect:
        head += f"   {'classic s':>9} {'x raw append':>12}"
    head += "   each round's x unit"
    print(f"\n(x unit: the median over {len(unit)} rounds of each round's seconds / the round's unit; a cost)")
    print(head)
    for name, values in rounds.items():
        if connect and name in CONNECT_QUERY_TARGETS:
            r, target, unit_name = ratios(name, values, query), CONNECT_QUERY_TARGETS[name], "q"
        elif connect:
            r, target, unit_name = ratios(name, values, unit), CONNECT_TARGETS.get(name), ""
        else:
            r, target, unit_name = ratios(name, values, unit), TARGETS.get(name), ""
        r.target = target
        verdict = "" if target is None else f"<= {target:.1f}{unit_name} {'met' if r.met else 'not met'}"
        line = (f"{name:<20} {statistics.median(values):>9.3f} {r.median:>7.2f} "
                f"{f'{min(r.ratios):.2f}-{max(r.ratios):.2f}':>11} {verdict:>14}")
        if connect and name in classic:
            c = ratios(name, classic[name], classic["raw append"])
            line += f"   {statistics.median(classic[name]):>9.3f} {c.median:>12.2f}"
        print(line + "   " + " ".join(f"{x:.2f}" for x in r.ratios))
    if connect:
        print(f"unit: raw fenced MERGE, median {statistics.median(unit):.3f} s (raw blind append "
              f"{statistics.median(rounds['raw append']):.3f} s, raw single-row query {statistics.median(query):.3f} s; "
              "q: multiples of the query)")
    else:
        print(f"unit: raw append (the mean of each round's two), median {statistics.median(unit):.3f} s")


if __name__ == "__main__":
    sys.exit(main())
