"""Real OS processes for the concurrency, crash and race tests: ``spawn`` starts a worker
(``python -m tests.workers <command> ...``) whose JVM starts from a class-data-sharing archive made
once per test session."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.workers import CDS_ARCHIVE, CDS_DUMP

REPO = Path(__file__).resolve().parent.parent

_ARCHIVE = Path(tempfile.gettempdir()) / f"pravega-spark-workers-{os.getpid()}.jsa"


def worker_archive() -> str:
    """A class-data-sharing archive of a worker JVM's classes, made once per test session by one
    warm-up worker (~15 s): every worker JVM after it starts ~2.5 s faster (measured 5.4-5.7 s
    vs 2.9-3.0 s to a first stream read). A JVM that cannot use it starts without it."""
    if not _ARCHIVE.exists():
        env = dict(os.environ, PYTHONPATH=str(REPO), **{CDS_DUMP: str(_ARCHIVE)})
        env.pop("PRAVEGA_SPARK_FAILPOINT", None)
        with tempfile.TemporaryDirectory() as root:
            subprocess.run([sys.executable, "-m", "tests.workers", "warm-up", "--root", root], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
        atexit.register(_ARCHIVE.unlink, missing_ok=True)
    return str(_ARCHIVE)


# ``make soak`` runs the process scenarios at full size (more parties, rounds, events) and
# ``make test`` at the size that still races: scripts/soak.sh sets this
FULL_SIZE = os.environ.get("PRAVEGA_SPARK_TEST_FULL_SIZE") == "1"


def sized(in_test: int, in_soak: int) -> int:
    """A scenario's size: ``in_soak`` under ``make soak``, ``in_test`` under ``make test``."""
    return in_soak if FULL_SIZE else in_test


def soak_only(*values: object):
    """A ``parametrize`` case that only ``make soak`` runs (marked ``soak``): a further kill point
    or size of a scenario whose main case ``make test`` runs."""
    return pytest.param(*values, marks=pytest.mark.soak)


def spawn(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), **{CDS_ARCHIVE: worker_archive()})
    env.pop("PRAVEGA_SPARK_FAILPOINT", None)
    return subprocess.Popen([sys.executable, "-m", "tests.workers", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Watched:
    """A spawned worker whose stdout and stderr are read by threads as they come (no pipe ever
    fills up and blocks it), so a test can fail at once, with what it printed, when it exits."""

    def __init__(self, name: str, proc: subprocess.Popen) -> None:
        self.name, self.proc = name, proc
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [threading.Thread(target=lambda s=s, into=into: into.extend(iter(s.readline, "")), daemon=True)
                         for s, into in ((proc.stdout, self.out), (proc.stderr, self.err))]
        for t in self._threads:
            t.start()

    def report(self, err_chars: int = 4000) -> str:
        return (f"--- worker {self.name} (exit {self.proc.poll()}) stdout:\n{''.join(self.out)}"
                f"--- stderr (last {err_chars} chars):\n{''.join(self.err)[-err_chars:]}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=10)
        return code


def assert_alive(workers: list[Watched]) -> None:
    """Fail with the output of every worker that has exited."""
    dead = [w for w in workers if not w.alive()]
    assert not dead, "\n".join(w.report() for w in dead)
