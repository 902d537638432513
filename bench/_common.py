"""What the bench scripts share: a fresh store, the synthetic source of events, a stopwatch, and
the one rule every comparison follows (issue #43).

The rule: our operation and its baseline alternate, in the same process and on the same machine
state, for at least 5 rounds after a warm-up round; each round's ratio is printed, and the
measure is the MEDIAN of the per-round ratios, printed with their min and max. Targets apply to
the median. (Best-vs-best is not reported: on a shared 2-core machine the bests of two series
come from different machine states.)

A ratio has one of two orientations, always printed with it:

- ``SPEED``: baseline seconds / our seconds. > 1 means ours is faster; a target is a floor
  (``>= 0.8x``).
- ``COST``: our seconds / baseline seconds, our time as a multiple of the baseline's. < 1 means
  ours is cheaper; a target is a ceiling (``<= 2x``).

``alternate`` runs the rounds and prints them; ``Ratios`` summarizes ratios computed elsewhere
(e.g. medians of many small calls per round).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import functions as F

SPEED = "speed"  # baseline / ours: > 1 means ours is faster
COST = "cost"    # ours / baseline: < 1 means ours is cheaper
MIN_ROUNDS = 5


def source(spark, events: int, size: int, start: int = 0):
    """``events`` rows ``(routing_key, event)``: 10,000 keys, binary payloads of ~``size`` bytes
    (ids ``start .. start + events``, so two sources can be told apart)."""
    return spark.range(start, start + events).select(
        F.concat(F.lit("device-"), (F.col("id") % 10000).cast("string")).alias("routing_key"),
        F.concat(F.col("id").cast("string"), F.lit(":"), F.expr(f"repeat('x', {size - 12})")).cast("binary").alias("event"))


def settings_conf(path: str | None) -> dict[str, str]:
    """The ``spark.*`` settings among the ``KEY=value`` lines of ``path`` (``scripts/local_s3.sh
    start``'s output), for the session of a bench on an object store; empty without a path."""
    if not path:
        return {}
    pairs = (line.partition("=") for line in Path(path).read_text().splitlines())
    return {key: value for key, _, value in pairs if key.startswith("spark.")}


def timed(fn) -> float:
    """Seconds ``fn()`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def fresh_store(root: str, scope: str):
    """A new store under ``root/store`` (``root`` emptied first) on a quiet local session, with
    ``scope`` created: the ``StreamManager``."""
    import pravega_spark as ps

    shutil.rmtree(root, ignore_errors=True)
    if os.environ.get("SPARK_REMOTE"):  # a Spark Connect session: the server's settings, no context
        spark = ps.spark_session()
    else:
        spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("ERROR")
    manager = ps.StreamManager(spark, f"{root}/store")
    manager.create_scope(scope)
    return manager


@contextlib.contextmanager
def connect_server(memory: str = "4g"):
    """``SPARK_REMOTE`` as given, else a local Spark Connect server (``scripts/connect_server.sh``,
    with ``memory`` of heap) started for the block and stopped after it: its address."""
    if os.environ.get("SPARK_REMOTE"):
        yield os.environ["SPARK_REMOTE"]
        return
    script = str(Path(__file__).resolve().parent.parent / "scripts" / "connect_server.sh")
    out = subprocess.run([script, "start"], check=True, capture_output=True, text=True,
                         env={**os.environ, "CONNECT_SERVER_MEMORY": memory}).stdout
    os.environ["SPARK_REMOTE"] = out.strip().split("SPARK_REMOTE=")[-1]
    try:
        yield os.environ["SPARK_REMOTE"]
    finally:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()  # stopped first: a client left open retries its
        if session is not None:                    # release against a stopped server for minutes
            session.stop()
        subprocess.run([script, "stop"], check=False)
        del os.environ["SPARK_REMOTE"]


class Seconds(float):
    """What a side of ``alternate`` returns when it measured its own time."""


def seconds(t: float) -> str:
    """``1.23 s``, or ``12.3 ms`` under a second."""
    return f"{t:.2f} s" if t >= 1 else f"{t * 1000:.1f} ms"


def ratio_of(ours: float, baseline: float, orientation: str = SPEED) -> float:
    """One round's ratio in ``orientation``."""
    return baseline / ours if orientation == SPEED else ours / baseline


def orientation_note(ours: str, baseline: str, orientation: str = SPEED) -> str:
    """How to read a ratio, e.g. ``ratio = raw s / ours s, > 1: ours faster``."""
    if orientation == SPEED:
        return f"ratio = {baseline} s / {ours} s, > 1: {ours} faster"
    return f"ratio = {ours} s / {baseline} s, < 1: {ours} cheaper"


@dataclass
class Ratios:
    """Per-round ratios of one comparison, and its target (on the median)."""

    label: str
    ratios: list[float]
    orientation: str = SPEED
    target: float | None = None
    note: str = ""  # how to read the ratio (``orientation_note``)
    times: dict[str, list[float]] = field(default_factory=dict)  # per side, the counted rounds' seconds
    digits: int = 2
    show_rounds: bool = False  # list the per-round ratios (when no round line printed them)

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def met(self) -> bool | None:
        """Whether the median meets the target (None: no target)."""
        if self.target is None:
            return None
        return self.median >= self.target if self.orientation == SPEED else self.median <= self.target

    def verdict(self) -> str:
        if self.target is None:
            return "no target"
        sign = ">=" if self.orientation == SPEED else "<="
        return f"target {sign} {self.target:g}x {'met' if self.met else 'not met'}"

    def line(self) -> str:
        """The measure and the verdict, then (indented, on a second line) how to read the ratio
        and the median seconds of each side."""
        d = self.digits
        text = (f"{self.label}: median {self.median:.{d}f}x (min {min(self.ratios):.{d}f}x, max "
                f"{max(self.ratios):.{d}f}x) over {len(self.ratios)} rounds: {self.verdict()}")
        if len(self.ratios) < MIN_ROUNDS:
            text += f" (fewer than {MIN_ROUNDS} rounds: a smoke run, not a measure)"
        details = [self.note] if self.note else []
        if self.show_rounds:
            details.append("per round " + ", ".join(f"{x:.{d}f}x" for x in self.ratios))
        if self.times:
            details.append("median times " + ", ".join(f"{name} {seconds(statistics.median(ts))}"
                                                       for name, ts in self.times.items()))
        if details:
            text += "\n    (" + "; ".join(details) + ")"
        return text

    def report(self, indent: str = "") -> Ratios:
        print(indent + self.line().replace("\n", "\n" + indent), flush=True)
        return self


def alternate(baseline: tuple[str, Callable[[int], float | None]],
              ours: Sequence[tuple[str, Callable[[int], float | None]]] | tuple[str, Callable],
              *, rounds: int = MIN_ROUNDS, warm_up: int = 1, label: str = "", orientation: str = SPEED,
              targets: dict[str, float] | float | None = None, indent: str = "  ",
              report: bool = True) -> dict[str, Ratios]:
    """Run ``warm_up`` rounds (printed, not counted), then ``rounds`` rounds; each round runs the
    baseline, then each of ``ours`` in order. Each side is ``(name, fn)``: ``fn(round)`` (0 is
    the first warm-up round) returns ``Seconds(...)``, the time it measured itself (e.g. a drain
    timed inside worker processes, its set-up left out), or anything else (then the whole call
    is what is timed).

    Prints each round's seconds and ratios, then (``report``) one line per ``ours``: the median
    of the per-round ratios, min and max, the target's verdict on the median. Returns the
    ``Ratios`` per name of ``ours``. ``targets``: one value for every ``ours``, or per name."""
    if isinstance(ours, tuple) and len(ours) == 2 and callable(ours[1]):
        ours = [ours]
    base_name, base_fn = baseline
    times: dict[str, list[float]] = {base_name: [], **{name: [] for name, _ in ours}}
    ratios: dict[str, list[float]] = {name: [] for name, _ in ours}

    def run(fn, r) -> float:
        start = time.perf_counter()
        seconds = fn(r)
        return float(seconds) if isinstance(seconds, Seconds) else time.perf_counter() - start

    for r in range(warm_up + rounds):
        counted = r >= warm_up
        base = run(base_fn, r)
        parts = [f"{base_name} {seconds(base)}"]
        for name, fn in ours:
            t = run(fn, r)
            x = ratio_of(t, base, orientation)
            parts.append(f"{name} {seconds(t)} ({x:.2f}x)")
            if counted:
                times[name].append(t)
                ratios[name].append(x)
        if counted:
            times[base_name].append(base)
        head = f"round {r - warm_up + 1}/{rounds}" if counted else f"warm-up {r + 1}"
        print(f"{indent}{label + ' ' if label else ''}{head}: " + ", ".join(parts), flush=True)
    out = {}
    for name, _ in ours:
        target = targets.get(name) if isinstance(targets, dict) else targets
        out[name] = Ratios(f"{label + ': ' if label else ''}{name} vs {base_name}", ratios[name], orientation,
                           target, orientation_note(name, base_name, orientation),
                           {base_name: times[base_name], name: times[name]})
        if report:
            out[name].report(indent)
    return out


def run_at_barrier(script: str, child_args: Sequence[Sequence[str]], barrier: Path, env: dict,
                   timeout: float = 3600) -> list[dict]:
    """Start one ``script --child ARGS... BARRIER`` process per ``child_args``, wait until each
    prints ``READY`` (its JVM started, its set-up done), create ``barrier`` so they all go at
    once, and return the JSON each prints last (the measure starts after start-up)."""
    import json
    import sys

    children = [subprocess.Popen([sys.executable, script, "--child", *map(str, args), str(barrier)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for args in child_args]
    for c in children:
        line = c.stdout.readline()
        assert line.startswith("READY"), c.stderr.read()[-3000:]
    barrier.touch()
    results = []
    for c in children:
        out, err = c.communicate(timeout=timeout)
        assert c.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results
