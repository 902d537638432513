"""Issue #17 probe: can an append lay out offsets in one pass, with no shuffle?

    .venv/bin/python bench/layout_v2_probe.py [--events 1000000] [--size 200] [--rounds 5]

Same rows, same routing (4 segments), same partitioning (``segment_id``), Delta appends, in one
process, alternating for ROUNDS rounds after a warm-up round (``bench/_common.alternate``); each
round's ratio is raw seconds / the variant's (a speed: > 1 means the variant is faster), and each
variant's measure is the median of its ratios, with min and max:

  raw        the routed rows appended as they are (the baseline of bench/append_read.py);
  window     today's layout: absolute offsets from a running sum over a window per segment
             (a shuffle of the whole rows and a sort);
  arrow      layout v2: ``mapInArrow`` over the whole rows computes, inside each task, offsets
             relative to that task's extent in each segment (numpy cumulative sums); no shuffle.
             Each task writes one file per segment it touched, whose base offset would be fixed
             at commit from the files' byte totals;
  pandas-iter  layout v2 with a scalar iterator pandas UDF over the narrow columns only
             (segment, framed size): the rows stay in the JVM, no shuffle;
  arrow-narrow  the same, but only the narrow columns go through Python (the payload stays in the
             JVM); its result cannot be joined back without a shuffle, so it only bounds the cost
             of the Python pass itself (it writes nothing).

It also checks that a file's relative offsets start at 0 and are contiguous (from its statistics).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf, pandas_udf
from pyspark.sql.types import LongType, StructField, StructType

import pravega_spark as ps
from bench._common import alternate, source
from pravega_spark.stream.segments import SegmentRecord
from pravega_spark.writers.routing import with_key_position, with_segment_id

HEADER = 8


def relative_offsets(batches):
    """Per task: offsets relative to the task's extent in each segment, in row order."""
    extent: dict[int, int] = {}
    for batch in batches:
        seg = batch.column("segment_id").to_numpy()
        size = pa.compute.add(pa.compute.binary_length(batch.column("event")), HEADER).to_numpy().astype(np.int64)
        rel_next = np.empty(len(seg), dtype=np.int64)
        for sid in np.unique(seg):
            mask = seg == sid
            ends = np.cumsum(size[mask]) + extent.get(int(sid), 0)
            rel_next[mask] = ends
            extent[int(sid)] = int(ends[-1])
        yield batch.append_column("rel_offset", pa.array(rel_next - size)).append_column("rel_next_offset", pa.array(rel_next))


def window_offsets(df):
    """The layout before #17: absolute offsets from a running sum over a window per segment (a
    shuffle of the whole rows and a sort)."""
    from pyspark.sql import Window

    framed = F.length("event").cast("long") + HEADER
    window = (Window.partitionBy("segment_id").orderBy("__seq")
              .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (df.withColumn("__seq", F.monotonically_increasing_id())
              .withColumn("next_offset", F.sum(framed).over(window))
              .withColumn("offset", F.col("next_offset") - framed).drop("__seq"))


@pandas_udf(LongType())
def relative_ends(columns: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.Series]:
    """A scalar iterator UDF over the narrow columns (segment, framed size) only: each row's end
    relative to the task's extent in its segment. The rows stay in the JVM."""
    extent: dict[int, int] = {}
    for seg, size in columns:
        seg, size = seg.to_numpy(), size.to_numpy()
        ends = np.empty(len(seg), dtype=np.int64)
        for sid in np.unique(seg):
            mask = seg == sid
            ends[mask] = np.cumsum(size[mask]) + extent.get(int(sid), 0)
            extent[int(sid)] = int(ends[mask][-1])
        yield pd.Series(ends)


@arrow_udf(LongType())
def packed_relative_ends(columns: Iterator[pa.Array]) -> Iterator[pa.Array]:
    """The same as ``relative_ends`` with pyarrow and numpy only, over one packed column
    (``segment index << 32 | framed size``): no pandas conversion, one Arrow column each way."""
    extent = np.zeros(1 << 12, dtype=np.int64)
    for packed in columns:
        packed = packed.to_numpy()
        seg, size = packed >> 32, packed & 0xFFFFFFFF
        ends = np.empty(len(packed), dtype=np.int64)
        for sid in np.unique(seg):
            mask = seg == sid
            run = np.cumsum(size[mask]) + extent[sid]
            ends[mask] = run
            extent[sid] = run[-1]
        yield pa.array(ends)


def narrow_offsets(batches):
    for batch in relative_offsets(batches):
        yield pa.RecordBatch.from_arrays([batch.column("segment_id"), batch.column("rel_next_offset")],
                                         ["segment_id", "rel_next_offset"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", default="10000", help="spark.sql.execution.arrow.maxRecordsPerBatch")
    parser.add_argument("--root", default="/tmp/bench-layout-v2")
    args = parser.parse_args(argv)
    shutil.rmtree(args.root, ignore_errors=True)
    spark = ps.spark_session(**{"spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "false",
                                "spark.sql.execution.arrow.maxRecordsPerBatch": args.batch,
                                "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    segments = [SegmentRecord(i, i / 4, (i + 1) / 4) for i in range(4)]
    routed = (source(spark, args.events, args.size).transform(with_key_position)
              .transform(with_segment_id, segments=segments).drop("key_position"))
    schema = StructType([*routed.schema.fields, StructField("rel_offset", LongType()),
                         StructField("rel_next_offset", LongType())])

    def append(df, name):
        return lambda: df.write.format("delta").partitionBy("segment_id").mode("append").save(f"{args.root}/{name}")

    variants = {
        "raw": append(routed, "raw"),
        "window": append(window_offsets(routed), "window"),
        "arrow": append(routed.mapInArrow(relative_offsets, schema), "arrow"),
        "pandas-iter": append(routed.withColumn("__size", F.length("event") + HEADER)
                              .withColumn("rel_next_offset", relative_ends("segment_id", "__size"))
                              .withColumn("rel_offset", F.col("rel_next_offset") - F.col("__size"))
                              .drop("__size"), "pandas_iter"),
        "arrow-iter": append(routed.withColumn("__size", F.length("event") + HEADER)
                             .withColumn("rel_next_offset", packed_relative_ends(
                                 F.shiftleft(F.col("segment_id"), 32).bitwiseOR(F.col("__size"))))
                             .withColumn("rel_offset", F.col("rel_next_offset") - F.col("__size"))
                             .drop("__size"), "arrow_iter"),
        "arrow-narrow": lambda: routed.select("segment_id", "event").mapInArrow(
            narrow_offsets, StructType([routed.schema["segment_id"], StructField("rel_next_offset", LongType())])).agg(F.max("rel_next_offset")).collect(),
    }
    print(f"{args.events} events of ~{args.size} B, 4 segments, {spark.sparkContext.defaultParallelism} cores")
    raw = variants.pop("raw")
    alternate(("raw", lambda r: raw()), [(name, lambda r, fn=fn: fn()) for name, fn in variants.items()],
              rounds=args.rounds)
    # a file's relative offsets: from 0, contiguous, totals = bytes
    files = (spark.read.format("delta").load(f"{args.root}/arrow")
             .groupBy(F.input_file_name().alias("file"), "segment_id")
             .agg(F.min("rel_offset").alias("lo"), F.max("rel_next_offset").alias("hi"),
                  F.sum(F.length("event") + HEADER).alias("bytes")).collect())
    assert files and all(f.lo == 0 and f.hi == f.bytes for f in files), files[:3]
    print(f"  arrow: {len(files)} files, each from relative offset 0 with no gap")
    return 0


if __name__ == "__main__":
    sys.exit(main())
