"""Pictures: drawing (and saving as PNG) the epochs of a stream of 500 epochs.

A synthetic history in one process (no store: the drawing is what is measured): 500 epochs of
alternating splits and merges over 4-5 open segments (753 segment boxes), drawn with
``plots.epochs_figure`` and saved as a PNG, ``--runs`` times after a warm-up run; the median
(with min and max) is printed against the target (median <= 2 s). No baseline: an absolute time.

Usage: ``.venv/bin/python bench/plots.py [--runs 5] [--epochs 500]``
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pravega_spark import plots  # noqa: E402
from pravega_spark.stream.segments import SegmentRecord


def history(epochs: int) -> list[SegmentRecord]:
    """Epoch e splits (even e) or merges back (odd e) the first segment's range."""
    start = datetime(2026, 1, 1)
    records: list[SegmentRecord] = []
    open_: list[tuple[int, float, float, int]] = []  # (id, low, high, created epoch)
    number = 0
    for k in range(4):
        open_.append((number, k / 4, (k + 1) / 4, 0))
        number += 1
    for epoch in range(1, epochs):
        sid, low, high, born = open_.pop(0)
        records.append(SegmentRecord(sid, low, high, start + timedelta(minutes=born), epoch, 1000 * epoch))
        if epoch % 2:
            mid = (low + high) / 2
            new = [(epoch << 32 | number, low, mid, epoch), (epoch << 32 | number + 1, mid, high, epoch)]
            number += 2
        else:
            sid2, low2, high2, born2 = open_.pop(0)
            records.append(SegmentRecord(sid2, low2, high2, start + timedelta(minutes=born2), epoch, 1000 * epoch))
            new = [(epoch << 32 | number, min(low, low2), max(high, high2), epoch)]
            number += 1
        open_ = sorted(open_ + new, key=lambda s: s[1])
    records += [SegmentRecord(sid, low, high, start + timedelta(minutes=born)) for sid, low, high, born in open_]
    return records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=500)
    args = parser.parse_args(argv)
    records = history(args.epochs)
    times = []
    for _ in range(args.runs + 1):  # the first warms up
        start = time.perf_counter()
        figure = plots.epochs_figure("bench/s", records)
        figure.savefig(io.BytesIO(), format="png", dpi=110)
        times.append(time.perf_counter() - start)
    times = times[1:]
    median = statistics.median(times)
    print(f"{args.epochs} epochs, {len(records)} segments: draw + PNG median {median:.2f} s (min {min(times):.2f} s, "
          f"max {max(times):.2f} s over {args.runs} runs after a warm-up; runs "
          f"{', '.join(f'{t:.2f}' for t in times)}): target <= 2 s {'met' if median <= 2 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
