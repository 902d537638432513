"""Rows from this process as a DataFrame, sent so that a Spark Connect server does not keep them.

Spark Connect's client sends a ``createDataFrame`` whose Arrow data reaches the server's
``spark.sql.session.localRelationCacheThreshold`` (1 MiB on Spark 4.1's server) ahead of the
query, as a cached relation that the server keeps in its block manager until the client's
session ends, which is an hour after its last use by default. Data below the threshold travels
inside the query's plan and is gone when the query is. A library that writes a large event's
8 MiB chunks through one long-lived session would otherwise fill the server's heap (issue #49:
+107 MiB of server heap for 12 chunks, against +4 MiB sent as below).

So over Spark Connect ``local_frame`` sends rows in batches under the threshold, unioned, and a
value too large for any batch (a chunk, a large event) in pieces under the threshold, one
single-row relation each, cross-joined and concatenated on the server into one value. No
session setting is read or written beyond the threshold's value, which the client itself reads
for every ``createDataFrame``.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from .files import arrow_table

log = logging.getLogger(__name__)

CACHE_THRESHOLD = "spark.sql.session.localRelationCacheThreshold"
# below this estimate no server's threshold is asked for (Spark's smallest sensible threshold)
ALWAYS_INLINE_BYTES = 64 * 1024
_VALUE_OVERHEAD = 16  # per value: Arrow's offsets and validity, rounded up


def is_connect_session(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (``backend.backend_kind`` decides the backend)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # the connect extra is not installed: no session can be one
        return False
    return isinstance(spark, ConnectSession)


def local_frame(spark: SparkSession, rows: Sequence[tuple], schema: StructType, arrow: bool = False) -> DataFrame:
    """``rows`` (tuples in ``schema``'s order) as a DataFrame of ``spark``.

    Over Spark Connect, no request carries data that the server would cache for the session's
    lifetime (see the module's docstring). Elsewhere it is ``createDataFrame``; with ``arrow``, of
    an Arrow table, whose size Spark knows and which no Python worker feeds.
    """
    if not is_connect_session(spark):
        if arrow:
            return spark.createDataFrame(arrow_table(rows, schema.fields))
        return spark.createDataFrame(rows, schema)
    sizes = [row_size(r) for r in rows]
    limit = inline_limit(spark) if sum(sizes) >= ALWAYS_INLINE_BYTES else None
    if limit is None or sum(sizes) < limit:
        return spark.createDataFrame(rows, schema)
    frames, batch, batch_size = [], [], 0
    for row, size in zip(rows, sizes, strict=True):
        if size >= limit:
            frames.append(_pieced_row(spark, row, schema, limit))
            continue
        if batch and batch_size + size >= limit:
            frames.append(spark.createDataFrame(batch, schema))
            batch, batch_size = [], 0
        batch.append(row)
        batch_size += size
    if batch:
        frames.append(spark.createDataFrame(batch, schema))
    log.debug("%d rows (%d bytes) sent as %d relations under %d bytes each", len(rows), sum(sizes), len(frames), limit)
    return functools.reduce(DataFrame.unionAll, frames)


def row_size(row: tuple) -> int:
    """An upper bound of a row's Arrow size in bytes (strings counted as UTF-8's widest)."""
    size = 0
    for value in row:
        if isinstance(value, bytes | bytearray | memoryview):
            size += len(value)
        elif isinstance(value, str):
            size += len(value) if value.isascii() else 4 * len(value)
        elif isinstance(value, list | tuple):
            size += row_size(tuple(value))
        size += _VALUE_OVERHEAD
    return size


def inline_limit(spark: SparkSession) -> int | None:
    """The largest Arrow size that travels inside a query's plan (under the server's cache
    threshold, with room for Arrow's framing), or None when the server names no threshold."""
    try:
        threshold = spark.conf.get(CACHE_THRESHOLD)  # a default given would be returned instead of Spark's
    except Exception:  # noqa: BLE001 - a server that does not know the setting caches nothing
        log.debug("%s not readable", CACHE_THRESHOLD, exc_info=True)
        return None
    if threshold is None:
        return None
    threshold = int(threshold)
    return max(threshold - threshold // 8, 1024)


def _pieced_row(spark: SparkSession, row: tuple, schema: StructType, limit: int) -> DataFrame:
    """One row whose binary and string values above ``limit`` travel in pieces under it, each
    its own one-row relation; the server joins the pieces back in order. A binary value's pieces
    are Arrow arrays over its own buffer (no copy in this process before the request's)."""
    base = list(row)
    pieces: dict[int, list[str]] = {}
    frame = None
    for i, (field, value) in enumerate(zip(schema.fields, row, strict=True)):
        if row_size((value,)) < limit or not isinstance(field.dataType, BinaryType | StringType):
            continue
        names = []
        for j, piece in enumerate(_pieces(value, field, limit)):
            names.append(f"__piece_{i}_{j}")
            one = spark.createDataFrame(pa.table({names[-1]: piece}))
            frame = one if frame is None else frame.crossJoin(one)
        pieces[i] = names
        base[i] = None
    whole = spark.createDataFrame([tuple(base)], schema)
    frame = whole if frame is None else whole.crossJoin(frame)
    return frame.select(*(F.concat(*map(F.col, pieces[i])).alias(f.name) if i in pieces else F.col(f.name)
                          for i, f in enumerate(schema.fields)))


def _pieces(value, field: StructField, limit: int) -> Iterator[pa.Array]:
    """``value`` as one-element Arrow arrays of at most ``limit`` bytes each, in order."""
    if isinstance(field.dataType, StringType):
        step = limit if value.isascii() else limit // 4
        for start in range(0, len(value), step):
            yield pa.array([value[start:start + step]], pa.string())
        return
    data = pa.py_buffer(value)  # no copy of bytes, bytearray or memoryview
    for start in range(0, data.size, limit):
        size = min(limit, data.size - start)
        yield pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(struct.pack("<ii", 0, size)),
                                                     data.slice(start, size)])
