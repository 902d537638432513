"""The library's ``foreachBatch`` sinks: ``idempotent_delta_sink`` and ``foreach_batch``.

Both apply the stream's head to a ``read_stream(..., head="sink")`` micro-batch themselves (Pravega's
rule: no event below the head at the time a batch is planned is delivered). At the start of each
batch they read the head on the driver from the stream's catalog row (log and checksum reads, no
Spark job), filter the batch with a literal per-segment map, count the rows dropped and log them.
The head only moves forward, so a head read after planning drops at least what one read at
planning would; a replayed batch drops a superset, consistent with resuming at the head. Batches
of a ``head="plan"`` DataFrame (the head is in their plan) and plain DataFrames pass through as
they are.
"""

from __future__ import annotations

import logging
import time

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from . import _delta
from .errors import InvalidConfigError, TruncatedDataError
from .streaming import current_head, head_in_sink_sources

log = logging.getLogger("pravega_spark")


def apply_head(batch: DataFrame, batch_id: int) -> tuple[DataFrame, Observation | None]:
    """``batch`` with the head applied (the guard column gone, the rows below each segment's
    first readable offset dropped), and the observation counting what it drops (None: nothing to
    apply). A batch with no guard column is returned as it is."""
    sources = head_in_sink_sources(batch.columns)
    if not sources:
        return batch, None
    if len(sources) > 1:
        raise InvalidConfigError(f"micro-batch {batch_id} joins {len(sources)} head='sink' read_stream DataFrames; "
                                 "a library sink applies the head of one stream")
    [(guard, source)] = sources
    source.note_applied(batch_id)
    started = time.perf_counter()
    head = current_head(source)
    events = batch.drop(guard)
    live = {sid: offset for sid, offset in head.items() if offset > 0}
    log.debug("micro-batch %d of %s/%s: head %s read in %.1f ms", batch_id, source.scope, source.stream, live,
              (time.perf_counter() - started) * 1000)
    if not live:
        return events, None
    below = F.col("offset") < F.coalesce(
        F.element_at(F.create_map(*[F.lit(v) for kv in sorted(live.items()) for v in kv]), F.col("segment_id")),
        F.lit(0))
    observation = Observation(f"pravega_spark_head_{source.token}_{batch_id}")
    events = (events.select("*", below.alias("__below"))
              .observe(observation, F.sum(F.col("__below").cast("long")).alias("truncated_rows"))
              .where(~F.col("__below")).drop("__below"))
    return events, observation


def report_head(observation: Observation | None, batch_id: int) -> None:
    """Log the rows ``apply_head`` dropped from a micro-batch, once the batch's action has run
    (nothing if the function that got the batch ran no action on it)."""
    metrics = _delta.observed(observation) if observation is not None else None
    truncated = int((metrics or {}).get("truncated_rows") or 0)
    if truncated:
        log.warning("micro-batch %d: %d events were truncated before the query read them: it resumes at the head",
                    batch_id, truncated)


def foreach_batch(fn):
    """Wrap ``fn(batch, batch_id)`` as a ``foreachBatch`` function that applies the stream's head
    first: for ``read_stream(..., head="sink")`` DataFrames, ``fn`` gets each micro-batch without
    the events below the stream's head at that moment (read on the driver, no Spark job), and
    without the guard column. Other DataFrames reach ``fn`` as they are.

    Example:
        >>> def upsert(batch, batch_id):
        ...     batch.groupBy("routing_key").count().write.mode("append").saveAsTable("counts")
        >>> query = (manager.read_stream("iot", "sensors", head="sink").writeStream
        ...          .foreachBatch(ps.foreach_batch(upsert))
        ...          .option("checkpointLocation", "/lake/_checkpoints/counts").start())
    """
    if not callable(fn):
        raise InvalidConfigError(f"foreach_batch takes a function (batch, batch_id), got {fn!r}")

    def run(batch: DataFrame, batch_id: int) -> None:
        events, observation = apply_head(batch, batch_id)
        fn(events, batch_id)
        report_head(observation, batch_id)

    return run


def save(session: SparkSession, writer, path: str) -> None:
    """``writer.save(path)`` under the table's commit lock when it is on the local file system
    (``_delta.commit_lock``: processes appending to one table must not lose each other's commits)."""
    with _delta.commit_lock(_delta.qualify(session, path)):
        writer.save(path)


def idempotent_delta_sink(path: str, app_id: str, **write_options):
    """A ``foreachBatch`` function that appends each micro-batch to the Delta table at ``path``
    exactly once: Delta's idempotent writes (``txnAppId=app_id``, ``txnVersion=batch_id``) skip
    a batch that Spark replays after a failure. For ``read_stream(..., head="sink")`` DataFrames
    it applies the stream's head first (``foreach_batch``).

    Use a new ``app_id`` with a new checkpoint location (batch ids start again at 0). A batch
    whose data files were vacuumed away raises ``TruncatedDataError``. An append that conflicts
    with another writer of the table (e.g. two writers creating it at once) is retried: the
    batch's application version makes a repeat a no-op, so several queries or processes may
    share one sink, each with its own ``app_id``. The function may also be called directly, with
    any increasing number as ``batch_id`` (``jobs/group_reader.py`` passes batch revisions).

    Example:
        >>> query = (manager.read_stream("iot", "sensors", head="sink").writeStream
        ...          .foreachBatch(ps.idempotent_delta_sink("/lake/sensors_copy", "sensors-copy"))
        ...          .option("checkpointLocation", "/lake/_checkpoints/sensors-copy").start())
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
