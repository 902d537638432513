"""Contention: writers, a scaler and a truncator on one 2-segment stream, as an operator runs them.

    .venv/bin/python bench/contention.py [--seconds 300] [--writers 3] [--root /tmp/bench-contention]

For SECONDS, WRITERS idempotent writer processes (20 keys shared by all, 20 events per write) append
to one stream while a process scales it every few seconds (split, then merge back) and another
truncates it behind the writers. Each is a process of its own (own JVM, ``local[1]``), as in
production. Prints each writer's completed writes, lost attempts (retries) and commit latency
(median and p95), the scales and truncations done, then checks the result: every key reads back
in order with no gap after the head, and ``validate_stream`` passes.

Targets (issue #17): every writer completes at least half the mean number of writes; the scaler
completes at least 10 scales.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps

SCOPE, STREAM = "bench", "contention"
KEYS, PER_WRITE = 20, 20
CONF = {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false",
        "spark.driver.memory": "768m"}


def manager(root: str) -> ps.StreamManager:
    spark = ps.spark_session(**CONF)
    spark.sparkContext.setLogLevel("ERROR")
    return ps.StreamManager(spark, root)


def run_writer(root: str, name: str, deadline: float) -> dict:
    m = manager(root)
    writer = m.create_event_writer(SCOPE, STREAM, writer_id=name)
    number = writer.last_write_number() + 1
    latencies, retries = [], 0
    while time.time() < deadline:
        rows = [(f"key-{i % KEYS}", f"{name}:{number:06d}:{i:03d}") for i in range(PER_WRITE)]
        df = m.spark.createDataFrame(rows, "routing_key string, event string")
        start = time.perf_counter()
        result = writer.write_events(df, write_number=number)
        latencies.append(time.perf_counter() - start)
        retries += result.retries
        number += 1
    return {"writes": len(latencies), "retries": retries, "latencies": latencies}


def run_scaler(root: str, deadline: float, pause: float) -> dict:
    m = manager(root)
    scales, latencies = 0, []
    while time.time() < deadline:
        info = m.stream_info(SCOPE, STREAM)
        segs = sorted(m.segments(SCOPE, STREAM, epoch=info.current_epoch).collect(), key=lambda s: s.key_start)
        start = time.perf_counter()
        if len(segs) <= 2:  # split the widest
            s = max(segs, key=lambda s: s.key_end - s.key_start)
            mid = (s.key_start + s.key_end) / 2
            m.scale_stream(SCOPE, STREAM, [s.segment_id], [(s.key_start, mid), (mid, s.key_end)])
        else:  # merge two neighbours back
            x, y = next((a, b) for a, b in zip(segs, segs[1:], strict=False)
                        if a.key_end - a.key_start + b.key_end - b.key_start <= 0.5)
            m.scale_stream(SCOPE, STREAM, [x.segment_id, y.segment_id], [(x.key_start, y.key_end)])
        latencies.append(time.perf_counter() - start)
        scales += 1
        time.sleep(pause)
    return {"scales": scales, "latencies": latencies}


def run_truncator(root: str, deadline: float, pause: float) -> dict:
    m = manager(root)
    done = 0
    while time.time() + pause < deadline:
        cut = m.tail_stream_cut(SCOPE, STREAM)
        time.sleep(pause)
        m.truncate_stream(SCOPE, STREAM, cut)
        done += 1
    return {"truncations": done}


def spawn(root: str, role: str, name: str, deadline: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--root", root, "--role", role, "--name", name,
                             "--deadline", str(deadline)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check(root: str, writers: list[str]) -> tuple[bool, str]:
    m = manager(root)
    rows = m.read_events(SCOPE, STREAM).select("routing_key", "segment_id", "offset", "event").collect()
    by_key = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.segment_id, r.offset)):
        by_key[r.routing_key].append(bytes(r.event).decode())
    problems = []
    for key, seq in by_key.items():
        for w in writers:
            numbers = [int(p.split(":")[1]) for p in seq if p.startswith(w + ":")]
            if numbers != sorted(numbers) or (numbers and numbers != list(range(numbers[0], numbers[-1] + 1))):
                problems.append(f"{key}/{w}: out of order or a gap")
    result = m.validate_stream(SCOPE, STREAM)
    if not result.success:
        problems.append(str(result))
    return not problems, f"{len(rows):,} events over {len(by_key)} keys read back; validate_stream " \
        f"{'passed' if result.success else 'FAILED'}" + ("" if not problems else "; " + "; ".join(problems[:5]))


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)] if values else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--writers", type=int, default=3)
    p.add_argument("--scale-pause", type=float, default=3.0)
    p.add_argument("--truncate-pause", type=float, default=20.0)
    p.add_argument("--root", default="/tmp/bench-contention")
    p.add_argument("--role", default=None, help=argparse.SUPPRESS)
    p.add_argument("--name", default="", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.role == "writer":
        print(json.dumps(run_writer(a.root, a.name, a.deadline)))
        return 0
    if a.role == "scaler":
        print(json.dumps(run_scaler(a.root, a.deadline, 3.0)))
        return 0
    if a.role == "truncator":
        print(json.dumps(run_truncator(a.root, a.deadline, 20.0)))
        return 0

    shutil.rmtree(a.root, ignore_errors=True)
    m = manager(a.root)
    m.create_scope(SCOPE)
    m.create_stream(SCOPE, STREAM, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    m.spark.stop()
    start = time.time() + 25  # every process has started its JVM by then
    deadline = start + a.seconds
    names = [f"w{i}" for i in range(a.writers)]
    procs = {n: spawn(a.root, "writer", n, deadline) for n in names}
    procs["scaler"] = spawn(a.root, "scaler", "scaler", deadline)
    procs["truncator"] = spawn(a.root, "truncator", "truncator", deadline)
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=a.seconds + 900)
        if proc.returncode != 0:
            print(f"{name} failed:\n{err[-3000:]}")
            return 1
        results[name] = json.loads(out.strip().splitlines()[-1])
    print(f"{a.seconds:.0f} s, {a.writers} writers ({KEYS} shared keys, {PER_WRITE} events per write), "
          f"a scaler and a truncator, one 2-segment stream")
    writes = [results[n]["writes"] for n in names]
    mean = statistics.mean(writes)
    for n in names:
        r = results[n]
        lat = r["latencies"][1:] or r["latencies"]  # the first write pays for the session's warm-up
        print(f"  {n}: {r['writes']:4d} writes, {r['retries']:4d} retries, commit latency median "
              f"{statistics.median(lat):.2f} s, p95 {p95(lat):.2f} s")
    scales = results["scaler"]["scales"]
    print(f"  scaler: {scales} scales (median {statistics.median(results['scaler']['latencies'] or [0]):.2f} s); "
          f"truncator: {results['truncator']['truncations']} truncations")
    fair = min(writes) >= mean / 2
    print(f"  fairness: min {min(writes)} vs mean {mean:.1f} writes -> {'OK' if fair else 'MISSED'} (target >= half the mean)")
    print(f"  scales: {scales} -> {'OK' if scales >= 10 else 'MISSED'} (target >= 10)")
    ok, summary = check(a.root, names)
    print(f"  check: {summary}")
    return 0 if ok and fair and scales >= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
