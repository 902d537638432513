"""A healthy run prints no traceback and no warning a user cannot act on: the auto-scaling demo
(whose small-write probe once stopped Python workers mid-stream, 13 ``BrokenPipeError`` tracebacks
per run) as a user runs it, in its own process, its whole console output checked. The demo
pipeline's console is checked the same way by the cluster tier (tests/cluster/test_cluster.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# a Spark or Hadoop warning line (log4j's pattern) or a Python traceback
NOISE = re.compile(r"Traceback \(most recent call last\)|BrokenPipeError|^\S+ \S+ WARN ", re.MULTILINE)


@pytest.mark.slow
def test_the_autoscale_demo_prints_no_traceback_and_no_spark_warning(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("PRAVEGA_SPARK_", "SPARK_"))}
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "autoscale_demo.py"), "--root", str(tmp_path / "s"),
                           "--minutes", "36"],  # the split at minute 10, the merge by minute 34
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "RESULT: OK" in done.stdout
    assert not NOISE.findall(out), "\n".join(line for line in out.splitlines() if NOISE.search(line))[:3000]
