"""What the pictures show, gathered from a store (``plots`` draws them): a stream's segments and
cuts, and its retention facts (the retention set, the truncation, subscribers' cuts, reader groups'
latest checkpoints, the size). A reader group draws itself (``ReaderGroup.plot``)."""

from __future__ import annotations

from datetime import datetime, timezone

from .. import plots
from ..controller.client import Controller
from ..errors import PravegaSparkError
from ..readers.reader_group import open_reader_group
from ..stream.config import ScaleType
from ..stream.stream_cut import StreamCut


def plot_epochs(controller: Controller, scope: str, stream: str, path: str | None = None):
    """``plots.epochs_figure`` of the stream (see ``StreamManager.plot_epochs``)."""
    record = controller.settled(scope, stream)
    records = controller.segment_records(scope, stream)
    head, tail = controller.head(record, records), controller.tail(record, records)
    auto = record.configuration.scaling_policy.scale_type != ScaleType.FIXED_NUM_SEGMENTS
    figure = plots.epochs_figure(f"{scope}/{stream}", records, head, tail, now=datetime.now(timezone.utc),
                                 auto_scaled=auto)
    return plots.save(figure, path)


def plot_retention(controller: Controller, scope: str, stream: str, path: str | None = None):
    """``plots.retention_figure`` of the stream (see ``StreamManager.plot_retention``)."""
    record = controller.settled(scope, stream)
    records = controller.segment_records(scope, stream)
    head, tail = controller.head(record, records), controller.tail(record, records)
    truncated = controller.truncation(record, records).size_till
    store = controller.store
    subscribers = {}
    for row in store.subscriber_rows(scope, stream):
        cut = StreamCut(f"{scope}/{stream}", {int(e["segment_id"]): int(e["offset"]) for e in row["stream_cut"]})
        try:
            subscribers[row["subscriber"]] = truncated + controller.size_between(scope, stream, head, cut)
        except PravegaSparkError:  # a cut behind the head (truncated since): at the head
            subscribers[row["subscriber"]] = truncated
    checkpoints = {}
    name = f"{scope}/{stream}"
    for row in store.reader_groups().select("scope", "reader_group").collect():
        group = open_reader_group(controller, row["scope"], row["reader_group"])
        latest = group.latest_checkpoint() if name in group.config.scoped_streams else None
        if latest is not None and name in latest[1]:
            try:
                checkpoints[group.scoped_name] = truncated + controller.size_between(scope, stream, head, latest[1][name])
            except PravegaSparkError:  # behind the head
                checkpoints[group.scoped_name] = truncated
    retention = [(r.recording_time, r.recording_size) for r in store.retention_records(scope, stream)]
    size = truncated + controller.size_between(scope, stream, head, tail)
    figure = plots.retention_figure(name, retention, truncated, subscribers, size, datetime.now(timezone.utc),
                                    checkpoints)
    return plots.save(figure, path)
