"""Routing: routing key -> key-space position -> segment -> framed byte offset.

Pure DataFrame/Column transformations (use them with ``df.transform``). The position of a key is
the top 52 bits of Spark's ``xxhash64(routing_key)`` read as a fraction in ``[0, 1)`` — the same
construction as Pravega's ``HashHelper.longToDoubleFraction``, on Spark's own hash so it is stable
and usable from SQL::

    SELECT shiftrightunsigned(xxhash64(routing_key), 12) / 4503599627370496D  -- 2^52

A null routing key gets a fresh random position per event, as in Pravega.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..store.schema import HEADER_SIZE, MAX_EVENT_SIZE, UNPLACED
from ..stream.segments import SegmentRecord

TWO_POW_52 = float(1 << 52)
# Above this many segments, routing uses a broadcast range join instead of a CASE chain.
MAX_CASE_SEGMENTS = 64


def key_position(routing_key: Column | str) -> Column:
    """The key-space position in ``[0, 1)`` of a routing key column.

    Example:
        >>> df.select(key_position("device_id"))  # doctest: +SKIP
    """
    key = F.col(routing_key) if isinstance(routing_key, str) else routing_key
    hashed = F.shiftrightunsigned(F.xxhash64(key), 12).cast("double") / F.lit(TWO_POW_52)
    return F.when(key.isNull(), F.rand()).otherwise(hashed)


def with_key_position(df: DataFrame, *, routing_key: str = "routing_key",
                      output: str = "key_position") -> DataFrame:
    """Adds ``key_position`` computed from ``routing_key``."""
    return df.withColumn(output, key_position(routing_key))


def with_segment_id(df: DataFrame, *, segments: Sequence[SegmentRecord],
                    position: str = "key_position", output: str = "segment_id") -> DataFrame:
    """Adds the id of the segment (of one epoch, ``[key_start, key_end)``) holding ``position``.

    Mirrors Pravega's ``SegmentSelector``: the event goes to the open segment of the current epoch
    whose range holds its key position.
    """
    ordered = sorted(segments, key=lambda s: s.key_start)
    if len(ordered) <= MAX_CASE_SEGMENTS:
        pos = F.col(position)
        expr = None
        for seg in ordered[:-1]:
            cond, sid = pos < F.lit(seg.key_end), F.lit(seg.segment_id).cast("long")
            expr = F.when(cond, sid) if expr is None else expr.when(cond, sid)
        last = F.lit(ordered[-1].segment_id).cast("long")
        return df.withColumn(output, last if expr is None else expr.otherwise(last))
    spark = df.sparkSession
    ranges = spark.createDataFrame(
        [(s.segment_id, s.key_start, s.key_end if i < len(ordered) - 1 else 2.0)
         for i, s in enumerate(ordered)],
        "__sid long, __start double, __end double")
    joined = df.join(F.broadcast(ranges),
                     (F.col(position) >= F.col("__start")) & (F.col(position) < F.col("__end")))
    return joined.withColumnRenamed("__sid", output).drop("__start", "__end")


def with_event_checks(df: DataFrame, *, event: str = "event",
                      max_size: int = MAX_EVENT_SIZE) -> DataFrame:
    """Fails the Spark job (so nothing is committed) on a null or oversized payload.

    The error text starts with ``EventTooLarge:`` or ``NullEvent:`` so callers can map it.
    """
    size = F.length(F.col(event))
    checked = (F.when(F.col(event).isNull(), F.raise_error(F.lit("NullEvent: an event payload is null")))
               .when(size > F.lit(max_size),
                     F.raise_error(F.concat(F.lit("EventTooLarge: an event of "), size.cast("string"),
                                            F.lit(f" bytes exceeds the {max_size}-byte limit"))))
               .otherwise(F.col(event)))
    return df.withColumn(event, checked)


def with_relative_offsets(df: DataFrame, *, segment: str = "segment_id", event: str = "event") -> DataFrame:
    """Adds ``rel_offset`` and ``rel_next_offset`` (Pravega's framing: an event occupies
    ``8 + len`` bytes) and the ``base_offset``/``end_offset`` placeholders of layout v2.

    The writer uses it for stores that Python tasks cannot open as files (``s3a://``,
    ``abfss://``...), before Delta's own file writer; elsewhere each task frames and writes its
    files itself (``task_files``), to the same layout.

    Offsets are relative to the write task's extent in each segment: within one Spark task (one
    input partition), the events of a segment are laid out in row order from 0. So this is one
    pass over the rows, with no shuffle: the running sums are taken inside each task by a
    vectorized UDF that sees only the narrow columns (segment id, framed size), while the rows
    and their payloads stay in the JVM. Each task writes one file per segment it touched; the
    file's base offset in its segment is fixed at commit (``place_files``), once the byte totals
    of every task are known. ``base_offset`` holds ``UNPLACED - task`` until then, so the commit
    can lay the tasks' extents out in the DataFrame's partition order.
    """
    framed = F.length(F.col(event)).cast("long") + F.lit(HEADER_SIZE)
    ends = _relative_ends()(F.col(segment), framed)
    return (df.withColumn("rel_next_offset", ends)
              .withColumn("rel_offset", F.col("rel_next_offset") - framed)
              .withColumn("base_offset", F.lit(UNPLACED).cast("long") - F.spark_partition_id().cast("long"))
              .withColumn("end_offset", F.lit(UNPLACED).cast("long")))


def with_absolute_offsets(df: DataFrame, tails: Mapping[int, int], *, order: Sequence[str] = ("__seq",),
                          segment: str = "segment_id", event: str = "event") -> DataFrame:
    """Adds the layout-v2 offsets of one write placed at the segments' ``tails``: in each segment
    the events follow ``order`` from its tail, ``base_offset`` is the tail and ``end_offset`` the
    tail plus the write's bytes there, ``rel_offset``/``rel_next_offset`` relative to the base.

    The Spark Connect writer's layout (no file can be placed at commit there): one shuffle by
    segment, so that a segment's events are counted in one task.
    """
    from pyspark.sql.window import Window

    framed = F.length(F.col(event)).cast("long") + F.lit(HEADER_SIZE)
    running = Window.partitionBy(segment).orderBy(*[F.col(c) for c in order]).rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    whole = Window.partitionBy(segment)
    # each segment's tail from one map (a CASE nested per segment grows one level a segment:
    # past ~45 segments a Spark Connect plan is too deep for protobuf to encode)
    base = F.lit(0).cast("long")
    if tails:
        by_segment = F.create_map(*[F.lit(int(v)).cast("long") for sid, tail in sorted(tails.items())
                                    for v in (sid, tail)])
        base = F.coalesce(F.try_element_at(by_segment, F.col(segment)), base)
    return (df.withColumn("rel_next_offset", F.sum(framed).over(running))
              .withColumn("rel_offset", F.col("rel_next_offset") - framed)
              .withColumn("base_offset", base)
              .withColumn("end_offset", F.col("base_offset") + F.sum(framed).over(whole)))


def running_ends(extent: dict[int, int], segments, sizes):
    """Each row's end offset relative to its segment's ``extent`` so far (numpy arrays in, one
    out), updating ``extent``: the per-task running sum of ``with_relative_offsets``."""
    import numpy as np

    ends = np.empty(len(segments), dtype=np.int64)
    for sid in np.unique(segments):
        mask = segments == sid
        run = np.cumsum(sizes[mask]) + extent.get(int(sid), 0)
        ends[mask] = run
        extent[int(sid)] = int(run[-1])
    return ends


_UDF = None


def _relative_ends():
    """The UDF of ``with_relative_offsets``: an iterator Arrow UDF (Spark 4.1+; no pandas on the
    way), else an iterator pandas UDF. Nondeterministic: its result depends on the task's rows."""
    global _UDF
    if _UDF is not None:
        return _UDF
    # (the function type is given, not inferred from type hints: this module's hints are strings)
    try:
        import pyarrow as pa
        from pyspark.sql.functions import ArrowUDFType, arrow_udf

        def ends_arrow(batches):
            extent: dict[int, int] = {}
            for segments, sizes in batches:
                yield pa.array(running_ends(extent, segments.to_numpy(), sizes.to_numpy()))

        with warnings.catch_warnings():  # "type hints are preferred": see above
            warnings.simplefilter("ignore", UserWarning)
            _UDF = arrow_udf(ends_arrow, "long", ArrowUDFType.SCALAR_ITER).asNondeterministic()
    except ImportError:  # PySpark before 4.1
        import pandas as pd
        from pyspark.sql.functions import PandasUDFType, pandas_udf

        def ends_pandas(batches):
            extent: dict[int, int] = {}
            for segments, sizes in batches:
                yield pd.Series(running_ends(extent, segments.to_numpy(), sizes.to_numpy()))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _UDF = pandas_udf(ends_pandas, "long", PandasUDFType.SCALAR_ITER).asNondeterministic()
    return _UDF


@dataclass(frozen=True)
class PendingFile:
    """A written, uncommitted file of one segment: ``rank`` orders it among the write's files
    (files of one task share ``rank``, their offsets relative to that task's extent), ``low``
    and ``high`` are its smallest relative offset and largest relative end; ``entry`` is the
    file as the log will record it (partition values not yet placed)."""

    segment_id: int
    rank: tuple
    low: int
    high: int
    num_records: int = 0
    entry: object = None  # a _delta.FileEntry


def place_files(files: Sequence[PendingFile], tails: Mapping[int, int]) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """Fix each file's ``(base_offset, end_offset)`` in its segment after ``tails``: the write's
    extents (one per rank) are laid out contiguously in rank order from each segment's tail.
    Returns the placements (in ``files`` order) and the segments' lengths after the write."""
    lengths = dict(tails)
    extents: dict[tuple[int, tuple], int] = {}
    for f in files:
        key = (f.segment_id, f.rank)
        extents[key] = max(extents.get(key, 0), f.high)
    bases: dict[tuple[int, tuple], int] = {}
    for (sid, rank) in sorted(extents):
        bases[(sid, rank)] = lengths.get(sid, 0)
        lengths[sid] = bases[(sid, rank)] + extents[(sid, rank)]
    placements = [(bases[(f.segment_id, f.rank)], bases[(f.segment_id, f.rank)] + extents[(f.segment_id, f.rank)])
                  for f in files]
    return placements, lengths
