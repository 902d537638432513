"""One auto-scaling decision run over a long history vs over a short one.

    .venv/bin/python bench/autoscale.py [--history 10000000] [--small 100000] [--segments 256]
                                        [--recent 100000] [--rounds 5]

Two streams of ``--segments`` open segments (``by_event_rate``): one with ``--history`` events of
history, one with ``--small``; both then get the same ``--recent`` events inside the last 20
minutes. The history is committed with the data files' clock set two hours back (the internal
seam tests use), the recent events five minutes back. A decision run (``run_autoscale`` of one
stream, at the wall clock: the segments are in their cooldown, so it measures and decides but
makes no scale) is timed on each, alternating for ``--rounds`` rounds after a warm-up round
(``bench/_common.alternate``); each round's ratio is the long history's seconds / the short
one's (a cost: < 1 means the long one is cheaper), and the measure is the median of the ratios,
with min and max. Issue #20's target: median <= 3x (cost follows the recent window).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from bench._common import COST, Seconds, alternate, fresh_store, source
from pravega_spark import _delta

SCOPE = "bench"


def fill(manager, stream: str, events: int, at: datetime, start: int, batch: int = 2_000_000) -> None:
    """``events`` events committed with the data files' clock at ``at`` (in batches)."""
    _delta.set_clock(lambda: at.timestamp())
    try:
        writer = manager.create_event_writer(SCOPE, stream, "bench")
        done = 0
        while done < events:
            n = min(batch, events - done)
            writer.write_events(source(manager.spark, n, 100, start + done))
            done += n
            print(f"  {stream}: {done:,} events", flush=True)
    finally:
        _delta.set_clock(None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--history", type=int, default=10_000_000)
    p.add_argument("--small", type=int, default=100_000)
    p.add_argument("--recent", type=int, default=100_000)
    p.add_argument("--segments", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--root", default="/tmp/bench-autoscale")
    a = p.parse_args()
    manager = fresh_store(a.root, SCOPE)
    now = datetime.now(timezone.utc)
    policy = ps.ScalingPolicy.by_event_rate(1000, 2, a.segments)
    for stream, history in (("long", a.history), ("short", a.small)):
        manager.create_stream(SCOPE, stream, ps.StreamConfiguration(scaling_policy=policy))
        fill(manager, stream, history, now - timedelta(hours=2), 0)
        fill(manager, stream, a.recent, now - timedelta(minutes=5), history)

    def decide(stream):
        def run(r: int) -> float:
            start = time.perf_counter()
            [outcome] = manager.run_autoscale(SCOPE, stream)
            seconds = time.perf_counter() - start
            assert not outcome.scaled and len(outcome.rates) == a.segments, outcome
            measured = sum(1 for x in outcome.rates.values() if x.r20 > 0)
            if r == 0:
                print(f"    {stream}: {measured} segments with recent traffic", flush=True)
            return Seconds(seconds)
        return run

    print(f"decision run, {a.segments} segments: {a.history:,} events of history vs {a.small:,} (alternating)")
    alternate((f"{a.small:,} events", decide("short")), (f"{a.history:,} events", decide("long")),
              rounds=a.rounds, label="decision run", orientation=COST, targets=3.0)


if __name__ == "__main__":
    main()
