"""Where a control-plane operation spends its time on Spark Connect: every request the client
sends (a query, a command, an analysis), its duration and the library's frames that sent it.

Needs a Connect server: ``SPARK_REMOTE=sc://127.0.0.1:PORT .venv/bin/python bench/connect_trace.py``
(``scripts/connect_server.sh start`` prints it).
"""

from __future__ import annotations

import shutil
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql.connect.client import core  # noqa: E402

import pravega_spark as ps  # noqa: E402

calls = []
orig_fetch = core.SparkConnectClient._execute_and_fetch
def wrapped(self, req, *a, **k):
    t = time.perf_counter()
    try:
        return orig_fetch(self, req, *a, **k)
    finally:
        st = [f for f in traceback.extract_stack() if "pravega_spark" in f.filename]
        calls.append((time.perf_counter() - t, " < ".join(f"{f.name}:{f.lineno}" for f in st[-1:-4:-1])))
core.SparkConnectClient._execute_and_fetch = wrapped
orig_an = core.SparkConnectClient._analyze
def wrapped2(self, *a, **k):
    t = time.perf_counter()
    try:
        return orig_an(self, *a, **k)
    finally:
        st = [f for f in traceback.extract_stack() if "pravega_spark" in f.filename]
        calls.append((time.perf_counter() - t, "ANALYZE " + " < ".join(f"{f.name}:{f.lineno}" for f in st[-1:-4:-1])))
core.SparkConnectClient._analyze = wrapped2
spark = ps.spark_session()
shutil.rmtree("/tmp/cprof", ignore_errors=True)
m = ps.StreamManager(spark, "/tmp/cprof")
m.create_scope("s")
summary = []
def prof(name, fn):
    calls.clear()
    t = time.perf_counter()
    fn()
    total = time.perf_counter() - t
    analyses = sum(1 for _, where in calls if where.startswith("ANALYZE"))
    summary.append((name, len(calls), analyses, total))
    print(f"== {name}: {total:.2f}s, {len(calls)} calls, {sum(c[0] for c in calls):.2f}s in calls")
    for d, where in calls:
        print(f"   {d:.3f} {where}")
prof("create_stream", lambda: m.create_stream("s", "t", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2))))
w = m.create_event_writer("s", "t", writer_id="w")
df = spark.createDataFrame([(f"k{i}", b"x" * 100) for i in range(10)], "routing_key string, event binary")
prof("first write", lambda: w.write_events(df))
prof("write", lambda: w.write_events(df))
prof("tail", lambda: m.tail_stream_cut("s", "t"))
prof("stream_info", lambda: m.stream_info("s", "t"))
cut = m.tail_stream_cut("s", "t")
prof("scale", lambda: m.scale_stream("s", "t", [1], [(0.5, 0.75), (0.75, 1.0)]))
w.write_events(df)
prof("truncate", lambda: m.truncate_stream("s", "t", cut))
cut2 = m.tail_stream_cut("s", "t")
# A read's requests before its scan (building the DataFrame) and the scan itself.
prof("read_events whole (plan)", lambda: m.read_events("s", "t"))
prof("read_events between cuts (plan)", lambda: m.read_events("s", "t", start=cut, end=cut2))
prof("read_stream (the call)", lambda: m.read_stream("s", "t"))
prof("seal", lambda: m.seal_stream("s", "t"))

print("\n== requests per operation (before: session 28's code, bench/results/connect_trace_before.txt)")
before = {}
before_file = Path(__file__).resolve().parent / "results" / "connect_trace_before.txt"
if before_file.exists():
    for line in before_file.read_text().splitlines():
        name, _, count = line.rpartition(" ")
        before[name] = count
print(f"{'operation':34} {'before':>6} {'now':>4} {'(analyses)':>10} {'seconds':>8}")
for name, count, analyses, total in summary:
    print(f"{name:34} {before.get(name, '-'):>6} {count:>4} {analyses:>10} {total:>8.2f}")
if "--save-before" in sys.argv:
    before_file.parent.mkdir(exist_ok=True)
    before_file.write_text("".join(f"{name} {count}\n" for name, count, _, _ in summary))
