"""Subscribers (consumption-based retention): the controller's subscriber calls (``add_subscriber``,
``remove_subscriber``, ``update_subscriber_stream_cut``: Pravega's ``addSubscriber`` ...) and the
subscribers' lower bound (Pravega's ``computeSubscribersLowerBound``) as a Spark transformation.

Consumption-based retention may only truncate what every subscriber has consumed. Each subscriber
publishes a stream cut; the lower bound is, at every point of the key space, the earliest of their
positions: an older segment (lower id) is earlier than any of its successors, and in the same
segment the smaller offset is earlier (``-1``, a future segment not reached yet, lowest of all).

As a DataFrame transformation this is a ``groupBy``-min made lineage-aware:
1. per segment, the minimum offset over every subscriber that lists it (``-1`` wins);
2. a segment is kept unless its key range is wholly covered by other candidate segments with a
   lower id: those are older segments some subscriber has not finished, which bound the range.
Pravega's sequential algorithm gives the same cut for valid subscriber cuts.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import _delta
from ..errors import (
    GenerationMismatchError,
    InvalidConfigError,
    InvalidStreamCutError,
    ReaderGroupNotFoundError,
    StreamCutBehindError,
    SubscriberNotFoundError,
)
from ..stream.cut_algorithms import stream_cut_equal_or_after
from ..stream.stream_cut import StreamCut
from .client import Controller

log = logging.getLogger("pravega_spark")


def subscribers_lower_bound(cuts: DataFrame, *, segments: DataFrame) -> DataFrame:
    """The lower bound of the subscribers' cuts, as ``(segment_id, offset)`` rows.

    Args:
        cuts: one row per entry of each subscriber's cut: ``subscriber, segment_id, offset``
            (``-1`` for a future segment); a subscriber that never published has no rows.
        segments: the stream's segments (``segment_id, key_start, key_end``).

    Returns:
        ``segment_id bigint, offset bigint``: empty when there are no cuts.

    Example:
        >>> cuts.transform(subscribers_lower_bound, segments=manager.segments("iot", "s"))  # doctest: +SKIP
    """
    candidates = (cuts.groupBy("segment_id").agg(F.min("offset").alias("offset"))
                  .join(segments.select("segment_id", "key_start", "key_end"), "segment_id"))
    me, other = candidates.alias("m"), candidates.alias("o")
    older_overlapping = ((F.col("o.segment_id") < F.col("m.segment_id"))
                         & (F.col("o.key_start") < F.col("m.key_end")) & (F.col("m.key_start") < F.col("o.key_end")))
    with_older = (me.join(other, older_overlapping, "left")
                  .groupBy("m.segment_id", "m.offset", "m.key_start", "m.key_end")
                  .agg(F.collect_list(F.when(F.col("o.segment_id").isNotNull(), F.struct(
                      F.col("o.key_start").alias("start"), F.col("o.key_end").alias("end")))).alias("older")))
    return (with_older.where(~_covered(F.col("older"), F.col("key_start"), F.col("key_end")))
            .select(F.col("segment_id").cast("long"), F.col("offset").cast("long")))


def _covered(intervals, start, end):
    """Whether the union of ``intervals`` (array of ``(start, end)`` structs) covers ``[start, end)``:
    walk them sorted by start, extending the covered prefix while there is no gap."""
    reach = F.aggregate(F.array_sort(intervals), start,
                        lambda acc, i: F.when(i["start"] <= acc, F.greatest(acc, i["end"])).otherwise(acc))
    return reach >= end


def lower_bound_cut(cuts: DataFrame, *, segments: DataFrame, stream: str) -> StreamCut | None:
    """``subscribers_lower_bound`` collected as a ``StreamCut`` of ``stream`` (None if empty)."""
    rows = cuts.transform(subscribers_lower_bound, segments=segments).collect()
    if not rows:
        return None
    return StreamCut(stream, {int(r["segment_id"]): int(r["offset"]) for r in rows})


# ---- the controller's subscriber operations (consumption-based retention) ----------------------
def check_subscriber(subscriber: str, generation: int) -> None:
    """A subscriber is a non-empty string and its generation an int (``InvalidConfigError``)."""
    if not isinstance(subscriber, str) or not subscriber:
        raise InvalidConfigError(f"a subscriber is a non-empty string, got {subscriber!r}")
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise InvalidConfigError(f"a generation is an int, got {generation!r}")


def add_subscriber(controller: Controller, scope: str, stream: str, subscriber: str, generation: int) -> bool:
    """``StreamManager.add_subscriber``: one compare-and-set of the subscribers table."""
    check_subscriber(subscriber, generation)
    if "/" in subscriber:  # a reader group's scoped name: the group must exist
        group_scope, group = subscriber.split("/", 1)
        if controller.store.reader_group_row(group_scope, group) is None:
            raise ReaderGroupNotFoundError(f"subscriber {subscriber!r} names no reader group of the store")
    record = controller.settled(scope, stream)
    changed = controller.store.upsert_subscriber(scope, stream, subscriber, generation)
    log.info("add_subscriber %s to %s (generation %d): %s", subscriber, record.scoped_name, generation,
             "done" if changed else "no change")
    return changed


def remove_subscriber(controller: Controller, scope: str, stream: str, subscriber: str, generation: int) -> bool:
    """``StreamManager.remove_subscriber``: True if the subscriber is gone after the call."""
    check_subscriber(subscriber, generation)
    controller.settled(scope, stream)
    controller.store.delete_subscriber(scope, stream, subscriber, generation)
    return controller.store.subscriber(scope, stream, subscriber) is None


def update_subscriber_stream_cut(controller: Controller, scope: str, stream: str, subscriber: str,
                                 generation: int, stream_cut: StreamCut) -> bool:
    """``StreamManager.update_subscriber_stream_cut``: the cut is checked against the stream,
    then compare-and-set against the subscriber's generation and previous cut (a lost race
    re-reads and re-checks)."""
    check_subscriber(subscriber, generation)
    record = controller.settled(scope, stream)
    if not isinstance(stream_cut, StreamCut) or stream_cut.is_unbounded:
        raise InvalidStreamCutError(f"a subscriber publishes a bounded StreamCut, got {stream_cut!r}")
    records = controller.segment_records(scope, stream)
    controller.check_cuts(record, records, [stream_cut])
    store = controller.store

    def attempt() -> bool:
        found = store.subscriber(scope, stream, subscriber)
        if found is None:
            raise SubscriberNotFoundError(f"{subscriber} is not a subscriber of {record.scoped_name}")
        stored_generation, previous = found
        if stored_generation != generation:
            raise GenerationMismatchError(
                f"{subscriber} of {record.scoped_name} is at generation {stored_generation}, not {generation}")
        if previous and not stream_cut_equal_or_after(stream_cut, StreamCut(record.scoped_name, previous), records):
            raise StreamCutBehindError(
                f"{stream_cut!r} is behind {subscriber}'s previous cut {StreamCut(record.scoped_name, previous)!r}")
        if not store.compare_and_set_subscriber_cut(scope, stream, subscriber, generation, previous,
                                                    stream_cut.positions):
            raise _delta.Retry("subscriber changed meanwhile")
        return True

    return _delta.retrying(attempt, f"update cut of {subscriber} on {scope}/{stream}")
