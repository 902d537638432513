"""Large events over Spark Connect against the same on a classic session, and a 1 GiB event over
Connect in bounded memory (issue #67).

    .venv/bin/python bench/large_events_connect.py [--mib 64] [--rounds 5] [--big-mib 1024]
        [--server-memory 1g] [--root /tmp/bench-large-connect]

PySpark cannot hold a classic and a Connect session in one process (its functions pick the one
kind by the process's mode), so each side is a worker process holding one session for the whole
run: a classic local session (the baseline), and a Spark Connect session to a local server with
``--server-memory`` of heap (``SPARK_REMOTE``, else one started for the run). This process
alternates them round by round and reads the seconds each measured. Prints:
  1. a MIB MiB large event written through ``stream_event`` (the default chunk size) and read
     back with ``open_event`` (its bytes hashed as they stream), Connect vs classic, alternating
     for ``--rounds`` rounds after a warm-up round, each side on its own stream; ratio = Connect
     seconds / classic seconds (a cost; issue #67's target <= 2x on a 1 GiB server);
  2. one BIG-MIB MiB event written and read back the same way over Connect (untimed against a
     baseline): its seconds, this process's peak RSS growth, and the server's peak live heap
     (``jcmd``, after full collections, sampled every few seconds) against its heap before.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import SparkSession

import pravega_spark as ps
from bench._common import COST, Seconds, alternate, connect_server
from bench.heap import live_heap_mib
from bench.large_events import PeakRss

MIB = 1 << 20
SERVER_PID = Path(__file__).resolve().parent.parent / ".connect_server" / "pid"


def round_trip(manager: ps.StreamManager, writer, mib: int, key: str) -> tuple[float, float]:
    """Write a ``mib`` MiB event under ``key`` and stream it back: (write seconds, read seconds)."""
    piece = os.urandom(MIB)
    digest = hashlib.sha256()
    begin = time.perf_counter()
    with writer.stream_event(key) as event:
        for i in range(mib):
            block = i.to_bytes(8, "big") + piece[8:]
            digest.update(block)
            event.write(block)
        result = event.commit()
    wrote = time.perf_counter() - begin
    [(segment, size)] = result.segments.items()  # the event's one segment: it ends at the new tail
    cut = result.tail_stream_cut
    pointer = f"{cut.stream}:{segment}:{cut.positions[segment] - size}"
    begin = time.perf_counter()
    back = hashlib.sha256()
    n = 0
    with manager.open_event(pointer) as stream:
        for chunk in stream.iter_chunks():
            back.update(chunk)
            n += len(chunk)
    read = time.perf_counter() - begin
    assert (n, back.hexdigest()) == (mib * MIB, digest.hexdigest()), (n, mib)
    return wrote, read


class Worker:
    """A worker process holding one session (``--worker classic|connect``): each ``round(r)``
    writes and reads back one event there and returns (write seconds, read seconds)."""

    def __init__(self, name: str, args: list[str]):
        self.name = name
        env = dict(os.environ)
        if name == "classic":
            env.pop("SPARK_REMOTE", None)  # else ps.spark_session() would connect
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", name, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.ask("ready")

    def ask(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} worker ended (exit {self.proc.wait()})")
        return json.loads(line)

    def round(self, r: int) -> Seconds:
        out = self.ask(f"round {r}")
        print(f"    {self.name} round {r}: write {out['wrote']:.2f} s, read {out['read']:.2f} s", flush=True)
        return Seconds(out["wrote"] + out["read"])

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def serve(name: str, a) -> int:
    """The worker's loop: one session, one stream, a round per command read on stdin."""
    if name == "classic":
        session = ps.spark_session(**{"spark.ui.enabled": "false", "spark.driver.memory": "2g"})
        session.sparkContext.setLogLevel("ERROR")
    else:
        session = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).create()
    manager = ps.StreamManager(session, f"{a.root}/{name}")
    manager.create_scope("bench")
    manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    writer = manager.create_event_writer("bench", name, f"big-{name}")

    def reply(**fields):
        print(json.dumps(fields), flush=True)
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # the library's and Spark's prints off the pipe
    try:
        for line in sys.stdin:
            command, *rest = line.split()
            sys.stdout = real_stdout
            if command == "ready":
                reply(ready=True)
            elif command == "round":
                wrote, read = round_trip(manager, writer, a.mib, f"k{rest[0]}")
                reply(wrote=wrote, read=read)
            elif command == "big":
                manager.create_stream("bench", "big", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
                big = manager.create_event_writer("bench", "big", "big")
                with PeakRss() as client:
                    wrote, read = round_trip(manager, big, a.big_mib, "big")
                reply(wrote=wrote, read=read, rss_growth=client.growth)
            sys.stdout = sys.stderr
    finally:
        sys.stdout = real_stdout
        session.stop()
    return 0


class ServerHeap:
    """The Connect server's peak live heap (MiB, after full collections) between enter and exit."""

    def __init__(self, pid: int, period: float = 2.0):
        self.pid, self.period = pid, period

    def __enter__(self):
        self.start = self.peak = live_heap_mib(self.pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.period):
            try:
                self.peak = max(self.peak, live_heap_mib(self.pid))
            except Exception as exc:  # the server gone: reported by the round trip itself
                print(f"    (heap sample failed: {exc})", flush=True)
                return

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--big-mib", type=int, default=1024, help="2.: the event over Connect (0: skip)")
    p.add_argument("--server-memory", default="1g")
    p.add_argument("--root", default="/tmp/bench-large-connect")
    p.add_argument("--worker", choices=("classic", "connect"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.root = str(Path(a.root).resolve())
    if a.worker:
        return serve(a.worker, a)
    shutil.rmtree(a.root, ignore_errors=True)
    passed = ["--mib", str(a.mib), "--big-mib", str(a.big_mib), "--root", a.root]
    with connect_server(memory=a.server_memory) as remote:
        print(f"== classic and Spark Connect ({remote}, {a.server_memory} server), a worker process each", flush=True)
        classic, connect = Worker("classic", passed), Worker("connect", passed)
        try:
            alternate(("classic", classic.round), ("Connect", connect.round),
                      rounds=a.rounds, label=f"{a.mib} MiB large event written and read (open_event)",
                      targets=2.0, orientation=COST)
            classic.close()
            if a.big_mib:
                pid = int(SERVER_PID.read_text()) if SERVER_PID.exists() else None  # a server this run started
                with ServerHeap(pid) if pid else contextlib.nullcontext() as server:
                    out = connect.ask("big")
                print(f"{a.big_mib} MiB large event over Connect: write {out['wrote']:.1f} s, read {out['read']:.1f} s; "
                      f"client peak RSS growth {out['rss_growth'] / MIB:.0f} MiB", flush=True)
                if pid:
                    print(f"  server live heap: {server.start:.0f} MiB before, peak {server.peak:.0f} MiB "
                          f"({a.server_memory} heap)", flush=True)
        finally:
            for w in (classic, connect):
                if w.proc.poll() is None:
                    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
