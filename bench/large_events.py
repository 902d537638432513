"""Large events: throughput and memory of one 1 GiB event vs 128 regular 8 MiB events.

    .venv/bin/python bench/large_events.py [--mib 1024] [--small-mib 256] [--root /tmp/bench-large]

Prints, all in one process (the baselines run in the same JVM, on the same machine state):
  1. write throughput: one MIB event through ``stream_event`` vs the same bytes as MIB/8 regular
     8 MiB events (``write_event`` each, as a Python producer writes them) (target >= 0.9x);
  2. the Python process's peak RSS growth while writing, and while stream-reading (``open_event``),
     the large event (target: under 64 MiB beyond one 8 MiB chunk);
  3. the JVM's peak live heap (after a full GC, sampled every second, in separate untimed runs)
     while writing and reading a SMALL_MIB event and a MIB event (target: not growing with the
     event's size);
  4. read throughput: the large event streamed chunk by chunk vs the regular events read with
     ``read_events(...).toLocalIterator()`` (target >= 0.9x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps

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
    for name in ("large", "regular"):
        manager.create_stream("bench", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    block = os.urandom(CHUNK)  # incompressible; the source's cost is not measured
    regular = manager.create_event_writer("bench", "regular", writer_id="regular")
    large = manager.create_event_writer("bench", "large", writer_id="large")

    # warm-up (JIT, table caches): one regular event and a small large event, not measured
    manager.create_stream("bench", "warm", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    warm = manager.create_event_writer("bench", "warm", writer_id="warm")
    warm.write_event(block, routing_key="cam-1")
    write_large(warm, block, 24)

    if not a.heap_only:
        timings(manager, regular, large, block, a.mib)
    if not a.skip_heap:
        heap_use(spark, manager, block, a.small_mib, a.mib)
    return 0


def timings(manager, regular, large, block: bytes, mib: int) -> None:
    """1., 2. and 4.: throughput against the regular events, and Python's RSS."""
    n = mib * MIB // CHUNK
    start = time.perf_counter()
    for i in range(n):
        regular.write_event(block, routing_key="cam-1")
        if (i + 1) % 32 == 0:
            print(f"  regular events: {i + 1}/{n} ({time.perf_counter() - start:.0f} s)", flush=True)
    regular_write = time.perf_counter() - start

    with PeakRss() as write_rss:
        start = time.perf_counter()
        result = write_large(large, block, mib)
        large_write = time.perf_counter() - start
    assert result.byte_count == 8 + mib * MIB
    print(f"write: one {mib} MiB event {large_write:.1f} s ({mib / large_write:.1f} MiB/s) vs "
          f"{n} regular 8 MiB events {regular_write:.1f} s ({mib / regular_write:.1f} MiB/s): "
          f"{regular_write / large_write:.2f}x (target >= 0.9x); its commit() took {COMMIT_SECONDS[-1]:.2f} s "
          "(the last chunk staged, then one metadata-only commit)")

    start = time.perf_counter()
    got = 0
    for row in manager.read_events("bench", "regular").select("event").toLocalIterator():
        got += len(row[0])
    regular_read = time.perf_counter() - start
    assert got == mib * MIB, got
    pointer = manager.read_events("bench", "large").select("scope", "stream", "segment_id", "offset").first()
    with PeakRss() as read_rss:
        start = time.perf_counter()
        got = read_large(manager, pointer)
        large_read = time.perf_counter() - start
    assert got == mib * MIB, got
    print(f"read: the {mib} MiB event streamed {large_read:.1f} s ({mib / large_read:.1f} MiB/s) vs "
          f"{n} regular events {regular_read:.1f} s ({mib / regular_read:.1f} MiB/s): "
          f"{regular_read / large_read:.2f}x (target >= 0.9x)")
    print(f"Python peak RSS growth: writing {write_rss.growth / MIB:.0f} MiB, stream-reading "
          f"{read_rss.growth / MIB:.0f} MiB (target: under {64 + CHUNK // MIB} MiB = one chunk + 64 MiB)")



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
