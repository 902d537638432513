"""The public-API backend's fenced writes: the MERGE that appends at tails with write marks, truncation
by partition-only DELETEs, and the marks a reader group's sink keeps in its own table."""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    StringType,
    StructType,
)

from .files import AppVersion
from .retry import STALE, Retry, raised
from .sql_requests import (
    command_rows,
    literal,
    read,
    table,
    version,
)


def delete_where(spark: SparkSession, path: str, condition: str) -> tuple[int | None, dict[str, int]]:
    """One ``DELETE`` (partition-only conditions delete whole files without reading them; others
    rewrite the files they touch): the new version (None when nothing matched) and its metrics."""
    before = version(spark, path)
    result = command_rows(spark.sql(f"DELETE FROM {table(path)} WHERE {condition}"))
    deleted = int(result[0]["num_affected_rows"] or 0) if result else 0
    after = version(spark, path)
    if after == before:
        return None, {"numDeletedRows": 0}
    return after, {"numDeletedRows": deleted}

# Write numbers on this backend ride in the rows, never in a session setting (Delta's
# idempotent-DML settings ``spark.databricks.delta.write.txnAppId/txnVersion`` are refused on
# serverless): an application id's number is one row of the events table, its *write mark*, in a
# partition no segment or transaction staging area uses (``segment_id = MARKS_SEGMENT``, below
# every staging partition), ``base_offset = end_offset`` = a slot hashed from the id.
# ``writer_id`` holds the id, ``rel_offset`` the number, ``rel_next_offset`` its time (ms),
# ``rel_event_offset`` the row's generation. The fenced MERGE that inserts a write also fences its
# mark's slot and appends the mark's new row in the same commit (the latest row, the largest
# generation, is the mark); a number not above the mark's fails it (nothing written).
MARKS_SEGMENT = -(1 << 62) - 1

RECORD_WRITE_MARK = -5

DUPLICATE = "PRAVEGA_SPARK_DUPLICATE_WRITE"

def mark_slot(app_id: str) -> int:
    """The marks partition's ``base_offset`` for ``app_id`` (several ids may share one: the
    mark is matched by ``writer_id`` too)."""
    return zlib.crc32(app_id.encode("utf-8"))

def mark_row(spark: SparkSession, schema: StructType, app: AppVersion, generation: int) -> DataFrame:
    """``app``'s write mark, generation ``generation``, as a one-row DataFrame of the events
    table's ``schema``."""
    slot = mark_slot(app.app_id)
    values = {"segment_id": MARKS_SEGMENT, "base_offset": slot, "end_offset": slot, "rel_offset": int(app.version),
              "rel_next_offset": int(app.last_updated), "record_type": RECORD_WRITE_MARK, "writer_id": app.app_id,
              "rel_event_offset": int(generation),
              "write_time": datetime.fromtimestamp(app.last_updated / 1000, tz=timezone.utc)}
    return spark.createDataFrame([tuple(values.get(f.name) for f in schema.fields)], schema)

def mark_generation(app: AppVersion, expected: Mapping[str, tuple[int, int] | None]) -> int:
    """The generation of ``app``'s new mark row: one above the generation read for a
    compare-and-set (0 for a mark read as absent); a write number's is the number itself (write
    numbers only grow, and an older store's single row counted at most one update per number)."""
    if app.app_id not in expected:
        return int(app.version)
    read_as = expected[app.app_id]
    return 0 if read_as is None else int(read_as[1]) + 1

def fenced_insert(spark: SparkSession, path: str, source: DataFrame | None, column: str, tails: Mapping[int, int],
                  seal_type: int | None = 1, end_column: str = "end_offset", start_column: str | None = "base_offset",
                  marks: Sequence[AppVersion] = (), expected: Mapping[str, tuple[int, int] | None] | None = None) -> int:
    """Append ``source``'s rows unless a row of one of the ``tails``' segments ends after its tail
    or seals it, or a mark of ``marks`` refuses it: the rows appended, -1 when a write number of
    ``marks`` was recorded already.

    One plain append whose source carries a *guard*: a one-row aggregate over the same table's
    fenced region (partition columns only: each segment at or after its tail, each mark's slot)
    that raises when a row there refuses the write. The guard's scan runs inside the write's
    transaction, so it reads the write's own snapshot, and its partition filter is the commit's
    read predicate: a concurrent add there fails the commit (Delta's ``ConcurrentAppendException``,
    a conflict for ``retrying``), and a row added between reading the tails and the write's
    snapshot makes the guard raise. So the append is fenced in both windows, as a MERGE fenced
    on the region would be, without a MERGE's shuffle and anti-join, and it removes no file.
    The guard is never cached and stays in a filter (where its ``raise_error`` is not pruned).

    ``marks`` (application versions, see ``MARKS_SEGMENT``): each mark's new row joins the source
    (a mark is *appended*, never updated, so the commit removes no file: Delta's streaming
    source skips every add of a commit that removes one). A mark's latest row is its largest
    generation (``mark_generation``). A mark whose id is in ``expected`` is a compare-and-set: a
    row of a later generation than the one read (any row, when read as absent) refuses it with
    ``STALE`` (nothing written; the caller reads again). Any other mark is a write number: a row
    with this number or a larger one refuses it with ``DUPLICATE`` (nothing written). Marks are
    never deleted.

    The events table's columns are the defaults; a key-value table passes ``end_column="version"``,
    no ``start_column`` (no region within a partition) and no ``seal_type``. No ``tails``: only
    the marks fence the commit (rows staged in a partition of their own).

    Raises:
        Retry: the tails moved, a segment was sealed, or a compare-and-set mark changed: nothing
            was written.
    """
    expected = dict(expected or {})
    # the source's own session runs the write (a ``foreachBatch`` batch lives in a session of its
    # own, where its DataFrame was built)
    session = (getattr(source, "sparkSession", None) if source is not None else None) or spark
    if source is None:
        source = session.createDataFrame([], read(session, path).schema)
    for m in marks:
        source = source.unionByName(mark_row(session, source.schema, m, mark_generation(m, expected)))
    region, refusals = _guard_region(column, tails, seal_type, end_column, start_column, marks, expected)
    # the region (partition columns: the commit's read predicate), then any refusal (data columns:
    # Delta skips the files whose statistics rule it out, e.g. a mark slot's older numbers)
    counts = (read(session, path).where(region).where(" OR ".join(f"({test})" for test, _ in refusals))
              .agg(*[F.sum(F.when(F.expr(test), 1).otherwise(0)).alias(f"__r{i}")
                     for i, (test, _) in enumerate(refusals)]))
    verdict = F.lit(True)  # (no row: each sum is null, and so is each test)
    for i, (_, message) in reversed(list(enumerate(refusals))):  # the first refusal found wins
        verdict = F.when(F.col(f"__r{i}") > 0, F.raise_error(F.lit(message))).otherwise(verdict)
    observed = Observation(f"pravega_spark_append_{uuid.uuid4().hex}")
    guarded = (source.crossJoin(counts.select(verdict.alias("__ok"))).where(F.col("__ok")).drop("__ok")
               .observe(observed, F.count(F.lit(1)).alias("rows")))
    try:
        guarded.write.format("delta").mode("append").save(path)
    except Exception as exc:
        if raised(exc, DUPLICATE):
            return -1
        if raised(exc, STALE):
            raise Retry(f"{path}: tails or marks moved since they were read") from None
        raise
    return int(observed.get["rows"]) - len(marks)  # the marks' own rows


def _guard_region(column: str, tails: Mapping[int, int], seal_type: int | None, end_column: str,
                  start_column: str | None, marks: Sequence[AppVersion],
                  expected: Mapping[str, tuple[int, int] | None]) -> tuple[str, list[tuple[str, str]]]:
    """``fenced_insert``'s guard: the fenced region (partition columns only: the commit's read
    predicate) and each refusal's ``(condition, message)``, a duplicate write number first (the
    retry of a write that landed finds the tails moved by that write)."""
    fences, refusals = [], []
    if marks:
        slots = sorted({mark_slot(m.app_id) for m in marks})
        fences.append(f"(`{column}` = {MARKS_SEGMENT} AND base_offset IN ({', '.join(map(str, slots))}))")
        numbered = [f"(writer_id = {literal(m.app_id)} AND rel_offset >= {int(m.version)})"
                    for m in marks if m.app_id not in expected]
        changed = [f"(writer_id = {literal(m.app_id)}" + ("" if expected[m.app_id] is None else
                   f" AND coalesce(rel_event_offset, 0) > {int(expected[m.app_id][1])}") + ")"
                   for m in sorted(marks, key=lambda m: m.app_id) if m.app_id in expected]
        if numbered:
            refusals.append((f"`{column}` = {MARKS_SEGMENT} AND ({' OR '.join(numbered)})", DUPLICATE))
        if changed:
            refusals.append((f"`{column}` = {MARKS_SEGMENT} AND ({' OR '.join(changed)})", f"{STALE}: a mark changed"))
    ids = sorted(int(s) for s in tails)
    if ids:
        region = "true" if start_column is None else " OR ".join(
            f"(`{column}` = {s} AND `{start_column}` >= {int(tails[s])})" for s in ids)
        fences.append(f"(`{column}` IN ({', '.join(map(str, ids))}) AND ({region}))")
        ends = " ".join(f"WHEN {s} THEN {int(tails[s])}" for s in ids)
        sealed = "" if seal_type is None else f" OR record_type = {int(seal_type)}"
        refusals.append((f"`{column}` <> {MARKS_SEGMENT} AND (`{end_column}` > CASE `{column}` {ends} END{sealed})",
                         f"{STALE}: tails moved"))
    if not fences:
        raise ValueError("fenced_insert needs tails or marks")
    return " OR ".join(fences), refusals


def truncate(spark: SparkSession, path: str, column: str, below: Mapping[int, int | None]) -> tuple[int | None, dict]:
    """Delete, in each segment of ``below``, the rows below its offset (None: all its rows), as
    Spark Connect can: DELETEs whose conditions are partition values only, so appends (always at
    or above every start) never conflict with them. First the files wholly below (metadata only),
    then the rows below the offset in each file straddling it (that file rewritten without them).
    Returns the last version written (None: nothing to delete) and the rows deleted."""
    whole, straddle = [], []
    for sid, start in sorted(below.items()):
        if start is None:
            whole.append(f"`{column}` = {int(sid)}")
        else:
            whole.append(f"(`{column}` = {int(sid)} AND (end_offset < {int(start)} OR "
                         f"(end_offset = {int(start)} AND base_offset < {int(start)})))")
            straddle.append((int(sid), int(start)))
    last, deleted = delete_where(spark, path, " OR ".join(whole))
    if straddle:
        where = " OR ".join(f"(`{column}` = {s} AND base_offset < {o} AND end_offset > {o})" for s, o in straddle)
        files = (read(spark, path).where(where).select(column, "base_offset", "end_offset").distinct().collect())
        starts = dict(straddle)
        if files:
            condition = " OR ".join(
                f"(`{column}` = {int(f[0])} AND base_offset = {int(f[1])} AND end_offset = {int(f[2])} "
                f"AND rel_offset < {starts[int(f[0])] - int(f[1])})" for f in files)
            version_after, more = delete_where(spark, path, condition)
            last = version_after if version_after is not None else last
            deleted = {"numDeletedRows": deleted["numDeletedRows"] + more["numDeletedRows"]}
    return last, deleted

def rewrite_where(spark: SparkSession, path: str, rows: DataFrame, condition: str) -> None:
    """Replace the table's rows matching ``condition`` (partition values only) by ``rows``, in
    one commit that changes no data (``dataChange=false``: Delta's streaming source skips it).
    Its read predicate is ``condition``: a concurrent removal there makes it conflict."""
    (rows.write.format("delta").mode("overwrite").option("replaceWhere", condition)
     .option("dataChange", "false").save(path))

# ---- marks in a table of any schema with scope, stream and segment_id (a reader group's sink) -----
# A sink's positions and owner tokens on the public-API backend: one row per mark in the sink's
# own table, ``scope = SINK_MARK_SCOPE`` (no Pravega scope contains a ``/``), ``stream`` the
# mark's id, ``segment_id`` its value, every other column null. Its rows and its marks change in
# one MERGE, a compare-and-set of the marks read.
SINK_MARK_SCOPE = "pravega-spark/mark"

def marks_in(spark: SparkSession, path: str, prefix: str) -> dict[str, int]:
    """The marks of ``path`` whose id starts with ``prefix`` (one query)."""
    rows = (read(spark, path).where((F.col("scope") == SINK_MARK_SCOPE) & F.col("stream").startswith(prefix))
            .select("stream", "segment_id").collect())
    return {r[0]: int(r[1]) for r in rows}

def _zero(data_type):
    """A value of ``data_type`` for a mark row's NOT NULL column that is not one of its own."""
    from pyspark.sql.types import BinaryType, DateType, NumericType, TimestampType

    if isinstance(data_type, NumericType):
        return 0
    if isinstance(data_type, StringType):
        return ""
    if isinstance(data_type, BinaryType):
        return b""
    if isinstance(data_type, BooleanType):
        return False
    if isinstance(data_type, (TimestampType, DateType)):
        return datetime(1970, 1, 1, tzinfo=timezone.utc) if isinstance(data_type, TimestampType) else datetime(1970, 1, 1).date()
    return None

def merge_marked(spark: SparkSession, path: str, rows: DataFrame | None, marks: Mapping[str, int],
                 expected: Mapping[str, int | None]) -> None:
    """Append ``rows`` and set ``marks`` in one MERGE, if every mark of ``expected`` still has
    the value read (None: absent).

    Raises:
        Retry: a mark read changed since (nothing was written).
    """
    session = (rows.sparkSession if rows is not None else None) or spark
    schema = read(session, path).schema
    filler = {f.name: None if f.nullable else _zero(f.dataType) for f in schema.fields}  # NOT NULL columns
    marked = session.createDataFrame(
        [tuple({**filler, "scope": SINK_MARK_SCOPE, "stream": a, "segment_id": int(v)}[n] for n in schema.names)
         for a, v in sorted(marks.items())], schema)
    source = marked if rows is None else rows.unionByName(marked, allowMissingColumns=True)
    checks = " ".join(f"WHEN {literal(a)} THEN " + ("false" if v is None else f"t.segment_id = {int(v)}")
                      for a, v in sorted(expected.items()))
    allowed = f"CASE t.stream {checks} ELSE true END" if checks else "true"
    present = [a for a, v in sorted(expected.items()) if v is not None and a in marks]
    gone = (f"WHEN NOT MATCHED AND s.scope = {literal(SINK_MARK_SCOPE)} AND s.stream IN "
            f"({', '.join(literal(a) for a in present)}) THEN INSERT (scope) VALUES (raise_error('{STALE}: a mark is gone')) "
            if present else "")
    try:
        session.sql(
            f"MERGE INTO {table(path)} AS t USING {{source}} AS s ON t.scope = {literal(SINK_MARK_SCOPE)} "
            f"AND s.scope = {literal(SINK_MARK_SCOPE)} AND t.stream = s.stream "
            f"WHEN MATCHED AND ({allowed}) THEN UPDATE SET t.segment_id = s.segment_id "
            f"WHEN MATCHED THEN UPDATE SET t.segment_id = raise_error('{STALE}: a mark changed') "
            f"{gone}WHEN NOT MATCHED THEN INSERT *", source=source)  # runs when sent
    except Exception as exc:
        if raised(exc, STALE):
            raise Retry(f"{path}: marks changed since they were read") from None
        raise

# ---- public SQL that both backends use --------------------------------------------------------
def delete_matching(spark: SparkSession, path: str, source: DataFrame, on: list[str]) -> int:
    """Delete the table's rows equal on ``on`` to a row of ``source`` (one MERGE, public SQL:
    both backends); returns the rows deleted. A concurrent commit to the files it rewrites makes
    it conflict (retry it)."""
    condition = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on)
    target = table(path)
    result = command_rows(spark.sql(f"MERGE INTO {target} AS t USING {{source}} AS s ON {condition} "
                                    "WHEN MATCHED THEN DELETE", source=source))
    return int(result[0]["num_deleted_rows"]) if result else 0
