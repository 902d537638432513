"""Reader groups at Pravega's commit rate (issues #31 and #43): reader processes draining a stream
into the group's sink vs the same processes copying their halves with no group, two readers of
one process vs one ``read_events``, and tailing readers' commits.

    .venv/bin/python bench/reader_groups.py [--events 4000000] [--size 200] [--rounds 5]
                                            [--threaded-events 1000000] [--tail-seconds 60]
                                            [--tail-readers 1,2,4] [--only abc] [--root /tmp/bench-groups]
    .venv/bin/python bench/reader_groups.py --connect   # (b) over Spark Connect (issue #46)

(a) Processes (issue #43, decision 4): a 4-segment stream of ``--events`` events of ~``--size``
    B. Each round runs, one after the other, two pairs of processes (own JVMs, ``local[1]``
    each: ``BENCH_READER_MASTER``), each process warmed up in its set-up (a ``--warm-rows``-row
    write and copy, the events table's snapshot loaded) and waiting for a signal:
    - the baseline: the 2 processes copy their halves of the stream with no group at all: each
      appends ``read_events(...)`` of its 2 segments (``segment_id`` filter) to one Delta table;
    - ours: 2 readers of one reader group (joined in the set-up) drain it from the head to the
      tail with ``read_next``, each writing through the group's exactly-once sink
      (``ReaderGroup.delta_sink``) until the end of data.
    A side's time: from the signal to the last process's end (the JVMs, the group and the joins
    are set-up, reported apart). Target: median >= 0.8x.
(b) Threads: two readers of ONE process in one group (``create_readers``, one commit) drain
    ``--threaded-events`` events through the group's sink, vs one ``read_events`` of the same
    stream appended to a Delta table in the same process (the same rows and columns). Reported.
(c) Tailing: 1, 2 and 4 reader processes read a stream written every second for
    ``--tail-seconds``. Printed: commits to the group tables per reader per second (target <= 0.15,
    flat as readers are added) and the median ``read_next`` time (the group's per-batch overhead).

(a) and (b) follow ``bench/_common.alternate``: the baseline and ours alternate for ``--rounds``
rounds (>= 5) after a warm-up round; each round's ratio (baseline seconds / ours: > 1 means ours
is faster) is printed, and the measure is the median of the ratios, with min and max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCOPE, STREAM, S = "bench", "groups", "bench/groups"
QUIET = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
READER_MASTER = os.environ.get("BENCH_READER_MASTER", "local[1]")


# ---- the worker processes ------------------------------------------------------------------------
def wait_for(path: str) -> float:
    while not os.path.exists(path):
        time.sleep(0.01)
    return time.time()


def worker(argv) -> int:
    """``reader ROOT WARM GROUP ID SINK GO``, ``copy ROOT WARM SEGMENTS SINK GO`` (SEGMENTS:
    comma-separated ids) or ``tail ROOT WARM GROUP ID SINK STOP``: set up (warm up on WARM rows,
    join or plan), print READY, wait for the file GO (a tail reader starts at once), work, print
    a JSON line of timings."""
    import pravega_spark as ps

    role, root, warm = argv[0], argv[1], int(argv[2])
    spark = ps.spark_session(**QUIET, **{"spark.master": READER_MASTER})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, root)
    if role != "tail" and warm:  # part of the set-up: a fresh JVM's first large write runs twice as long (JIT)
        from bench._common import source

        scratch = f"{Path(root).parent}/warm-up-{os.getpid()}"
        source(spark, warm, 200).write.format("delta").mode("append").save(scratch)
        spark.read.format("delta").load(scratch).write.format("delta").mode("append").save(scratch + "-copy")
    if role == "copy":
        from pyspark.sql import functions as F

        segments, sink, go = [int(x) for x in argv[3].split(",")], argv[4], argv[5]
        # the same rows and columns as the group's sink writes; the events table's snapshot is
        # loaded here, in the set-up, as a reader's join loads it
        half = (manager.read_events(SCOPE, STREAM).where(F.col("segment_id").isin(segments))
                .withColumn("revision", F.lit(0).cast("long")))
        print("READY", flush=True)
        start = wait_for(go)
        half.write.format("delta").mode("append").save(sink)
        print(json.dumps({"start": start, "end": time.time()}), flush=True)
        return 0
    group_name, reader_id, sink_path, signal = argv[3], argv[4], argv[5], argv[6]
    group = manager.reader_group(SCOPE, group_name)
    reader, sink = group.create_reader(reader_id), group.delta_sink(sink_path)
    print("READY", flush=True)
    calls: list[float] = []
    writing = 0.0
    start = wait_for(signal) if role == "reader" else time.time()
    while True:
        t = time.perf_counter()
        batch = reader.read_next()
        calls.append(time.perf_counter() - t)
        if batch.ranges:
            t = time.perf_counter()
            sink.write(batch)
            writing += time.perf_counter() - t
        if batch.end_of_data or (role == "tail" and os.path.exists(signal) and not batch.ranges):
            break
        if not batch.ranges:
            time.sleep(0.05 if role == "reader" else 0.5)
    end = time.time()
    reader.close()
    print(json.dumps({"start": start, "end": end, "calls": len(calls), "read_next_ms": statistics.median(calls) * 1000,
                      "read_next_s": sum(calls), "write_s": writing}), flush=True)
    return 0


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "worker", *args], cwd=REPO, stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))


def wait_ready(procs) -> None:
    for p in procs:
        line = p.stdout.readline()
        assert line.startswith("READY"), line


def results(procs) -> list[dict]:
    out = []
    for p in procs:
        lines = p.communicate(timeout=1800)[0].splitlines()
        assert p.returncode == 0, lines[-5:]
        out.append(json.loads(lines[-1]))
    return out


def group_commits(root: str) -> int:
    """Commits to the group tables (their log's JSON files), table creations left out."""
    total = 0
    for table in ("reader_groups", "reader_group_members"):
        log_dir = Path(root) / "_pravega" / table / "_delta_log"
        total += max(0, len(list(log_dir.glob("*.json"))) - 1) if log_dir.exists() else 0
    return total


def run_pair(procs, go: Path, setups: list[float], t0: float) -> list[dict]:
    """Wait until ``procs`` are ready (the set-up since ``t0`` is noted), signal ``go``, and
    return their timings."""
    wait_ready(procs)
    setups.append(time.perf_counter() - t0)
    go.touch()
    return results(procs)


def span(got: list[dict]) -> float:
    """From the signal to the last process's end."""
    return max(g["end"] for g in got) - min(g["start"] for g in got)


# ---- the three measures ---------------------------------------------------------------------------
def processes(manager, root: str, args) -> None:
    from pyspark.sql import functions as F

    import pravega_spark as ps
    from bench._common import Seconds, alternate

    spark, base = manager.spark, Path(root).parent
    ids = sorted(r.segment_id for r in manager.segments(SCOPE, STREAM).collect())
    halves = [ids[0::2], ids[1::2]]
    setups: dict[str, list[float]] = {"copy": [], "group": []}
    columns = manager.read_events(SCOPE, STREAM).withColumn("revision", F.lit(0).cast("long"))

    def check(path: str) -> None:
        rows = spark.read.format("delta").load(path).count()
        assert rows == args.events, (path, rows, args.events)

    def copy(r: int) -> float:
        go, sink, t0 = base / f"go-copy-{r}", f"{base}/copy-{r}", time.perf_counter()
        # the table made ahead (two first appends would race to create it), as the group's sink
        # table is made by ``delta_sink`` in the readers' set-up
        columns.limit(0).write.format("delta").save(sink)
        procs = [spawn("copy", root, str(args.warm_rows), ",".join(map(str, half)), sink, str(go)) for half in halves]
        got = run_pair(procs, go, setups["copy"], t0)
        check(sink)
        print(f"    {'warm-up' if r == 0 else f'round {r}'}, the copies: " + "; ".join(f"{g['end'] - g['start']:.2f} s" for g in got), flush=True)
        return Seconds(span(got))

    def group(r: int) -> float:
        go, sink, t0, name = base / f"go-readers-{r}", f"{base}/sink-{r}", time.perf_counter(), f"drain-{r}"
        # a reader joined early waits for the other's set-up: on a busy machine that can pass the
        # default silence limit (60 s), and the other would take it offline
        manager.create_reader_group(SCOPE, name, ps.ReaderGroupConfig(
            {S: ("earliest", manager.tail_stream_cut(SCOPE, STREAM))}, automatic_checkpoint_interval=None,
            reader_silence_limit=timedelta(hours=1)))
        procs = [spawn("reader", root, str(args.warm_rows), name, f"r{i}", sink, str(go)) for i in range(2)]
        got = run_pair(procs, go, setups["group"], t0)
        check(sink)
        print(f"    {'warm-up' if r == 0 else f'round {r}'}, the readers: " + "; ".join(
            f"{g['end'] - g['start']:.2f} s ({g['calls']} calls: read_next {g['read_next_s']:.2f} s, sink writes "
            f"{g['write_s']:.2f} s)" for g in got), flush=True)
        return Seconds(span(got))

    print(f"(a) {args.events:,} events of ~{args.size} B, 4 segments: 2 reader processes in one group, each "
          f"writing through the group's sink, vs the same 2 processes ({READER_MASTER} each) copying their halves "
          f"(segments {halves[0]} and {halves[1]}: read_events + a Delta append) with no group", flush=True)
    alternate(("2 processes, no group", copy), ("2 readers, one group", group), rounds=args.rounds,
              label="(a)", targets=0.8, indent="    ")
    print(f"    set-up apart (JVMs, warm-up, group, joins): median {statistics.median(setups['group']):.1f} s with the "
          f"group, {statistics.median(setups['copy']):.1f} s without", flush=True)


def threaded(manager, root: str, args) -> None:
    import threading

    from pyspark.sql import functions as F

    import pravega_spark as ps
    from bench._common import Seconds, alternate, source

    spark, base = manager.spark, Path(root).parent
    manager.create_stream(SCOPE, "threads", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = manager.create_event_writer(SCOPE, "threads", writer_id="bench")
    for part in range(4):
        writer.write_events(source(spark, args.threaded_events // 4, args.size,
                                   start=part * (args.threaded_events // 4)))
    setups: list[float] = []
    next_times: list[float] = []  # each read_next call (the group's per-batch overhead before the scan)

    def check(path: str, sink=None) -> None:  # a group's sink: its rows without its marks (``read``)
        rows = (sink.read() if sink is not None else spark.read.format("delta").load(path)).count()
        assert rows == args.threaded_events, (path, rows)

    def one_read(r: int) -> float:  # the same rows and columns as the group's sink writes
        path = f"{base}/t-base-{r}"
        start = time.perf_counter()
        (manager.read_events(SCOPE, "threads").withColumn("revision", F.lit(0).cast("long"))
         .write.format("delta").mode("append").save(path))
        seconds = time.perf_counter() - start
        check(path)
        return Seconds(seconds)

    def two_readers(r: int) -> float:
        start, name, path = time.perf_counter(), f"threads-{r}", f"{base}/t-sink-{r}"
        manager.create_reader_group(SCOPE, name, ps.ReaderGroupConfig(
            {f"{SCOPE}/threads": ("earliest", manager.tail_stream_cut(SCOPE, "threads"))},
            automatic_checkpoint_interval=None))
        group = manager.reader_group(SCOPE, name)
        readers, sink = group.create_readers(["r0", "r1"]), group.delta_sink(path)
        setups.append(time.perf_counter() - start)

        def drain(reader) -> None:
            while True:
                began = time.perf_counter()
                batch = reader.read_next()
                next_times.append(time.perf_counter() - began)
                if batch.ranges:
                    sink.write(batch)
                if batch.end_of_data:
                    return
                if not batch.ranges:
                    time.sleep(0.02)

        start = time.perf_counter()
        threads = [threading.Thread(target=drain, args=(reader,)) for reader in readers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        check(path, sink)
        return Seconds(seconds)

    print(f"(b) {args.threaded_events:,} events: 2 readers of one process (threads) in one group into the group's "
          "sink vs one read_events into a Delta table", flush=True)
    alternate(("read_events + append", one_read), ("2 readers, one process", two_readers), rounds=args.rounds,
              label="(b)", indent="    ")
    print(f"    set-up apart (group, create_readers, sink): median {statistics.median(setups):.2f} s", flush=True)
    print(f"    read_next: {len(next_times)} calls, median {statistics.median(next_times) * 1000:.0f} ms "
          f"(min {min(next_times) * 1000:.0f}, max {max(next_times) * 1000:.0f})", flush=True)


def tailing(manager, root: str, args) -> None:
    import pravega_spark as ps
    from bench._common import source

    print(f"(c) tailing for {args.tail_seconds:.0f} s, a write every second (target <= 0.15 commits per reader per "
          "second, flat as readers are added)")
    for n in [int(x) for x in args.tail_readers.split(",")]:
        stream = f"tail{n}"
        manager.create_stream(SCOPE, stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
        name, stop = f"tail-{n}", Path(root).parent / f"stop-{n}"
        manager.create_reader_group(SCOPE, name, ps.ReaderGroupConfig({f"{SCOPE}/{stream}": "earliest"}))
        procs = [spawn("tail", root, "0", name, f"r{i}", f"{Path(root).parent}/tail-sink-{n}", str(stop))
                 for i in range(n)]
        wait_ready(procs)
        before, start = group_commits(root), time.perf_counter()
        writer = manager.create_event_writer(SCOPE, stream, writer_id="bench")
        i = 0
        while time.perf_counter() - start < args.tail_seconds:
            writer.write_events(source(manager.spark, 1000, args.size, start=i * 1000))
            i += 1
            time.sleep(max(0.0, start + i - time.perf_counter()))
        stop.touch()
        got = results(procs)
        elapsed = time.perf_counter() - start
        commits = group_commits(root) - before
        rate = commits / n / elapsed
        print(f"    {n} reader(s): {commits} commits in {elapsed:.0f} s = {rate:.3f} per reader per second "
              f"({'met' if rate <= 0.15 else 'not met'}); read_next median {statistics.median(g['read_next_ms'] for g in got):.0f} ms "
              f"over {sum(g['calls'] for g in got)} calls")


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["worker"]:
        return worker(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4_000_000)
    parser.add_argument("--threaded-events", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="(a) and (b): rounds after a warm-up round")
    parser.add_argument("--warm-rows", type=int, default=500_000,
                        help="(a): rows each process writes (and copies) in its set-up, to warm its JVM up")
    parser.add_argument("--tail-seconds", type=float, default=60)
    parser.add_argument("--tail-readers", default="1,2,4")
    parser.add_argument("--only", default="abc", help="which measures to run (letters)")
    parser.add_argument("--root", default="/tmp/bench-groups")
    parser.add_argument("--connect", action="store_true",
                        help="(b) only, on a Spark Connect session (SPARK_REMOTE, else a local server started for the run)")
    args = parser.parse_args(argv)
    if args.connect:
        from bench._common import connect_server

        args.only = "b"
        with connect_server():
            return run(args)
    return run(args)


def run(args) -> int:
    args.events, args.threaded_events = args.events // 4 * 4, args.threaded_events // 4 * 4  # four appends
    import pravega_spark as ps
    from bench._common import fresh_store, source

    manager = fresh_store(args.root, SCOPE)
    root = f"{args.root}/store"
    manager.create_stream(SCOPE, STREAM, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    if "a" in args.only:
        writer = manager.create_event_writer(SCOPE, STREAM, writer_id="bench")
        for part in range(4):  # four appends: several files per segment
            writer.write_events(source(manager.spark, args.events // 4, args.size, start=part * (args.events // 4)))
        processes(manager, root, args)
    if "b" in args.only:
        threaded(manager, root, args)
    if "c" in args.only:
        tailing(manager, root, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
