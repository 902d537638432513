"""Four writer processes append to one 2-segment stream while a fifth scales it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import pravega_spark as ps
from tests.invariants import check_key_order, check_stream_consistent
from tests.workers import batch_rows

REPO = Path(__file__).resolve().parent.parent


def spawn(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PRAVEGA_SPARK_FAILPOINT", None)
    return subprocess.Popen([sys.executable, "-m", "tests.workers", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_concurrent_writers_and_scaler(spark, root, manager):
    manager.create_scope("iot")
    manager.create_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    writers = [f"w{i}" for i in range(4)]
    batches, per_batch = 4, 60
    procs = [spawn("append", "--root", root, "--writer", w, "--batches", str(batches),
                   "--per-batch", str(per_batch)) for w in writers]
    procs.append(spawn("scale", "--root", root, "--scales", "2", "--delay", "15", "--pause", "5"))
    outputs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"worker failed:\n{out}\n{err[-3000:]}"
    assert outputs[-1][0].count("SCALED") == 2

    events = check_stream_consistent(spark, manager, "iot", "sensors")
    got = Counter(r.event.decode() for r in events)
    expected = Counter(p for w in writers for b in range(batches) for _, p in batch_rows(w, b, per_batch, 8))
    assert got == expected  # every event exactly once
    check_key_order(events)
    info = manager.stream_info("iot", "sensors")
    assert info.current_epoch == 2
    # the read API agrees with the raw table
    assert manager.read_events("iot", "sensors").count() == sum(expected.values())


@pytest.mark.slow
def test_truncation_while_writers_append_and_a_scale_happens(spark, root, manager):
    """Nothing above the head is lost: the bytes truncated plus the bytes still stored are
    exactly the bytes written, every stored event is a written one, once, in order per key."""
    manager.create_scope("iot")
    manager.create_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    writers = ["w0", "w1"]
    batches, per_batch = 5, 60
    procs = [spawn("append", "--root", root, "--writer", w, "--batches", str(batches),
                   "--per-batch", str(per_batch)) for w in writers]
    procs.append(spawn("scale", "--root", root, "--scales", "1", "--delay", "20", "--pause", "1"))
    procs.append(spawn("truncate", "--root", root, "--truncations", "2", "--delay", "15", "--pause", "8"))
    outputs = [p.communicate(timeout=1200) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"worker failed:\n{out}\n{err[-3000:]}"
    assert outputs[-1][0].count("TRUNCATED") == 2

    events = check_stream_consistent(spark, manager, "iot", "sensors")
    written = Counter(p for w in writers for b in range(batches) for _, p in batch_rows(w, b, per_batch, 8))
    stored = Counter(r.event.decode() for r in events)
    assert all(n == 1 for n in stored.values()) and set(stored) <= set(written)
    framed = sum(8 + len(p.encode()) for p in written.elements())
    truncated = manager.truncation_record("iot", "sensors").size_till
    assert truncated > 0
    assert truncated + sum(8 + len(r.event) for r in events) == framed
    check_key_order(events)
    assert manager.read_events("iot", "sensors").count() == len(events)
