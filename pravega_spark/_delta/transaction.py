"""One optimistic transaction on a Delta table, driven through the JVM: the classic backend's
way to fence a commit (declare what was read, decide in Python, commit or conflict)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from . import actions, storage
from .files import (
    AppVersion,
    FileEntry,
    PartitionSummary,
    Removal,
    in_partition_dir,
    misplaced,
    parquet_bytes,
    removals,
    summarize,
)
from .jvm import delta_log, none, to_seq
from .log import listed_files, summarize_snapshot
from .retry import retrying

log = logging.getLogger("pravega_spark")


def might_hold(files: Sequence[FileEntry], stat: str, wanted: Sequence[int]) -> list[FileEntry]:
    """The files whose statistics of ``stat`` may hold one of ``wanted`` (all files lacking them)."""
    values = [int(v) for v in wanted]
    out = []
    for f in files:
        low, high = f.min_values.get(stat), f.max_values.get(stat)
        if low is None or high is None or any(int(low) <= v <= int(high) for v in values):
            out.append(f)
    return out


def create_table(spark: SparkSession, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
    """Create the Delta table at ``path`` unless one exists; True if this call created it.

    Safe to race between processes and machines (``tests/test_first_use_race.py``). Version 0,
    the table's metadata and ``rows`` (tuples in ``schema``'s order, if any), is one commit that
    the log store writes only if absent, so of several creators exactly one writes it; the others'
    commits conflict, and their retry finds the table and uses it. A location that is becoming a
    table (an empty ``_delta_log/``, or a creator's data files not yet committed) is a race, not
    an error: this call competes for version 0 like any creator, and never deletes anything. (It
    does not use Delta's ``createIfNotExists``, which refuses such a location.)

    Raises:
        TableLocationError: the location holds something that is not a table being created (a
            plain file, or a folder with other files); nothing is written.
        RetriesExhaustedError: the creation kept conflicting (see ``retrying``).
    """
    def attempt() -> bool:
        txn = DeltaTransaction(spark, path)
        if txn.read_version >= 0:
            return False
        storage.check_table_location(spark, path)
        adds = txn.write_rows(rows, schema, partition_by) if rows else []
        txn.commit_new_table(schema, partition_by, properties or {}, adds)
        return True

    return retrying(attempt, f"create table {path}")




class DeltaTransaction:
    """One optimistic transaction on a Delta table, driven through the JVM.

    This is the fenced append: the transaction declares which partitions it depends on
    (``fence_partitions``), reads their state from file statistics (``partition_maxima``), writes
    its files and commits them. If a concurrent commit adds a file to a tracked partition after the
    transaction's snapshot, the commit fails with ``ConcurrentAppendException`` and nothing is
    written (the files are orphans that ``VACUUM`` removes). A plain append is never fenced, and a
    MERGE would read (and rewrite nothing but still scan) the data; this reads only the log.
    """

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._txn = delta_log(spark, path).startTransaction()
        self._listed: list[FileEntry] | None | bool = False  # the checksum file's list, once read
        self.committed_version: int | None = None  # the version of this transaction's commit
        self.unplaced_names: list[str] = []  # see ``commit``

    def __repr__(self) -> str:
        return f"DeltaTransaction({self.path}, read_version={self.read_version})"

    @property
    def table_id(self) -> str:
        """The snapshot's table id (a table deleted and created again gets a new one)."""
        return str(self._txn.snapshot().metadata().id())

    @property
    def read_version(self) -> int:
        """The table version this transaction read (-1 for a table with no commit)."""
        return int(self._txn.readVersion())

    def _seq(self, items: list):
        return to_seq(self._jvm, items)

    def _files_seq(self, files: Sequence[FileEntry]):
        return actions.to_seq(self._jvm, list(files))

    def fence_partitions(self, column: str, values: list[int]) -> None:
        """Declare that this transaction depends on these partitions (its fence)."""
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        predicate = parser.parseExpression(f"{column} IN ({', '.join(str(int(v)) for v in values)})")
        self._txn.trackReadPredicates(self._seq([predicate]), True, True)

    def summarize(self, column: str, values: list[int], end_column: str, stat: str) -> dict[int, PartitionSummary]:
        """``summarize`` of the snapshot's files in these partitions (the checksum file's list,
        else one aggregate over the snapshot's file list; never the data)."""
        files = self.all_files()
        found = summarize(files, column, values, end_column, stat) if files is not None else None
        if found is None:
            found = summarize_snapshot(self.spark, self._txn.snapshot(), column, values, end_column, stat)
        return found

    def all_files(self) -> list[FileEntry] | None:
        """The snapshot's files from its checksum file (no Spark job), or None if it does not
        list them. Not a dependency by itself (see ``read_partition``/``read_whole_table``)."""
        if self._listed is False:
            self._listed = listed_files(self.spark, self._txn.snapshot())
        return None if self._listed is None else list(self._listed)

    def read_partition(self, values: Mapping[str, str]) -> list:
        """The snapshot's files in one partition (string values of one or more partition
        columns), read and so fenced by this transaction: a concurrent add to the partition, or
        a removal of one of these files, makes the commit fail."""
        condition = " AND ".join(f"{column} = '{value}'" for column, value in values.items())
        files = self.all_files()
        if files is None:
            return self.files_where(condition)
        files = [f for f in files if all(f.partition(c) == v for c, v in values.items())]
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        self._txn.trackReadPredicates(self._seq([parser.parseExpression(condition)]), True, True)
        self._txn.trackFilesRead(self._files_seq(files))
        return files

    def read_whole_table(self) -> list:
        """Every file of the snapshot, read (and fenced) by this transaction: any concurrent
        change of the table makes the commit fail."""
        files = self.all_files()
        if files is None:
            return self.files_where(None)
        self._txn.readWholeTable()
        self._txn.trackFilesRead(self._files_seq(files))
        return files

    def read_files_in(self, column: str, values: list[int]) -> list:
        """The snapshot's files in these (integer) partitions, with the files themselves as this
        transaction's reads: a concurrent removal of one of them makes the commit fail, a
        concurrent add to the partitions does not (when the checksum file lists the files;
        otherwise Delta's ``filterFiles`` also fences the partitions)."""
        files = self.all_files()
        if files is None:
            return self.files_in(column, values)
        wanted = {str(int(v)) for v in values}
        files = [f for f in files if f.partition(column) in wanted]
        self._txn.trackFilesRead(self._files_seq(files))
        return files

    def unfenced_files(self) -> list[FileEntry]:
        """Every file of the snapshot, without declaring a read: the checksum file's list, else
        the snapshot's file list (a query over the log's state). See ``track_files``."""
        files = self.all_files()
        if files is None:
            files = actions.entries(self._jvm, self._txn.snapshot().allFiles().collectAsList())
        return files

    def track_files(self, files: Sequence[FileEntry]) -> None:
        """Declare ``files`` read: a concurrent commit removing one of them makes ours fail
        (``ConcurrentDeleteReadException``); adds to their partitions do not."""
        self._txn.trackFilesRead(self._files_seq(files))

    def rows(self, files: Sequence[FileEntry]) -> list[dict]:
        """The rows of ``files`` (small files: see ``storage.read_rows``)."""
        return storage.read_rows(self.spark, self.path, files)

    def write_rows(self, rows: list[tuple], schema: StructType, partition_by: tuple[str, ...] = (),
                   stats_columns: tuple[str, ...] = (), folder: str | None = None) -> list[FileEntry]:
        """Write a few rows (tuples in ``schema``'s order) as new files of the table, one per
        partition, without a Spark job: encoded with pyarrow in this process and put through the
        table's Hadoop file system. Returns their add actions (for ``commit``), with statistics
        (record count; min, max and null count of ``stats_columns``). Not yet visible. ``folder``
        (optional) is the directory to write into instead of the partition's."""
        by_partition: dict[tuple, list[tuple]] = {}
        names = schema.fieldNames()
        keys = [names.index(c) for c in partition_by]
        for row in rows:
            by_partition.setdefault(tuple(str(row[i]) for i in keys), []).append(row)
        data_fields = [f for f in schema.fields if f.name not in partition_by]
        return [self._write_file([tuple(r[names.index(f.name)] for f in data_fields) for r in part_rows],
                                 data_fields, dict(zip(partition_by, values, strict=True)), stats_columns, folder)
                for values, part_rows in by_partition.items()]

    def _write_file(self, rows: list[tuple], fields: list, partition: dict[str, str],
                    stats_columns: tuple[str, ...], folder: str | None = None) -> FileEntry:
        data, stats = parquet_bytes(rows, fields, stats_columns)
        folder = "".join(f"{k}={v}/" for k, v in partition.items()) if folder is None else folder.rstrip("/") + "/"
        relative = f"{folder}part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        storage.write_file(self.spark, self.path, relative, data)
        return FileEntry(relative, dict(partition), len(data), int(time.time() * 1000), True, stats)

    def write(self, df: DataFrame, partition_by: tuple[str, ...]) -> list[FileEntry]:
        """Write ``df``'s rows as new files of the table (not yet visible: see ``commit``)."""
        # Delta's write takes its settings (Hadoop and Parquet options) from the thread's active
        # session: make that ours for the duration of the write.
        sessions = self._jvm.org.apache.spark.sql.SparkSession
        previous = sessions.getActiveSession()
        sessions.setActiveSession(self.spark._jsparkSession)
        try:
            written = self._txn.writeFiles(df._jdf)
        finally:
            if previous.isDefined():
                sessions.setActiveSession(previous.get())
            else:
                sessions.clearActiveSession()
        return actions.entries(self._jvm, written)

    # ---- versioned entries (key-value tables) --------------------------------------------------
    def expect_max(self, column: str, values: Sequence[int], stat: str) -> dict[int, int]:
        """The largest ``stat`` in each of these (integer) partitions at this transaction's snapshot
        (0 for an empty one), from file statistics. Fence them with ``fence_partitions``: a
        concurrent add there then fails the commit."""
        found = self.summarize(column, list(values), column, stat)
        return {int(v): int(found[int(v)].high) if int(v) in found and found[int(v)].high is not None else 0
                for v in values}

    def expect_tails(self, column: str, tails: dict[int, int]) -> None:
        """Nothing to do here: this transaction's fence is its snapshot and the partitions it
        tracks (``SqlTransaction`` turns the same call into its MERGE's condition)."""

    def lookup(self, column: str, value: int, stat: str, wanted: Sequence[int]) -> list[dict]:
        """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted``, read from
        the files whose statistics may hold one (declared read: a concurrent removal of one of
        them fails the commit)."""
        files = [f for f in self.unfenced_files() if f.partition(column) == str(int(value))]
        files = might_hold(files, stat, wanted)
        self.track_files(files)
        return storage.read_rows_where(self.spark, self.path, files, stat, wanted)

    def frame(self) -> DataFrame:
        """The table at this transaction's snapshot as a DataFrame (no read declared)."""
        return self.read_files(self.unfenced_files())

    def append_frame(self, df: DataFrame, partition_by: tuple[str, ...]) -> int:
        """Write ``df``'s rows as new files and commit them (the transaction's fence applies);
        returns the new version."""
        return self.commit(self.write(df, partition_by), partition_by)

    def empty_commit(self) -> int:
        """Commit nothing (a version that adds no data); its version."""
        return self.commit(None)

    def insert_frame(self, source: DataFrame, app: AppVersion | None = None) -> int:
        """Refused: this backend appends by placing files at the tails it read (``append_frame``,
        ``commit``), not by one statement at expected tails."""
        raise NotImplementedError("insert_frame: the classic transaction appends files placed at its tails")

    def ends_of_insert(self) -> dict[int, int]:
        """Refused, as ``insert_frame``."""
        raise NotImplementedError("ends_of_insert: the classic transaction appends files placed at its tails")

    # ---- application versions (Delta's SetTransaction): exactly-once markers in the log -----------
    def app_version(self, app_id: str) -> int:
        """The version last recorded for ``app_id`` in the snapshot (-1 if none), and a declared
        dependency on it: a concurrent commit recording ``app_id`` makes this one fail with
        ``ConcurrentTransactionException``.

        Read from the snapshot's checksum file when it lists the table's application versions (no
        Spark job), else from the snapshot's state.
        """
        checksum = self._txn.snapshot().checksumOpt()
        known = checksum.get().setTransactions() if checksum.isDefined() else None
        if known is not None and known.isDefined():
            self._txn.readTxn().addOne(app_id)
            entries = known.get()
            for i in range(entries.size()):
                entry = entries.apply(i)
                if entry.appId() == app_id:
                    return int(entry.version())
            return -1
        return int(self._txn.txnVersion(app_id))

    def app_versions(self, prefix: str) -> dict[str, tuple[int, int | None]]:
        """Every recorded application id starting with ``prefix``: (version, last-updated ms)."""
        checksum = self._txn.snapshot().checksumOpt()
        known = checksum.get().setTransactions() if checksum.isDefined() else None
        entries = known.get() if known is not None and known.isDefined() else self._txn.snapshot().setTransactions()
        out = {}
        for i in range(entries.size()):
            entry = entries.apply(i)
            if entry.appId().startswith(prefix):
                updated = entry.lastUpdated()
                out[entry.appId()] = (int(entry.version()), int(updated.get()) if updated.isDefined() else None)
        return out

    @staticmethod
    def set_app_version(app_id: str, version: int) -> AppVersion:
        """A SetTransaction action recording ``version`` for ``app_id`` (pass it to ``commit``)."""
        return AppVersion(app_id, int(version))

    # ---- files of tracked partitions -----------------------------------------------------------
    def files_in(self, column: str, values: list[int]) -> list[FileEntry]:
        """The snapshot's files in these partitions, read (and so fenced) by this transaction:
        a concurrent add or remove there makes the commit fail."""
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        predicate = parser.parseExpression(f"{column} IN ({', '.join(str(int(v)) for v in values)})")
        return actions.entries(self._jvm, self._txn.filterFiles(self._seq([predicate]), False))

    def files_where(self, predicate: str | None) -> list[FileEntry]:
        """The snapshot's files whose partition values satisfy ``predicate`` (SQL; None: all),
        read (and so fenced) by this transaction."""
        if predicate is None:
            files = self._txn.filterFiles()
        else:
            parsed = self.spark._jsparkSession.sessionState().sqlParser().parseExpression(predicate)
            files = self._txn.filterFiles(self._seq([parsed]), False)
        return actions.entries(self._jvm, files)

    def partition_files_since(self, column: str, values: list[int], after_version: int,
                              limit: int | None = None) -> tuple[list[FileEntry], bool] | None:
        """The files added to (and not removed from) these partitions by the commits after
        ``after_version`` up to this snapshot, read from the JSON log (no Spark job), and whether
        any commit there removed a file of them or changed the table's metadata. None if the log
        no longer has those commits, or there are more than ``limit`` of them.

        Not a dependency by itself: call ``fence_partitions`` to be fenced on the partitions.
        """
        if limit is not None and self.read_version - after_version > limit:
            return None
        if self.read_version <= after_version:
            return [], False
        wanted = {str(int(v)) for v in values}
        added: dict[str, FileEntry] = {}
        touched = False
        try:
            changes = self._txn.deltaLog().getChanges(after_version + 1, self.read_version,
                                                      none(self._jvm), True)
            while changes.hasNext():
                items = changes.next()._2()
                for i in range(items.size()):
                    (kind, body), = json.loads(items.apply(i).json()).items()
                    if kind in ("metaData", "protocol"):
                        touched = True
                    if kind not in ("add", "remove"):
                        continue
                    if (body.get("partitionValues") or {}).get(column) not in wanted:
                        continue
                    if kind == "add":
                        added[body["path"]] = FileEntry.from_log(body)
                    else:
                        touched = True
                        added.pop(body["path"], None)
        except Exception as exc:  # noqa: BLE001 - e.g. log files already cleaned up
            log.debug("log replay after version %d failed (%s); falling back", after_version, exc)
            return None
        return list(added.values()), touched

    def read_files(self, files: Sequence[FileEntry]) -> DataFrame:
        """The rows of ``files`` (from ``files_in``) as a DataFrame of the table's schema."""
        jdf = self._txn.deltaLog().createDataFrame(self._txn.snapshot(), self._files_seq(files), False,
                                                    none(self._jvm))
        return DataFrame(jdf, self.spark)

    @staticmethod
    def removals(files: Sequence[FileEntry], data_change: bool = True) -> list[Removal]:
        """Remove actions for ``files`` (a logical delete; VACUUM removes the bytes later).
        ``data_change=False`` marks a removal that changes no data (clean-up, compaction): Delta's
        streaming source skips it."""
        return removals(files, data_change)

    def record_metrics(self, metrics: dict[str, int]) -> None:
        """Operation metrics for this commit's entry in the table's history (as Delta's own
        commands record them, e.g. a DELETE's ``numRemovedFiles``)."""
        jvm = self._jvm
        sc = self.spark.sparkContext._jsc.sc()
        registered = jvm.java.util.HashMap()
        for name, value in metrics.items():
            metric = jvm.org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(sc, name)
            metric.set(int(value))
            registered.put(name, metric)
        self._txn.registerSQLMetrics(self.spark._jsparkSession,
                                     jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(registered))

    def commit_new_table(self, schema: StructType, partition_by: tuple[str, ...], properties: dict[str, str],
                         adds: list[FileEntry]) -> int:
        """Commit version 0 of a table that has none (``read_version`` -1): its metadata (schema,
        partition columns, properties; the protocol follows from them, as for Delta's CREATE
        TABLE) and ``actions``. If another creator commits version 0 first, this fails with a
        conflict (``ProtocolChangedException``) and writes nothing."""
        if self.read_version >= 0:
            raise ValueError(f"{self.path} already has version {self.read_version}")
        jvm = self._jvm
        metadata = jvm.org.apache.spark.sql.delta.actions.Action.fromJson(json.dumps({"metaData": {
            "id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": schema.json(), "partitionColumns": list(partition_by),
            "configuration": dict(properties), "createdTime": int(time.time() * 1000)}}))
        self._txn.updateMetadataForNewTable(metadata)
        operation = getattr(jvm, "org.apache.spark.sql.delta.DeltaOperations$CreateTable")(
            metadata, False, False, none(jvm))
        with storage.commit_lock(self.path):
            return int(self._txn.commit(actions.to_seq(jvm, list(adds)), operation))

    def commit(self, adds: Sequence[FileEntry] | None, partition_by: tuple[str, ...] = (),
               extra: Sequence[Removal | AppVersion | FileEntry] | None = None,
               delete_predicate: str | None = None) -> int:
        """Commit ``adds`` (files from ``write``/``write_rows``, or None) plus ``extra`` actions
        (removals, application versions) as one WRITE, or as one DELETE of ``delete_predicate``
        (SQL, recorded in the table's history); returns the new table version.

        A file of ``adds`` whose directory does not name its partition values (one written before
        its place was known, its base fixed at commit) is first given a name under its values'
        directory (``storage.link_files``: a hard link locally), which the commit records: every
        engine, those reading partition values from paths too, reads the log's values.
        ``unplaced_names`` lists the names it had before (a caller that owns them removes them
        once committed; else VACUUM does)."""
        jvm = self._jvm
        nothing = none(jvm)
        adds, self.unplaced_names = self._in_partition_dirs(adds or [], partition_by)
        items = [*adds, *(extra or [])]
        if delete_predicate is not None:
            parsed = self.spark._jsparkSession.sessionState().sqlParser().parseExpression(delete_predicate)
            operation = getattr(jvm, "org.apache.spark.sql.delta.DeltaOperations$Delete")(self._seq([parsed]))
        else:
            operation = getattr(jvm, "org.apache.spark.sql.delta.DeltaOperations$Write")(
                jvm.org.apache.spark.sql.SaveMode.Append,
                jvm.scala.Option.apply(self._seq(list(partition_by))), nothing, nothing, nothing, nothing, nothing, nothing, nothing)
        seq = actions.to_seq(jvm, items)
        with storage.commit_lock(self.path):
            self.committed_version = int(self._txn.commit(seq, operation))
        return self.committed_version

    def _in_partition_dirs(self, adds: Sequence[FileEntry], partition_by: tuple[str, ...]) -> tuple[list, list]:
        """``adds`` with each misplaced file renamed into its partition directory (linked there),
        and the names the moved ones had."""
        moved = [a for a in adds if misplaced(a, partition_by)]
        if not moved:
            return list(adds), []
        placed = {a.path: in_partition_dir(a, partition_by) for a in moved}
        storage.link_files(self.spark, self.path, [(a.path, placed[a.path].path) for a in moved])
        return [placed.get(a.path, a) for a in adds], [a.path for a in moved]
