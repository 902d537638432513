"""Pictures of a stream: its key space over time, its retention, a reader group's readers
(matplotlib figures, which Databricks and Jupyter display inline; a PNG with ``path``).

Pure: each function takes plain values (segment records, cuts, retention records, rows) and
returns a ``matplotlib.figure.Figure``; ``StreamManager.plot_epochs``/``plot_retention`` and
``ReaderGroup.plot`` gather the values. Artists carry a ``gid`` naming what they draw
(``segments``, ``head``, ``tail``, ``scale``, ``retention_set``, ``truncation``, ``subscriber``,
``size``, ``unread``) so tests and notebooks can find them. Drawn with the non-interactive Agg
canvas (no display needed); segments are one ``PatchCollection`` and labels are drawn only when
there are at most ``MAX_LABELS`` segments, so a stream of 500 epochs draws in well under 2 s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from .stream.segments import SegmentRecord, short_segment_name
from .stream.stream_cut import StreamCut

__all__ = ["MAX_LABELS", "epochs_figure", "reader_group_figure", "retention_figure", "save"]

MAX_LABELS = 120


def _figure(width: float = 10.0, height: float = 5.0):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save(figure, path: str | None):
    """Write ``figure`` as a PNG at ``path`` (if given); returns the figure."""
    if path is not None:
        figure.savefig(path, format="png", dpi=110)
    return figure


def _size(n: int | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def epochs_figure(name: str, records: Sequence[SegmentRecord], head: StreamCut | None = None,
                  tail: StreamCut | None = None, now: datetime | None = None,
                  auto_scaled: bool = False):
    """The key space over time: each segment a box over ``[key_start, key_end)`` from its epoch's
    creation to its seal (or ``now``), labelled with its name (and sealed size); a scale is a
    dotted line where boxes end and begin (``split``/``merge``, marked ``auto`` when the stream
    scales by itself); the head and tail cuts are lines through the segments they name."""
    import matplotlib.dates as mdates
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    epoch_time: dict[int, datetime] = {}
    for r in records:
        if r.creation_time is not None:
            epoch_time.setdefault(r.creation_epoch, r.creation_time)
    last = max(epoch_time.values()) if epoch_time else datetime.now()
    end = now or (last + timedelta(seconds=max(1.0, 0.05 * (last - min(epoch_time.values())).total_seconds())
                                   if epoch_time else 60))
    end = end.replace(tzinfo=None) if end.tzinfo is None or last.tzinfo is None else end

    def start_of(r: SegmentRecord):
        return mdates.date2num(epoch_time.get(r.creation_epoch, last))

    def end_of(r: SegmentRecord):
        sealed = epoch_time.get(r.sealed_epoch) if r.sealed_epoch is not None else None
        return mdates.date2num(sealed or end)

    figure = _figure()
    ax = figure.add_subplot()
    boxes = [Rectangle((start_of(r), r.key_start), end_of(r) - start_of(r), r.key_end - r.key_start) for r in records]
    colors = ["#c9d6ea" if r.is_sealed else "#7fb77e" for r in records]
    collection = PatchCollection(boxes, facecolors=colors, edgecolors="#33415c", linewidths=0.6, gid="segments")
    ax.add_collection(collection)
    if len(records) <= MAX_LABELS:
        for r in records:
            text = short_segment_name(r.segment_id) + (f"\n{_size(r.sealed_size)}" if r.sealed_size is not None else "")
            ax.text((start_of(r) + end_of(r)) / 2, (r.key_start + r.key_end) / 2, text, ha="center", va="center",
                    fontsize=7, gid="segment_label", clip_on=True)
    for epoch in sorted(epoch_time)[1:]:
        born = [r for r in records if r.creation_epoch == epoch]
        sealed = [r for r in records if r.sealed_epoch == epoch]
        kind = "split" if len(born) > len(sealed) else "merge" if len(born) < len(sealed) else "scale"
        x = mdates.date2num(epoch_time[epoch])
        ax.axvline(x, color="#888888", linestyle=":", linewidth=0.8, gid="scale")
        if len(epoch_time) <= MAX_LABELS:
            ax.text(x, 1.01, f"{'auto ' if auto_scaled else ''}{kind}", fontsize=6, rotation=90, va="bottom",
                    ha="center", transform=ax.get_xaxis_transform(), gid="scale_label")
    by_id = {r.segment_id: r for r in records}
    for cut, color, edge in ((head, "#d1495b", start_of), (tail, "#00798c", end_of)):
        if cut is None or not cut.positions:
            continue
        xs, ys = [], []
        for sid in sorted(cut.positions, key=lambda s: by_id[s].key_start if s in by_id else 0):
            r = by_id.get(sid)
            if r is None:
                continue
            x = edge(r) if color == "#00798c" else start_of(r)
            xs += [x, x]
            ys += [r.key_start, r.key_end]
        label = "head" if cut is head else "tail"
        ax.plot(xs, ys, color=color, linewidth=2.2, label=f"{label} cut", gid=label)
    low, high = min((start_of(r) for r in records), default=0), max((end_of(r) for r in records), default=1)
    margin = 0.03 * (high - low or 1.0)
    ax.set_xlim(low - margin, high + margin)  # the head and tail lines stay off the frame
    ax.set_ylim(0, 1)
    ax.xaxis_date()
    ax.set_ylabel("key space")
    ax.set_title(f"{name}: {len(epoch_time)} epochs, {len(records)} segments")
    if head is not None or tail is not None:
        ax.legend(loc="upper left", fontsize=7)
    return figure


def retention_figure(name: str, retention_set: Sequence[tuple[datetime, int]], truncated: int,
                     subscribers: Mapping[str, int], size: int, now: datetime,
                     checkpoints: Mapping[str, int] | None = None):
    """Retention over time: the retention set's records (time, bytes from the stream's start),
    the truncation point (bytes truncated: the head), each subscriber's cut and each reader
    group's latest checkpoint (bytes from the start) and the stream's size (its tail)."""
    import matplotlib.dates as mdates

    figure = _figure(10, 4.5)
    ax = figure.add_subplot()
    if retention_set:
        ax.plot([mdates.date2num(t) for t, _ in retention_set], [s for _, s in retention_set], marker="o",
                linestyle="-", color="#00798c", label="retention set", gid="retention_set")
    if truncated:
        ax.axhline(truncated, color="#d1495b", linestyle="--", label=f"head: {_size(truncated)} truncated",
                   gid="truncation")
    for sub, s in sorted(subscribers.items()):
        ax.axhline(s, color="#edae49", linestyle="-.", linewidth=1, gid="subscriber")
        ax.text(mdates.date2num(now), s, f" {sub}", fontsize=7, va="bottom", ha="right", gid="subscriber_label")
    for group, s in sorted((checkpoints or {}).items()):
        ax.axhline(s, color="#8e5572", linestyle=":", linewidth=1, gid="checkpoint")
        ax.text(mdates.date2num(now), s, f" {group} (checkpoint)", fontsize=7, va="top", ha="right",
                gid="checkpoint_label")
    ax.axhline(size, color="#30638e", linewidth=1.5, label=f"tail: {_size(size)} written", gid="size")
    ax.plot([mdates.date2num(now)], [size], marker="s", color="#30638e")
    ax.xaxis_date()
    ax.set_ylabel("bytes from the stream's start")
    ax.set_title(f"{name}: retention")
    ax.legend(loc="upper left", fontsize=7)
    return figure


def reader_group_figure(name: str, rows: Sequence[Mapping]):
    """A reader group's segments per reader: one bar per reader (and ``unassigned``) stacked by
    segment, its height the segment's unread bytes; ``rows`` are ``reader, segment, unread``."""
    figure = _figure(8, 4.5)
    ax = figure.add_subplot()
    readers = sorted({r["reader"] for r in rows}, key=lambda r: (r == "unassigned", r))
    bottoms = {r: 0 for r in readers}
    for row in sorted(rows, key=lambda r: (r["reader"], r["segment"])):
        x = readers.index(row["reader"])
        ax.bar(x, row["unread"], bottom=bottoms[row["reader"]], edgecolor="#33415c", gid="unread")
        if row["unread"]:
            ax.text(x, bottoms[row["reader"]] + row["unread"] / 2, row["segment"], ha="center", va="center", fontsize=7)
        bottoms[row["reader"]] += row["unread"]
    ax.set_xticks(range(len(readers)), readers)
    ax.set_ylabel("unread bytes")
    ax.set_title(f"{name}: {sum(r['unread'] for r in rows):,} unread bytes")
    return figure
