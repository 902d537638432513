"""The long-lived session soak (``make soak-long``, ``scripts/soak_long.sh``): a pytest plugin that
runs the collected scenarios ``--rounds`` times in a row in this one process (one session: a
classic local session, or one Spark Connect server), each round on new stores (every test makes
its own under its own new ``tmp_path``), and after each round forces full collections in the
session's JVM and records its live heap (``bench/heap.py``).

It prints one line per round and a verdict: round N's live heap at most round 1's plus
``--heap-growth`` (10%), and no scenario failed. The heap measured is the driver's (classic) or
the Connect server's (its pid from ``$CONNECT_SERVER_DIR/pid``).

    .venv/bin/python -m pytest -p tests.soak_long --rounds 3 tests/integration/...
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("soak-long")
    group.addoption("--rounds", type=int, default=3, help="how many times the collected scenarios run")
    group.addoption("--heap-growth", type=float, default=0.10,
                    help="the live heap after the last round may exceed the first round's by this fraction")
    group.addoption("--heap-report", default=None, help="also write the round lines and the verdict to this file")
    group.addoption("--histograms", default=None,
                    help="a folder: after each round also write the JVM's class histogram there (round-N.txt), "
                         "to diff what stayed")
    group.addoption("--heap-dumps", default=None,
                    help="a folder: after each round also dump the JVM's heap there (round-N.hprof) and split its "
                         "live heap between Spark Connect's stopped streaming queries and the rest (bench/hprof.py)")


class Rounds:
    def __init__(self, config) -> None:
        self.config = config
        self.rounds = config.getoption("rounds")
        self.per_round = 0
        self.done = 0
        self.torn = 0
        self.pending: list[str] = []
        self.failed: list[set[str]] = []
        self.heaps: list[float] = []
        self.rest: list[float] = []  # from the heap dumps: the live heap less the stopped streaming queries
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        self.lines.append(line)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("\n" + line)  # after the progress dots
        else:
            print(line, flush=True)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        self.per_round = len(items)
        if len(items) == 1 and self.rounds > 1:  # pytest cannot run one item object twice in a row
            raise pytest.UsageError("soak-long repeats the scenarios collected; one scenario alone cannot "
                                    "follow itself: select at least two")
        items[:] = list(items) * self.rounds

    def pytest_runtest_logreport(self, report) -> None:
        round_index = self.done // max(self.per_round, 1)
        while len(self.failed) <= round_index:
            self.failed.append(set())
        if report.failed:
            self.failed[round_index].add(report.nodeid)

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.done += 1
        for line in self.pending:  # written here, where pytest does not capture the output
            self.write(line)
        self.pending.clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem) -> None:
        """The end of a round: measured before its last scenario's teardown, which after the
        last round also stops the session."""
        self.torn += 1
        if self.per_round and self.torn % self.per_round == 0:
            self.end_of_round(self.torn // self.per_round)

    def end_of_round(self, number: int) -> None:
        from bench.heap import class_histogram, live_heap_mib

        pid, where = jvm_under_test()
        gc.collect()  # this process's handles on JVM objects first (py4j then lets the JVM drop them)
        heap = live_heap_mib(pid)
        self.heaps.append(heap)
        folder = self.config.getoption("histograms")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            Path(folder, f"round-{number}.txt").write_text(class_histogram(pid))
        failed = len(self.failed[number - 1]) if len(self.failed) >= number else 0
        self.pending.append(f"[soak-long] {where} round {number}/{self.rounds}: {self.per_round} scenarios, {failed} failed, "
                   f"live heap {heap:.0f} MiB")
        folder = self.config.getoption("heap_dumps")
        if folder:
            self.pending.append(self.split_heap(pid, Path(folder, f"round-{number}.hprof")))

    def split_heap(self, pid: int, path: Path) -> str:
        """Dump the heap to ``path`` and split it: what Spark Connect's stopped-query cache alone
        holds (a stopped query is kept an hour, not a setting), with the broadcasts its queries'
        plans alone reference (the block manager holds their values until the ``ContextCleaner``
        sees the handles collected), and the rest."""
        import subprocess

        from bench.hprof import STREAMING_QUERY, STREAMING_QUERY_CACHE, HeapDump

        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        subprocess.run(["jcmd", str(pid), "GC.heap_dump", str(path.resolve())], check=True, capture_output=True,
                       timeout=600)
        heap = HeapDump(str(path))
        live, queries = heap.live_mib(), heap.retained_mib(STREAMING_QUERY_CACHE)
        with_broadcasts, broadcasts = heap.retained_with_broadcasts(STREAMING_QUERY_CACHE)
        self.rest.append(live - with_broadcasts)
        return (f"[soak-long]   heap dump: {live:.0f} MiB reachable; Spark Connect's stopped-query cache holds "
                f"{queries:.0f} MiB ({len(heap.instances(STREAMING_QUERY))} queries), {with_broadcasts:.0f} MiB "
                f"with the block manager's copies of the {broadcasts} broadcasts only it references; "
                f"the rest {live - with_broadcasts:.0f} MiB")

    def verdict(self) -> tuple[bool, str]:
        """Whether the live heap held: judged on what is left without Spark Connect's stopped-query
        cache when heap dumps split it (issue #67, decision 6), else on the whole live heap. Both
        lines are printed when both are known."""
        growth = self.config.getoption("heap_growth")
        failures = sum(len(f) for f in self.failed)
        judged = self.rest if len(self.rest) == len(self.heaps) and self.rest else self.heaps
        limit = judged[0] * (1 + growth) if judged else 0.0
        held = len(judged) == self.rounds and judged[-1] <= limit and failures == 0
        whole = ("live heap " + " -> ".join(f"{h:.0f}" for h in self.heaps) + " MiB"
                 + ("" if judged is self.rest else f" (last round at most {limit:.0f})"))
        text = f"[soak-long] verdict: {'HOLDS' if held else 'FAILS'}: {failures} scenario runs failed; "
        if judged is self.rest:
            text += ("judged without the stopped-query cache (heap dumps): "
                     + " -> ".join(f"{h:.0f}" for h in self.rest)
                     + f" MiB (last round at most round 1 plus {growth:.0%}: {limit:.0f})"
                     + f"\n[soak-long] the whole {whole}, the stopped-query cache included (not judged)")
        else:
            text += whole
        return held, text

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if exitstatus == pytest.ExitCode.USAGE_ERROR:  # no round ran: the error says why
            return
        held, text = self.verdict()
        self.write(text)
        report = self.config.getoption("heap_report")
        if report:
            Path(report).write_text("\n".join(self.lines) + "\n")
        if not held and session.exitstatus == 0:
            session.exitstatus = 1


def jvm_under_test() -> tuple[int, str]:
    """(pid, label) of the JVM whose heap the soak watches: the Connect server's, else this
    process's driver."""
    if os.environ.get("SPARK_REMOTE"):
        return int(Path(os.environ["CONNECT_SERVER_DIR"], "pid").read_text().strip()), "connect server"
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from bench.heap import driver_pid

    assert SparkContext._active_spark_context is not None, "no Spark session to measure"
    return driver_pid(SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()), "classic session"


def pytest_configure(config) -> None:
    config.pluginmanager.register(Rounds(config), "soak-long-rounds")
