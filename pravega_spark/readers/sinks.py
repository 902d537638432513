"""The library's ``foreachBatch`` sinks: ``foreach_batch`` and ``idempotent_delta_sink``.

Both apply the stream's head to the micro-batches of a ``read_stream(..., head="sink")`` query
(Pravega's rule, PDP-19: no event below the stream's head at the time a batch is planned is
delivered). At the start of each batch they read the head on the driver from the stream's
catalog row (log and checksum reads, no Spark job), filter the batch with a literal
per-segment map, and count the rows dropped in an observation, logged once the batch's write has
run. The head only moves forward, so a head read after planning drops at least what one read at
planning would; a replayed batch drops a superset, consistent with resuming at the head.
Batches of other queries (``head="plan"``, whose plan applies the head, or other sources) reach
the function as they are, and so do all batches over Spark Connect, where the function runs in a
Python worker of the server (``read_stream`` refuses ``head="sink"`` there).

The functions find a batch's ``head="sink"`` sources by the id of the query running it (a
``foreachBatch`` function runs in the query's thread): ``streaming.HeadGuard`` recorded them
when the query started, and stops a query of such a DataFrame that writes to any other sink.
"""

from __future__ import annotations

import functools
import logging
import time

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from .. import _delta
from ..controller.client import Controller
from ..errors import InvalidConfigError, TruncatedDataError
from ..store.store import Store
from .streaming import current_head, marked_stream, sources_of_query, stream_head

log = logging.getLogger("pravega_spark")


def apply_head(batch: DataFrame, batch_id: int) -> tuple[DataFrame, Observation | None]:
    """``batch`` without the rows below the stream's head now, and the observation counting
    them (None: nothing to drop, or not a ``head="sink"`` query's batch)."""
    spark = batch.sparkSession
    started = time.perf_counter()
    if _delta.foreach_batch_here(spark):
        query_id = _delta.streaming_query_id(spark)
        sources = sources_of_query(query_id)
        if not sources:
            return batch, None
        if len(sources) > 1:
            raise InvalidConfigError(f"micro-batch {batch_id} reads {len(sources)} head='sink' read_stream "
                                     "DataFrames; a library sink applies the head of one stream")
        [source] = sources
        scope, stream, token = source.scope, source.stream, source.token
        head = current_head(source)
        source.note_applied(query_id, batch_id)
    else:  # a Python worker of a Spark Connect server: the batch's columns name its stream
        marked = marked_stream(batch.columns)
        if marked is None:
            return batch, None
        column, named = marked
        batch = batch.drop(column)
        scope, stream, token = named["scope"], named["stream"], "connect"
        head = _server_head(spark, named["root"], scope, stream)
    head = {sid: offset for sid, offset in head.items() if offset > 0}
    log.debug("micro-batch %d of %s/%s: head %s read in %.1f ms", batch_id, scope, stream, head,
              (time.perf_counter() - started) * 1000)
    if not head:
        return batch, None
    below, above = _head_filter(tuple(sorted(head.items())))
    observation = Observation(f"pravega_spark_head_{token}_{batch_id}_{time.monotonic_ns()}")
    events = batch.observe(observation, F.sum(below.cast("long")).alias("truncated_rows")).where(above)
    return events, observation


# where a Spark Connect server's Python worker runs the library's sinks: per (root, scope,
# stream), its controller and the head last read (``stream_head``'s ``seen``)
_SERVER_HEADS: dict[tuple[str, str, str], tuple[Controller, tuple | None]] = {}


def _server_head(spark, root: str, scope: str, stream: str) -> dict[int, int]:
    """The stream's head now, read from its catalog row in the batch's session (kept per catalog
    version across the batches this worker runs)."""
    key = (root, scope, stream)
    controller, seen = _SERVER_HEADS.get(key) or (Controller(spark, Store(spark, root)), None)
    if controller.spark is not spark:
        controller = Controller(spark, Store(spark, root))
    seen, head = stream_head(controller, scope, stream, seen)
    _SERVER_HEADS[key] = (controller, seen)
    return head


@functools.lru_cache(maxsize=64)
def _head_filter(head: tuple[tuple[int, int], ...]):
    """``(below, above)``: whether a row's offset is below its segment's first readable offset,
    and the opposite, as columns parsed once per head (one JVM call: the head changes rarely)."""
    entries = ", ".join(f"{int(sid)}L, {int(offset)}L" for sid, offset in head)
    below = F.expr(f"offset < coalesce(element_at(map({entries}), segment_id), 0L)")
    return below, ~below


def report_head(observation: Observation | None, batch_id: int) -> int:
    """Log the rows ``apply_head`` dropped from a micro-batch once the batch's action has run
    (nothing if the function that got the batch ran no action on it); returns their number."""
    metrics = _delta.observed_if_done(observation) if observation is not None else None
    truncated = int((metrics or {}).get("truncated_rows") or 0)
    if truncated:
        log.warning("micro-batch %d: %d events were truncated before the query read them: it resumes at the head",
                    batch_id, truncated)
    return truncated


def foreach_batch(fn):
    """Wrap ``fn(batch, batch_id)`` as a ``foreachBatch`` function that applies the stream's
    head first: for a ``read_stream(..., head="sink")`` query, ``fn`` gets each micro-batch
    without the events below the stream's head at that moment (read on the driver, no Spark
    job). Other queries' batches reach ``fn`` as they are.

    Example:
        >>> def upsert(batch, batch_id):
        ...     batch.groupBy("routing_key").count().write.mode("append").saveAsTable("counts")
        >>> query = (manager.read_stream("iot", "sensors", head="sink").writeStream
        ...          .foreachBatch(ps.foreach_batch(upsert))
        ...          .option("checkpointLocation", "/lake/_checkpoints/counts").start())  # doctest: +SKIP
    """
    if not callable(fn):
        raise InvalidConfigError(f"foreach_batch takes a function (batch, batch_id), got {fn!r}")

    def run(batch: DataFrame, batch_id: int) -> None:
        events, observation = apply_head(batch, batch_id)
        fn(events, batch_id)
        report_head(observation, batch_id)

    return run


def save(session, writer, path: str) -> None:
    """``writer.save(path)`` under the table's commit lock when it is on the local file system
    (``_delta.commit_lock``: processes appending to one table must not lose each other's commits)."""
    with _delta.commit_lock(_delta.backend_for(session).qualify(path)):
        writer.save(path)


def idempotent_delta_sink(path: str, app_id: str, **write_options):
    """A ``foreachBatch`` function that appends each micro-batch to the Delta table at ``path``
    exactly once: Delta's idempotent writes (``txnAppId=app_id``, ``txnVersion=batch_id``) skip
    a batch that Spark replays after a failure. For a ``read_stream(..., head="sink")`` query it
    applies the stream's head first (``foreach_batch``).

    Use a new ``app_id`` with a new checkpoint location (batch ids start again at 0). A batch
    whose data files were vacuumed away raises ``TruncatedDataError``. An append that conflicts
    with another writer of the table (e.g. two writers creating it at once) is retried: the
    batch's application version makes a repeat a no-op, so several queries or processes may
    share one sink, each with its own ``app_id``. The function may also be called directly, with
    any increasing number as ``batch_id``.

    Example:
        >>> query = (manager.read_stream("iot", "sensors", head="sink").writeStream
        ...          .foreachBatch(ps.idempotent_delta_sink("/lake/sensors_copy", "sensors-copy"))
        ...          .option("checkpointLocation", "/lake/_checkpoints/sensors-copy").start())  # doctest: +SKIP
    """
    if not isinstance(app_id, str) or not app_id:
        raise InvalidConfigError(f"app_id must be a non-empty string, got {app_id!r}")

    def write(batch: DataFrame, batch_id: int) -> None:
        writer = (batch.write.format("delta").mode("append").option("txnAppId", app_id)
                  .option("txnVersion", int(batch_id)).options(**write_options))
        try:
            _delta.retrying(lambda: save(batch.sparkSession, writer, path), f"append batch {batch_id} to {path}")
        except Exception as e:  # Spark's error for a data file that is gone
            if "FAILED_READ_FILE" in str(e) or "FileNotFoundException" in str(e):
                raise TruncatedDataError(
                    f"micro-batch {batch_id} reads data files that are gone (truncated or compacted, then "
                    "vacuumed): restart the query with a new checkpoint location from the stream's head "
                    "(start='earliest') or a stream cut, and a new app_id") from e
            raise
        log.info("batch %d written to %s (txnAppId %s)", batch_id, path, app_id)

    return foreach_batch(write)
