"""Subscribers' lower bound (Pravega's ``computeSubscribersLowerBound``) as a Spark transformation.

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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .stream_cut import StreamCut


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
