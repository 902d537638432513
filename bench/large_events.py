"""Large events: throughput and memory of one 1 GiB event vs 128 regular 8 MiB events.

    .venv/bin/python bench/large_events.py [--mib 1024] [--small-mib 256] [--rounds 5] [--root /tmp/bench-large]

Prints, all in one process (the baselines run in the same JVM, on the same machine state):
  1. write throughput: one MIB event through ``stream_event`` vs the same bytes as MIB/8 regular
     8 MiB events (``write_event`` each, as a Python producer writes them) (target >= 0.9x);
  2. the Python process's peak RSS growth while writing, and while stream-reading (``open_event``),
     the large event, the largest over the rounds (target: under 64 MiB beyond one 8 MiB chunk);
  3. the JVM's peak live heap (after a full GC, sampled every second, in separate untimed runs)
     while writing and reading a SMALL_MIB event and a MIB event (target: not growing with the
     event's size);
  4. read throughput: the large event streamed chunk by chunk vs the regular events read with
     ``read_events(...).toLocalIterator()`` (target >= 0.9x).
1 and 4 alternate the baseline (the regular events) and ours for ``--rounds`` rounds after a
warm-up round, each round on new streams (``bench/_common.alternate``); each round's ratio is the
regular events' seconds / the large event's (a speed: > 1 means the large event is faster) and
the measure is the median of the ratios, with min and max (targets on the median).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from bench._common import Seconds, alternate

CHUNK = ps.MAX_EVENT_SIZE
MIB = 1 << 20


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """Samples this process's RSS every 20 ms; ``growth`` = peak minus the RSS at start."""

    def __enter__(self):
        self.start = self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())

    @property
    def growth(self) -> int:
        return self.peak - self.start


class JvmHeap:
    """Peak live heap between enter and exit: every ``period`` seconds a full GC, then the heap
    in use (what survives a GC is what the code holds; the plain peak of "used" would only show
    how lazily the collector runs)."""

    def __init__(self, spark, period: float = 1.0):
        self._jvm = spark.sparkContext._jvm
        self._period = period

    def _live(self) -> int:
        self._jvm.java.lang.System.gc()
        bean = self._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
        return int(bean.getHeapMemoryUsage().getUsed())

    def __enter__(self):
        self.start = self.peak = self._live()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self._period):
            self.peak = max(self.peak, self._live())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


COMMIT_SECONDS: list[float] = []  # how long each large event's commit() took


def write_large(writer, block: bytes, mib: int):
    with writer.stream_event(routing_key="cam-1") as event:
        for _ in range(mib * MIB // len(block)):
            event.write(block)
        start = time.perf_counter()
        result = event.commit()
        COMMIT_SECONDS.append(time.perf_counter() - start)
        return result


def read_large(manager, pointer) -> int:
    n = 0
    with manager.open_event(pointer) as event:
        for chunk in event.iter_chunks():
            n += len(chunk)
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--small-mib", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5, help="1. and 4.: rounds after a warm-up round")
    p.add_argument("--root", default="/tmp/bench-large")
    p.add_argument("--heap-only", action="store_true", help="only the JVM heap measurements (3.)")
    p.add_argument("--skip-heap", action="store_true", help="skip the JVM heap measurements (3.)")
    a = p.parse_args(argv)
    shutil.rmtree(a.root, ignore_errors=True)
    # both reads fetch 64 MiB per task (8 chunks / 8 regular events): the regular read with
    # Spark's default 128 MiB partitions loses task results in a 1 GiB driver
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.driver.memory": "2g",
                                "spark.sql.files.maxPartitionBytes": str(8 * CHUNK)})
    spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, a.root)
    manager.create_scope("bench")
    block = os.urandom(CHUNK)  # incompressible; the source's cost is not measured
    # warm-up (JIT, table caches): one regular event and a small large event, not measured
    manager.create_stream("bench", "warm", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    warm = manager.create_event_writer("bench", "warm", writer_id="warm")
    warm.write_event(block, routing_key="cam-1")
    write_large(warm, block, 24)

    if not a.heap_only:
        timings(manager, block, a.mib, a.rounds)
    if not a.skip_heap:
        heap_use(spark, manager, block, a.small_mib, a.mib)
    return 0


def timings(manager, block: bytes, mib: int, rounds: int) -> None:
    """1., 2. and 4.: throughput against the regular events (new streams each round), and
    Python's RSS."""
    n = mib * MIB // CHUNK
    write_rss: list[int] = []
    read_rss: list[int] = []

    def stream(kind: str, r: int) -> str:
        name = f"{kind}-{r}"
        manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
        return name

    def write_regular(r: int) -> float:
        writer = manager.create_event_writer("bench", stream("regular", r), writer_id="regular")
        start = time.perf_counter()
        for _ in range(n):
            writer.write_event(block, routing_key="cam-1")
        return Seconds(time.perf_counter() - start)

    def write_one_large(r: int) -> float:
        writer = manager.create_event_writer("bench", stream("large", r), writer_id="large")
        with PeakRss() as peak:
            start = time.perf_counter()
            result = write_large(writer, block, mib)
            seconds = time.perf_counter() - start
        assert result.byte_count == 8 + mib * MIB
        write_rss.append(peak.growth)
        return Seconds(seconds)

    print(f"write: one {mib} MiB event vs {n} regular 8 MiB events", flush=True)
    alternate((f"{n} regular events", write_regular), (f"one {mib} MiB event", write_one_large),
              rounds=rounds, label="write", targets=0.9)
    print(f"  its commit(): median {statistics.median(COMMIT_SECONDS[1:]):.2f} s (the last chunk staged, then one "
          "metadata-only commit)")

    def read_regular(r: int) -> float:
        start = time.perf_counter()
        got = 0
        for row in manager.read_events("bench", f"regular-{r}").select("event").toLocalIterator():
            got += len(row[0])
        seconds = time.perf_counter() - start
        assert got == mib * MIB, got
        return Seconds(seconds)

    def read_one_large(r: int) -> float:
        pointer = manager.read_events("bench", f"large-{r}").select("scope", "stream", "segment_id", "offset").first()
        with PeakRss() as peak:
            start = time.perf_counter()
            got = read_large(manager, pointer)
            seconds = time.perf_counter() - start
        assert got == mib * MIB, got
        read_rss.append(peak.growth)
        for kind in ("regular", "large"):  # the disk back
            manager.seal_stream("bench", f"{kind}-{r}")
            manager.delete_stream("bench", f"{kind}-{r}")
        return Seconds(seconds)

    print(f"read: the {mib} MiB event streamed vs {n} regular events", flush=True)
    alternate((f"{n} regular events", read_regular), (f"one {mib} MiB event", read_one_large),
              rounds=rounds, label="read", targets=0.9)
    print(f"Python peak RSS growth, the largest of {len(write_rss)} rounds (warm-up included): writing "
          f"{max(write_rss) / MIB:.0f} MiB, stream-reading {max(read_rss) / MIB:.0f} MiB (target: under "
          f"{64 + CHUNK // MIB} MiB = one chunk + 64 MiB)")


def heap_use(spark, manager, block: bytes, small_mib: int, large_mib: int) -> None:
    """3.: the JVM's live heap, measured apart from the timings (a full GC every second slows the
    work)."""
    heap = {}
    for name, mib in (("small", small_mib), ("heap", large_mib)):
        manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
        writer = manager.create_event_writer("bench", name, writer_id=name)
        with JvmHeap(spark) as write_heap:
            write_large(writer, block, mib)
        row = manager.read_events("bench", name).select("scope", "stream", "segment_id", "offset").first()
        with JvmHeap(spark) as read_heap:
            assert read_large(manager, row) == mib * MIB
        heap[mib] = (write_heap, read_heap)
    (sw, sr), (lw, lr) = heap[small_mib], heap[large_mib]

    def growth(h: JvmHeap) -> str:
        return f"{h.peak / MIB:.0f} MiB (+{(h.peak - h.start) / MIB:.0f} over its start)"

    print(f"JVM peak live heap (after a full GC, sampled every second): writing {small_mib} MiB "
          f"{growth(sw)} vs {large_mib} MiB {growth(lw)}; reading {growth(sr)} vs {growth(lr)} "
          "(target: not growing with the event's size)")


if __name__ == "__main__":
    sys.exit(main())
