"""A JVM's live heap, read from outside it (``jcmd``): the memory benches and the long soak use it
for the local driver and for a Spark Connect server alike.

"Live" is the heap in use right after a full collection (``GC.run``, which is ``System.gc()``:
a full collection under G1, Java 17's default), read back with ``GC.heap_info``.
"""

from __future__ import annotations

import re
import subprocess
import time

_USED = re.compile(r"heap\s+total\s+\d+K,\s+used\s+(\d+)K")


def live_heap_mib(pid: int) -> float:
    """MiB in use in JVM ``pid``'s heap after three full collections a second apart: Spark's
    context cleaner drops the accumulators, shuffles and broadcasts of collected jobs from its
    own thread after the first, and the later ones collect what it released."""
    for i in range(3):
        if i:
            time.sleep(1)
        subprocess.run(["jcmd", str(pid), "GC.run"], check=True, capture_output=True, timeout=120)
    out = subprocess.run(["jcmd", str(pid), "GC.heap_info"], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    found = _USED.search(out)
    if found is None:
        raise RuntimeError(f"no heap line in jcmd GC.heap_info's output:\n{out[:2000]}")
    return int(found.group(1)) / 1024


def class_histogram(pid: int) -> str:
    """JVM ``pid``'s class histogram of live objects (``jcmd GC.class_histogram``: a full
    collection first): instances and bytes per class, largest first."""
    return subprocess.run(["jcmd", str(pid), "GC.class_histogram"], check=True, capture_output=True, text=True,
                          timeout=300).stdout


def driver_pid(spark) -> int:
    """The process id of a classic session's driver JVM."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
