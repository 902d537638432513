"""Epochs derived from the segment history: pure DataFrame transformations and look-ups.

An epoch is the set of segments open between two scales (Pravega's ``EpochRecord``). It is not
stored separately: epoch ``e`` holds every segment with ``creation_epoch <= e`` whose
``sealed_epoch`` is null or greater than ``e``, and its creation time is that of the segments
created in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .segments import SegmentRecord


def filter_epoch_members(segments: DataFrame, *, epoch: int) -> DataFrame:
    """Keeps the segments that are members of ``epoch``."""
    return segments.where(
        (F.col("creation_epoch") <= F.lit(epoch))
        & (F.col("sealed_epoch").isNull() | (F.col("sealed_epoch") > F.lit(epoch))))


def explode_epochs(segments: DataFrame, *, current_epoch: int) -> DataFrame:
    """One row per epoch: ``epoch, creation_time, segment_ids`` (ids sorted).

    Example:
        >>> manager.segments("iot", "s").transform(explode_epochs, current_epoch=3)  # doctest: +SKIP
    """
    last = F.coalesce(F.col("sealed_epoch") - F.lit(1), F.lit(current_epoch))
    return (segments
            .where(F.col("creation_epoch") <= F.lit(current_epoch))  # not yet active mid-scale
            .withColumn("epoch", F.explode(F.sequence(F.col("creation_epoch"), last)))
            .groupBy("epoch")
            .agg(F.max(F.when(F.col("creation_epoch") == F.col("epoch"), F.col("creation_time")))
                 .alias("creation_time"),
                 F.sort_array(F.collect_list("segment_id")).alias("segment_ids"))
            .select("epoch", "creation_time", "segment_ids")
            .orderBy("epoch"))


def epoch_creation_times(records: Sequence[SegmentRecord]) -> dict[int, datetime]:
    """Creation time of each epoch, from the segments created in it."""
    out: dict[int, datetime] = {}
    for r in records:
        if r.creation_time is not None:
            out.setdefault(r.creation_epoch, r.creation_time)
    return out


def epoch_at(records: Sequence[SegmentRecord], time: datetime) -> int:
    """The epoch in force at ``time`` (epoch 0 for times before the stream existed)."""
    best = 0
    for epoch, created in epoch_creation_times(records).items():
        if created <= time and epoch > best:
            best = epoch
    return best
