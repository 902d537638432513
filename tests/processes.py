"""Real OS processes for the concurrency, crash and race tests: ``spawn`` runs a worker command
(``tests.workers``) in a warm worker process of its own (``python -m tests.workers serve``), whose
JVM started from a class-data-sharing archive made once per test session (where one can be). A
worker runs one command at a time and serves later scenarios after it: each scenario's processes
are real and concurrent, but most of them are past their JVM's start and first Delta calls."""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.workers import CDS_ARCHIVE, CDS_DUMP, SENTINEL

REPO = Path(__file__).resolve().parent.parent

_ARCHIVE = Path(tempfile.gettempdir()) / f"pravega-spark-workers-{os.getpid()}.jsa"


def worker_archive() -> str:
    """A class-data-sharing archive of a worker JVM's classes, made once per test session by one
    warm-up worker (~15-40 s): every worker JVM after it starts ~2.5 s faster (measured 5.4-5.7 s
    vs 2.9-3.0 s to a first stream read). None (``""``) when none can be made: workers of a Spark
    Connect session (``SPARK_REMOTE``) have no JVM, and a JVM makes no archive when a non-empty
    directory is on its class path, where Spark puts ``SPARK_CONF_DIR`` (the S3 tier's
    ``spark-defaults.conf``). The warm-up runs at most once: before this rule the S3 tier ran it
    again, ~40 s each time, for every worker it started, and a scenario's last worker started
    minutes after its first."""
    global _warm_up_done
    if os.environ.get("SPARK_REMOTE") or _conf_dir_on_class_path():
        return ""
    if not _warm_up_done:
        _warm_up_done = True
        env = dict(os.environ, PYTHONPATH=str(REPO), **{CDS_DUMP: str(_ARCHIVE)})
        env.pop("PRAVEGA_SPARK_FAILPOINT", None)
        with tempfile.TemporaryDirectory() as root:
            subprocess.run([sys.executable, "-m", "tests.workers", "warm-up", "--root", root], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
        atexit.register(_ARCHIVE.unlink, missing_ok=True)
    return str(_ARCHIVE) if _ARCHIVE.exists() else ""


_warm_up_done = False  # whether this test session has run the warm-up


def _conf_dir_on_class_path() -> bool:
    """Whether Spark will put a non-empty ``SPARK_CONF_DIR`` on a worker JVM's class path."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    return bool(conf_dir) and os.path.isdir(conf_dir) and bool(os.listdir(conf_dir))


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


def _test_env() -> dict[str, str]:
    """The library's variables of this test process, as a worker command sees them."""
    return {k: v for k, v in os.environ.items() if k.startswith("PRAVEGA_SPARK_") and k != "PRAVEGA_SPARK_FAILPOINT"}


class _Lines:
    """One command's lines of one stream, as they come: ``readline`` blocks until the next line
    and returns "" once the stream is closed (a file-like end, as ``Popen``'s pipes give)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.closed = False
        self._read = 0
        self._cond = threading.Condition()

    def add(self, line: str) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def readline(self) -> str:
        with self._cond:
            self._cond.wait_for(lambda: self._read < len(self.lines) or self.closed)
            if self._read < len(self.lines):
                self._read += 1
                return self.lines[self._read - 1]
            return ""

    def read(self) -> str:
        """The lines not read yet, once the stream has ended."""
        return "".join(iter(self.readline, ""))

    def __iter__(self):
        return iter(self.readline, "")


class WorkerRun:
    """One command run by a warm worker, with ``subprocess.Popen``'s interface as the tests use
    it: ``stdout``/``stderr`` read while they come, ``poll``, ``wait``, ``communicate``,
    ``send_signal``/``kill`` (which kill the worker, as they would kill a worker of its own)."""

    def __init__(self, worker: WarmWorker, args: tuple[str, ...]) -> None:
        self.worker, self.args, self.pid = worker, args, worker.proc.pid
        self.stdout, self.stderr = _Lines(), _Lines()
        self.returncode: int | None = None
        self._done = threading.Event()

    def end(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self.stdout.close()
        self.stderr.close()
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(list(self.args), timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return "".join(self.stdout.lines), "".join(self.stderr.lines)

    def send_signal(self, sig: int) -> None:
        if not self._done.is_set():
            self.worker.proc.send_signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class WarmWorker:
    """A worker process (``python -m tests.workers serve``: its own JVM, session made at start)
    that runs commands one after another, so that a scenario's processes start warm. A command
    that kills its process (a failpoint, a test's SIGKILL) ends the worker with it."""

    def __init__(self, pool: _Pool) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), **{CDS_ARCHIVE: worker_archive()})
        env.pop("PRAVEGA_SPARK_FAILPOINT", None)
        self.pool = pool
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.workers", "serve"], cwd=REPO, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=1)
        self.run: WorkerRun | None = None
        self._ended = 0  # how many of the current command's two streams have ended
        self._lock = threading.Lock()
        for stream, name in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr")):
            threading.Thread(target=self._pump, args=(stream, name), daemon=True).start()

    def start(self, args: tuple[str, ...], job: str = "") -> WorkerRun:
        self.run, self._ended = WorkerRun(self, args), 0
        self.proc.stdin.write(json.dumps({"args": list(args), "job": job, "env": _test_env()}) + "\n")
        self.proc.stdin.flush()
        return self.run

    def _pump(self, stream, name: str) -> None:
        for line in iter(stream.readline, ""):
            run = self.run
            if line.startswith(SENTINEL):
                with self._lock:
                    self._ended += 1
                    done = self._ended == 2
                if run is not None and name == "stdout":
                    run.returncode = int(line.split()[1])
                if done and run is not None:
                    self.run = None
                    run.end(run.returncode)
                    self.pool.give_back(self)
            elif run is not None:
                getattr(run, name).add(line)
        code = self.proc.wait()  # the process has ended: its command with it
        self.pool.forget(self)
        if (run := self.run) is not None:
            run.end(code)

    def alive(self) -> bool:
        return self.proc.poll() is None


class _Pool:
    """The test session's warm workers: a spawn takes an idle one or starts one."""

    def __init__(self) -> None:
        self._idle: list[WarmWorker] = []
        self._all: list[WarmWorker] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def take(self) -> WarmWorker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
        worker = WarmWorker(self)
        with self._lock:
            self._all.append(worker)
        return worker

    def give_back(self, worker: WarmWorker) -> None:
        with self._lock:
            if worker.alive():
                self._idle.append(worker)

    def forget(self, worker: WarmWorker) -> None:
        with self._lock:
            self._idle = [w for w in self._idle if w is not worker]
            self._all = [w for w in self._all if w is not worker]

    def close(self) -> None:
        for worker in list(self._all):
            if worker.alive():
                worker.proc.kill()


_POOL = _Pool()


def spawn(*args: str) -> WorkerRun:
    """Run a worker command (``tests.workers``) in a warm worker process of its own: a process
    that nothing else uses until the command ends, with its own JVM, started for an earlier
    scenario or now."""
    return _POOL.take().start(args)


def spawn_job(job: str, *args: str) -> WorkerRun:
    """Run ``jobs/<job>.py`` with ``args`` (its ``main``) in a warm worker process of its own, as
    ``spawn`` runs a worker command."""
    return _POOL.take().start(args, job=job)


class Watched:
    """A spawned worker whose stdout and stderr are read by threads as they come (no pipe ever
    fills up and blocks it), so a test can fail at once, with what it printed, when it exits."""

    def __init__(self, name: str, proc: WorkerRun) -> None:
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
