"""Reader groups at Pravega's commit rate (issue #31): reader processes draining a stream into the
group's sink vs one process's ``read_events`` into a Delta table, and tailing readers' commits.

    .venv/bin/python bench/reader_groups.py [--events 4000000] [--size 200] [--rounds 3]
                                            [--threaded-events 1000000] [--tail-seconds 60]
                                            [--tail-readers 1,2,4] [--root /tmp/bench-groups]

(a) Processes: a 4-segment stream of ``--events`` events of ~``--size`` B. Each round, two
    reader processes (own JVMs, ``local[1]`` each) join a group from the head to the tail and
    wait; once both are ready (warmed up by a 500,000-row write and the events table's snapshot
    loaded, as in the baseline's process) they drain it with ``read_next`` into the group's exactly-once
    sink (``ReaderGroup.delta_sink``) until the end of data. The baseline, in a process of its
    own (``local[2]``), appends ``read_events`` of the same rows to a Delta table. Set-up (the
    JVMs, creating the group, joining) is reported apart. Target >= 0.8x.
(b) Threads: two readers of one process (``create_readers``, one commit) drain
    ``--threaded-events`` events through the same sink, vs ``read_events`` into a Delta table in
    the same process. Reported.
(c) Tailing: 1, 2 and 4 reader processes read a stream written every second for
    ``--tail-seconds``. Printed: commits to the group tables per reader per second (target <= 0.15,
    flat as readers are added) and the median ``read_next`` time (the group's per-batch overhead).

Best of ``--rounds`` runs with the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCOPE, STREAM, S = "bench", "groups", "bench/groups"
QUIET = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
READER_MASTER = os.environ.get("BENCH_READER_MASTER", "local[1]")


# ---- the worker processes ------------------------------------------------------------------------
def worker(argv) -> int:
    """``reader ROOT GROUP ID SINK GO``, ``baseline ROOT SINK GO`` or ``tail ROOT GROUP ID SINK STOP``:
    print READY, wait for the file GO, work, print a JSON line of timings."""
    import pravega_spark as ps

    role, root = argv[0], argv[1]
    spark = ps.spark_session(**QUIET, **{"spark.master": "local[2]" if role == "baseline" else READER_MASTER})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, root)
    if role != "tail":  # part of the set-up: a fresh JVM's first large write runs twice as long (JIT)
        from bench._common import source

        scratch = f"{Path(root).parent}/warm-up-{os.getpid()}"
        source(spark, 500_000, 200).write.format("delta").mode("append").save(scratch)
        spark.read.format("delta").load(scratch).write.format("delta").mode("append").save(scratch + "-copy")
        events = manager.read_events(SCOPE, STREAM)  # both sides load the events table's snapshot in set-up
    if role == "baseline":
        sink, go = argv[2], argv[3]
        print("READY", flush=True)
        while not os.path.exists(go):
            time.sleep(0.01)
        start = time.time()
        events.write.format("delta").mode("append").save(sink)
        print(json.dumps({"start": start, "end": time.time()}), flush=True)
        return 0
    group_name, reader_id, sink_path, signal = argv[2], argv[3], argv[4], argv[5]
    group = manager.reader_group(SCOPE, group_name)
    reader, sink = group.create_reader(reader_id), group.delta_sink(sink_path)
    print("READY", flush=True)
    calls: list[float] = []
    writing = 0.0
    if role == "reader":
        while not os.path.exists(signal):
            time.sleep(0.01)
    start = time.time()
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


def spread(times: list[float]) -> str:
    return f"best {min(times):.2f}s, runs {', '.join(f'{t:.2f}' for t in times)}"


# ---- the three measures ---------------------------------------------------------------------------
def processes(manager, root: str, args) -> None:
    import pravega_spark as ps

    drains, baselines, setups = [], [], []
    for r in range(args.rounds):
        go = Path(root).parent / f"go-{r}"
        t0 = time.perf_counter()
        base = spawn("baseline", root, f"{Path(root).parent}/baseline-{r}", str(go))
        wait_ready([base])
        go.touch()
        [b] = results([base])
        baselines.append(b["end"] - b["start"])
        go = Path(root).parent / f"go-readers-{r}"
        t0 = time.perf_counter()
        name = f"drain-{r}"
        manager.create_reader_group(SCOPE, name, ps.ReaderGroupConfig(
            {S: ("earliest", manager.tail_stream_cut(SCOPE, STREAM))}, automatic_checkpoint_interval=None))
        readers = [spawn("reader", root, name, f"r{i}", f"{Path(root).parent}/sink-{r}", str(go)) for i in range(2)]
        wait_ready(readers)
        setups.append(time.perf_counter() - t0)
        go.touch()
        got = results(readers)
        drains.append(max(g["end"] for g in got) - min(g["start"] for g in got))
        print("    round", r, "readers:", "; ".join(f"{g['end'] - g['start']:.2f}s ({g['calls']} calls: read_next "
                                                   f"{g['read_next_s']:.2f}s, sink writes {g['write_s']:.2f}s)"
                                                   for g in got), flush=True)
        rows = manager.spark.read.format("delta").load(f"{Path(root).parent}/sink-{r}").count()
        assert rows == args.events, (rows, args.events)
    print(f"(a) {args.events:,} events of ~{args.size} B, 4 segments: 2 reader processes into the group's sink vs "
          f"one process's read_events into a Delta table")
    print(f"    read_events + append: {spread(baselines)}")
    print(f"    2 reader processes:   {spread(drains)}; set-up apart (JVMs, group, joins): median "
          f"{statistics.median(setups):.1f}s")
    ratios = [b / d for b, d in zip(baselines, drains, strict=True)]
    print(f"    ratio: best {max(ratios):.2f}x (per round {', '.join(f'{x:.2f}' for x in ratios)}), "
          f"best vs best {min(baselines) / min(drains):.2f}x (target >= 0.8x)")


def threaded(manager, root: str, args) -> None:
    import threading

    import pravega_spark as ps
    from bench._common import source

    manager.create_stream(SCOPE, "threads", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = manager.create_event_writer(SCOPE, "threads", writer_id="bench")
    for part in range(4):
        writer.write_events(source(manager.spark, args.threaded_events // 4, args.size,
                                   start=part * (args.threaded_events // 4)))
    drains, baselines, setups = [], [], []
    for r in range(args.rounds + 1):  # the first round warms up
        start = time.perf_counter()
        manager.read_events(SCOPE, "threads").write.format("delta").mode("append").save(f"{Path(root).parent}/t-base-{r}")
        base = time.perf_counter() - start
        start = time.perf_counter()
        name = f"threads-{r}"
        manager.create_reader_group(SCOPE, name, ps.ReaderGroupConfig(
            {f"{SCOPE}/threads": ("earliest", manager.tail_stream_cut(SCOPE, "threads"))},
            automatic_checkpoint_interval=None))
        group = manager.reader_group(SCOPE, name)
        readers, sink = group.create_readers(["r0", "r1"]), group.delta_sink(f"{Path(root).parent}/t-sink-{r}")
        setup = time.perf_counter() - start

        def drain(reader, sink=sink) -> None:
            while True:
                batch = reader.read_next()
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
        if r:
            drains.append(time.perf_counter() - start)
            baselines.append(base)
            setups.append(setup)
    print(f"(b) {args.threaded_events:,} events: 2 readers in one process (threads) into the group's sink vs "
          f"read_events into a Delta table")
    print(f"    read_events + append: {spread(baselines)}")
    print(f"    2 readers:            {spread(drains)}; set-up (group, create_readers, sink): median "
          f"{statistics.median(setups):.2f}s")
    print(f"    ratio best vs best {min(baselines) / min(drains):.2f}x")


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
        procs = [spawn("tail", root, name, f"r{i}", f"{Path(root).parent}/tail-sink-{n}", str(stop)) for i in range(n)]
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
        print(f"    {n} reader(s): {commits} commits in {elapsed:.0f} s = {commits / n / elapsed:.3f} per reader per "
              f"second; read_next median {statistics.median(g['read_next_ms'] for g in got):.0f} ms "
              f"over {sum(g['calls'] for g in got)} calls")


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["worker"]:
        return worker(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4_000_000)
    parser.add_argument("--threaded-events", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tail-seconds", type=float, default=60)
    parser.add_argument("--tail-readers", default="1,2,4")
    parser.add_argument("--only", default="abc", help="which measures to run (letters)")
    parser.add_argument("--root", default="/tmp/bench-groups")
    args = parser.parse_args(argv)
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
