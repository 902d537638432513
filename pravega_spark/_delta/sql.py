"""The Delta seam with public SQL and DataFrame calls only: no JVM handle, no session setting.

Databricks serverless and standard clusters hand out Spark Connect sessions (no ``_jvm``, no
``_jsparkSession``, no ``_jdf``), and no Databricks Runtime ships OSS Delta's classes, so this is
the backend every Databricks compute gets (``backend.backend_kind``). A commit there is one Delta command, so each fence
of the classic backend (a transaction driven directly) becomes one command whose read of the
fenced partitions names them literally (Delta's conflict checker then fails it on a concurrent add
there, as it fails the classic transaction) and which carries the decision taken on the rows read:

- **rows** (small tables: compare-and-set of a partition). The rows read are identified by a
  fingerprint (``xxhash64`` of all columns, computed by the server at the read). One source row
  per fingerprint matches its target row; one more source row per commit matches every target
  row of the fence whose fingerprint was *not* read. So each target row in the fence matches
  exactly one source row, and the MERGE raises ``STALE`` if a row read has gone (or changed) or a
  row not read has appeared since the read; otherwise it deletes the rows removed and inserts the
  new ones. The read and the MERGE's own snapshot may differ; what matters is that the rows are
  the same.
- **tails** (events tables: appends, seals). A plain append whose source carries a *guard*: a
  one-row aggregate over the same table's region at or after each tail read (partition columns
  only), which raises when a row there ends after the tail or seals the segment
  (``sql_writes.fenced_insert``). The guard's scan runs in the write's own transaction: its
  partition filter is the commit's read predicate (a concurrent add there fails the commit), and
  a row added before the write's snapshot makes it raise. Either way nothing is written and the
  writer retries from fresh tails. A write number is the writer's *write mark*, a row the same
  append adds (``MARKS_SEGMENT``), checked by the same guard; never a session setting.

Where the classic backend places files it wrote before the commit (a transaction's staged
events, a large event's chunks), this one stages rows in a partition no reader reads and copies
them in the commit's guarded append, whose marks are compare-and-sets of the states read (a mark's
generation counts its changes, so a change that kept the number still fails it).

**No commit that adds events removes a file.** Delta's streaming source (``skipChangeCommits``)
skips every add of a commit that removes a file with ``dataChange=true``: a mark is therefore
appended as a new row of a later generation, never updated in place, and a transaction's staged
rows are deleted by a commit of their own.

``SqlTransaction`` offers ``DeltaTransaction``'s interface, so the control plane's code is the
same on both backends. The file verbs (placing files at commit, job-free log reads) raise
``NotImplementedError``: their callers check ``places_files`` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .files import AppVersion, FileEntry, PartitionSummary
from .local_data import local_frame
from .retry import STALE, Retry
from .sql_reads import lookup, summarize
from .sql_requests import (
    literal,
    missing_table,
    quiet_client_logs,
    read,
    row_dict,
    table,
    table_id,
    version,
)
from .sql_tables import column_ddl, data_files
from .sql_writes import MARKS_SEGMENT, fenced_insert

FINGERPRINT = "__fp"

def create_table(spark: SparkSession, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
    """``CREATE TABLE IF NOT EXISTS`` at ``path``; True if this call created it. Two creators
    racing: the log store lets one write version 0, the other's commit conflicts and its retry
    (``retrying`` around this) finds the table."""
    if version(spark, path) >= 0:
        # a table emptied by a deletion over Connect (no folder can be removed) counts as absent
        # for rows: they go in if it is still empty when they are inserted
        if rows:
            txn = SqlTransaction(spark, path)
            if not txn.rows(txn.read_whole_table()):
                txn.commit(txn.write_rows(rows, schema))
                return True
        return False
    props = {"delta.isolationLevel": "Serializable", **(properties or {})}
    parts = f" PARTITIONED BY ({', '.join(f'`{c}`' for c in partition_by)})" if partition_by else ""
    tbl = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in props.items())
    if rows:  # the metadata and the rows in one commit (version 0)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table(path)} USING delta{parts} TBLPROPERTIES ({tbl}) "
                  "AS SELECT * FROM {source}", source=local_frame(spark, rows, schema))
    else:
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table(path)} ({column_ddl(schema)}) USING delta{parts} "
                  f"TBLPROPERTIES ({tbl})")
    return True

# ---- the transaction ----------------------------------------------------------------------------
@dataclass
class FenceRead:
    """A read of a ``SqlTransaction``: the fence (SQL over the target ``t``) and the
    fingerprints of every row it found."""

    fence: str
    fingerprints: list[int]

@dataclass
class RowRead:
    """One row read by a ``SqlTransaction`` (what ``DeltaTransaction`` calls a file): its
    values and fingerprint. ``partition`` gives a column's value as a string, like a file's
    partition value."""

    values: dict
    fingerprint: int

    def partition(self, column: str) -> str | None:
        value = self.values.get(column)
        return None if value is None else str(value)

    def int_partition(self, column: str) -> int:
        return int(self.values[column])

@dataclass
class RowsRemoved:
    """A ``removals`` marker: this row is deleted by the commit."""

    read: RowRead

@dataclass
class NewRows:
    """A ``write_rows`` result: rows the commit inserts (tuples in ``schema``'s order)."""

    rows: list[tuple]
    schema: StructType
    num_records: int = field(init=False)

    def __post_init__(self) -> None:
        self.num_records = len(self.rows)

class SqlTransaction:
    """A commit of the Connect backend, with ``DeltaTransaction``'s interface (the part the
    control plane uses): reads declare the fence, ``commit`` is one command (see the module
    docstring). Nothing is written before ``commit``."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        quiet_client_logs()
        self.spark = spark
        self.path = path
        self._read_version: int | None = None
        self._table_id: str | None = None
        self._reads: list[FenceRead] = []
        self._tails: dict[int, int] | None = None
        self._tail_column: str | None = None
        self._tail_end: str | None = None  # set by ``expect_max``: the column the condition compares
        self._marks_read: dict[str, tuple[int, int] | None] = {}  # app id -> (number, generation) read
        self.inserted: int | None = None  # rows the last commit inserted
        self.committed_version: int | None = None  # the version of the last insert, when found
        self.unplaced_names: list[str] = []  # files are written where they belong

    def __repr__(self) -> str:
        return f"SqlTransaction({self.path}, read_version={self.read_version})"

    @property
    def read_version(self) -> int:
        """The table's version when first asked (-1: no table). Reads and commits do not depend
        on it: a commit's conditions compare what was read with what the MERGE finds."""
        if self._read_version is None:
            self._read_version = version(self.spark, self.path)
        return self._read_version

    @property
    def table_id(self) -> str:
        if self._table_id is None:
            self._table_id = table_id(self.spark, self.path)
        return self._table_id

    # ---- reads ------------------------------------------------------------------------------
    def _read(self, fence: str) -> list[RowRead]:
        quiet_client_logs()
        try:
            df = read(self.spark, self.path)
            where = fence.replace("t.`", "`")
            # ``xxhash64(*)``: all columns in the table's order, as the commit's MERGE lists them
            # (the names come with the rows: no analysis request for the schema)
            rows = (df.where(where) if fence != "true" else df).select(
                "*", F.expr("xxhash64(*)").alias(FINGERPRINT)).collect()
        except Exception as exc:
            if not missing_table(exc):
                raise
            rows = []
        found = [RowRead({n: v for n, v in row_dict(r).items() if n != FINGERPRINT}, int(r[FINGERPRINT]))
                 for r in rows]
        self._reads.append(FenceRead(fence, [r.fingerprint for r in found]))
        return found

    def read_whole_table(self) -> list:
        """Every row, fenced: any change to the table before the commit makes it fail."""
        return self._read("true")

    def read_partition(self, values: Mapping[str, str]) -> list:
        """One partition's rows (string values of its columns), fenced."""
        return self._read(" AND ".join(f"t.`{column}` = {literal(str(value))}" for column, value in values.items()))

    def all_files(self) -> None:
        """Connect lists no files: None (callers fall back to a query)."""
        return None

    def rows(self, files: Sequence) -> list[dict]:
        return [dict(f.values) for f in files if isinstance(f, RowRead)]

    def fence_partitions(self, column: str, values: list[int]) -> None:
        """Fence these (integer) partitions; the commit's condition is the tails read by
        ``summarize`` (see the module docstring)."""
        self._tail_column = column
        self._tails = {int(v): 0 for v in values} if self._tails is None else self._tails

    def summarize(self, column: str, values: list[int], end_column: str, stat: str) -> dict[int, PartitionSummary]:
        """The partitions' summaries at this transaction's version; their ends are the tails the
        commit is conditioned on."""
        found = summarize(self.spark, self.path, column, values, end_column, stat)
        self._tail_column = column
        self._tails = {int(v): (found[int(v)].end if int(v) in found else 0) for v in values}
        return found

    def expect_tails(self, column: str, tails: Mapping[int, int]) -> None:
        """Condition the commit on ``tails`` known from elsewhere (a writer's last commit): if
        they moved, the commit fails (nothing written) and raises ``Retry``."""
        self._tail_column = column
        self._tails = {int(s): int(t) for s, t in tails.items()}

    def ends_of_insert(self) -> dict[int, int]:
        """After an insert at the tails: each segment's end of what it inserted (the rows whose
        base is the tail: the fence kept everyone else out of that region)."""
        column, tails = self._tail_column, self._tails or {}
        where = " OR ".join(f"(`{column}` = {int(s)} AND base_offset = {int(t)})" for s, t in sorted(tails.items()))
        rows = (read(self.spark, self.path).where(where).groupBy(column)
                .agg(F.max("end_offset").alias("end")).collect()) if where else []
        return {int(r[column]): int(r["end"]) for r in rows}

    def insert_frame(self, source: DataFrame | None, app: AppVersion | Sequence[AppVersion] | None = None) -> int:
        """Insert ``source``'s rows at the tails read (or expected; none: only the marks fence
        it), with the application versions ``app`` in the same guarded append: the rows inserted (0: the
        source was empty), -1 when a write number was recorded already (the write mark holds it
        or a larger one: nothing was written). An id whose version this transaction read is a
        compare-and-set against what it read (as Delta fences a read ``SetTransaction``).

        Raises:
            Retry: the tails moved (or a segment was sealed), or a mark read changed, since:
                nothing was written.
        """
        marks = [] if app is None else [app] if isinstance(app, AppVersion) else list(app)
        expected = {m.app_id: self._marks_read[m.app_id] for m in marks if m.app_id in self._marks_read}
        tails = self._tails or {}
        if self._tail_end is None:
            inserted = fenced_insert(self.spark, self.path, source, self._tail_column or "segment_id", tails,
                                     marks=marks, expected=expected)
        else:  # a versioned table (``expect_max``): always fail when stale
            inserted = fenced_insert(self.spark, self.path, source, self._tail_column, tails,
                                     seal_type=None, end_column=self._tail_end, start_column=None)
        self.inserted = inserted
        self.committed_version = None  # finding it would cost a query (and a session setting to tag it)
        return inserted

    # ---- versioned entries (key-value tables) --------------------------------------------------
    def expect_max(self, column: str, values: Sequence[int], stat: str) -> dict[int, int]:
        """The largest ``stat`` in each of these partitions now (0 for an empty one), one query.
        They become the commit's condition: if a row with a larger ``stat`` appears in one of
        them before the commit's append, it fails (nothing written) and raises ``Retry``."""
        ids = sorted({int(v) for v in values})
        rows = (read(self.spark, self.path).where(F.col(column).isin(ids)).groupBy(column)
                .agg(F.max(stat).alias("high")).collect()) if ids else []
        found = {int(r[column]): int(r["high"]) for r in rows if r["high"] is not None}
        self._tail_column, self._tail_end = column, stat
        self._tails = {v: found.get(v, 0) for v in ids}
        return dict(self._tails)

    def lookup(self, column: str, value: int, stat: str, wanted: Sequence[int]) -> list[dict]:
        """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted`` (one query;
        the commit's condition is set by ``expect_max``)."""
        return lookup(self.spark, self.path, column, value, stat, wanted)

    def frame(self) -> DataFrame:
        """The table's latest version as a DataFrame."""
        return read(self.spark, self.path)

    def append_frame(self, df: DataFrame, partition_by: tuple[str, ...]) -> int | None:
        """Insert ``df``'s rows under the condition set by ``expect_max`` (one guarded append); None (the
        version would cost a query).

        Raises:
            Retry: a partition's largest value grew since ``expect_max``: nothing was written.
        """
        self.insert_frame(df)
        return None

    # ---- writes -----------------------------------------------------------------------------
    def write_rows(self, rows: list[tuple], schema: StructType, partition_by: tuple[str, ...] = (),
                   stats_columns: tuple[str, ...] = (), folder: str | None = None) -> list[NewRows]:
        return [NewRows(list(rows), schema)] if rows else []

    @staticmethod
    def removals(files: Sequence, data_change: bool = True) -> list[RowsRemoved]:
        return [RowsRemoved(f) for f in files if isinstance(f, RowRead)]

    @staticmethod
    def set_app_version(app_id: str, number: int) -> AppVersion:
        return AppVersion(app_id, int(number))

    def app_version(self, app_id: str) -> int:
        """The largest number recorded for ``app_id`` (-1: none): its write mark, one query. The
        commit fences it: setting it then is a compare-and-set against what was read."""
        found = self._mark_reads(app_id).get(app_id)
        self._marks_read[app_id] = None if found is None else (found[0], found[2])
        return -1 if found is None else found[0]

    def app_versions(self, prefix: str) -> dict[str, tuple[int, int | None]]:
        """The write marks of the application ids starting with ``prefix``: each one's number and
        last update (ms), one query over the marks partition."""
        return {a: (n, updated) for a, (n, updated, _) in self._mark_reads(prefix).items()}

    def _mark_reads(self, prefix: str) -> dict[str, tuple[int, int | None, int]]:
        rows = (read(self.spark, self.path)
                .where((F.col("segment_id") == MARKS_SEGMENT) & F.col("writer_id").startswith(prefix))
                .groupBy("writer_id").agg(F.max(F.struct(
                    F.coalesce("rel_event_offset", F.lit(0)).alias("generation"), "rel_offset", "rel_next_offset"))
                    .alias("latest"))
                .collect())
        # a mark is its row of the largest generation (marks are appended: ``fenced_insert``)
        return {r["writer_id"]: (int(r["latest"]["rel_offset"]), None if r["latest"]["rel_next_offset"] is None
                                 else int(r["latest"]["rel_next_offset"]), int(r["latest"]["generation"]))
                for r in rows}

    # ---- files placed by hand: the classic transaction's; no public API offers them -----------
    @staticmethod
    def _refuse(verb: str):
        raise NotImplementedError(f"{verb}: the public-API backend places no files (its callers check "
                                  "``places_files``)")

    def files_in(self, column: str, values: list[int]):
        self._refuse("files_in")

    def files_where(self, predicate: str | None):
        self._refuse("files_where")

    def read_files_in(self, column: str, values: list[int]):
        self._refuse("read_files_in")

    def partition_files_since(self, column: str, values: list[int], after_version: int, limit: int | None = None):
        self._refuse("partition_files_since")

    def unfenced_files(self) -> list[FileEntry]:
        """Every data file of the table now, from a query of its rows' file metadata
        (``_metadata``: path, size, modification time) and partition values: no log read."""
        return data_files(self.spark, self.path)

    def track_files(self, files: Sequence):
        self._refuse("track_files")

    def read_files(self, files: Sequence):
        self._refuse("read_files")

    def write(self, df: DataFrame, partition_by: tuple[str, ...]):
        self._refuse("write")

    def record_metrics(self, metrics: dict[str, int]):
        self._refuse("record_metrics")

    def commit_new_table(self, schema: StructType, partition_by: tuple[str, ...], properties: dict[str, str], adds: list):
        self._refuse("commit_new_table")

    def commit(self, adds: Sequence | None, partition_by: tuple[str, ...] = (), extra: Sequence | None = None,
               delete_predicate: str | None = None) -> int:
        """One command (a MERGE of rows, a guarded append at tails) with this transaction's fence. Returns None (the new version would
        cost a query), or for a commit of nothing the empty commit's version.

        Raises:
            Retry: the tails read are stale (a concurrent append or seal): nothing was written.
            An error naming ``STALE`` (a conflict for ``retrying``): the rows read changed.
        """
        new = [a for a in (adds or []) if isinstance(a, NewRows)]
        removed = [e.read for e in (extra or []) if isinstance(e, RowsRemoved)]
        apps = [e for e in (extra or []) if isinstance(e, AppVersion)]
        if delete_predicate is not None or any(not isinstance(e, (RowsRemoved, AppVersion)) for e in (extra or [])):
            raise NotImplementedError("committing files placed by hand on the public-API backend")
        schema = new[0].schema if new else None
        rows = [r for n in new for r in n.rows]
        if self._tails is not None or (apps and not self._reads):
            if rows or apps:
                self.insert_frame(local_frame(self.spark, rows, schema) if rows else None, apps)
        elif self._reads:
            if apps:
                raise NotImplementedError("an application version with a compare-and-set of rows on the "
                                          "public-API backend")
            self._commit_rows(rows, schema, removed)
        elif rows:
            local_frame(self.spark, rows, schema).write.format("delta").mode("append").save(self.path)
            self.inserted = len(rows)
        else:
            return self.empty_commit()
        return None  # the version would cost a query: no caller of a Connect commit needs it

    def empty_commit(self) -> int:
        """Commit nothing (a version that adds no data) and return that version, found in the
        table's history by a token recorded with it."""
        import uuid

        token = f"pravega-spark-empty-{uuid.uuid4()}"
        target = read(self.spark, self.path)
        target.limit(0).write.format("delta").mode("append").option("userMetadata", token).save(self.path)
        found = (self.spark.sql(f"DESCRIBE HISTORY {table(self.path)} LIMIT 20")
                 .where(F.col("userMetadata") == token).select("version").collect())
        if not found:
            raise Retry(f"{self.path}: the empty commit was not found in the latest 20 versions")
        return int(found[0][0])

    def _commit_rows(self, rows: list[tuple], schema: StructType | None, removed: list[RowRead]) -> None:
        target = read(self.spark, self.path)
        names = target.columns
        fields = {f.name: f for f in target.schema.fields}
        fence = " OR ".join(f"({r.fence})" for r in self._reads)
        known = sorted({fp for r in self._reads for fp in r.fingerprints})
        gone = {r.fingerprint for r in removed}
        control = StructType([StructField(n, fields[n].dataType, True) for n in names] + [
            StructField("__op", StringType(), False), StructField(FINGERPRINT, LongType(), True),
            StructField("__fps", ArrayType(LongType(), False), True), StructField("__del", BooleanType(), True)])
        blank = (None,) * len(names)
        source_rows = [(*blank, "c", None, known, False)]
        source_rows += [(*blank, "r", fp, None, fp in gone) for fp in known]
        order = schema.fieldNames() if schema is not None else names
        for row in rows:
            values = dict(zip(order, row, strict=True))
            source_rows.append((*(values.get(n) for n in names), "n", None, None, False))
        source = local_frame(self.spark, source_rows, control)
        fp = f"xxhash64({', '.join(f't.`{n}`' for n in names)})"
        first = f"`{names[0]}`"
        stale = f"raise_error('{STALE} of {self.path.replace(chr(39), '')}')"
        cols = ", ".join(f"`{n}`" for n in names)
        values = ", ".join(f"s.`{n}`" for n in names)
        self.spark.sql(
            f"MERGE INTO {table(self.path)} AS t USING {{source}} AS s "
            f"ON ({fence}) AND ((s.__op = 'c' AND NOT array_contains(s.__fps, {fp})) "
            f"OR (s.__op = 'r' AND {fp} = s.{FINGERPRINT})) "
            f"WHEN MATCHED AND s.__op = 'c' THEN UPDATE SET t.{first} = {stale} "
            f"WHEN MATCHED AND s.__del THEN DELETE "
            f"WHEN NOT MATCHED AND s.__op = 'r' THEN INSERT ({first}) VALUES ({stale}) "
            f"WHEN NOT MATCHED AND s.__op = 'n' THEN INSERT ({cols}) VALUES ({values})",
            source=source)  # a command runs when sent: its result (counts) is not needed
