"""Storage under tables, through the table's Hadoop file system (any scheme: ``file:``,
``s3a://``, ``abfss://``, ``dbfs:/``): reading a table, small files' rows without a Spark job,
writing and deleting files, checking a location before a table is created there, VACUUM."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from urllib.parse import unquote, urlparse

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from ..errors import TableLocationError
from .files import FileEntry
from .jvm import hadoop_path, java_class

log = logging.getLogger("pravega_spark")


def is_table(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


def _is_delta_entry(name: str, is_dir: bool) -> bool:
    """Whether a Delta writer makes an entry of this name in a table's folder: its log, hidden and
    underscored files (checksums, markers), data files, partition folders."""
    return name.startswith(("_", ".")) or (name.startswith("part-") and not is_dir) or (is_dir and "=" in name)


def check_table_location(spark: SparkSession, path: str) -> None:
    """Refuse a location holding anything but what a Delta writer makes (``TableLocationError``).

    A folder whose entries are all a Delta writer's (``_delta_log/``, data files, partition
    folders) may be becoming a table in another process: it passes."""
    fs, p = _fs(spark, path)
    if not fs.exists(p):
        return
    status = fs.getFileStatus(p)
    if not status.isDirectory():
        raise TableLocationError(f"cannot create a table at {path}: a file is there")
    entries = fs.listStatus(p)
    stray = sorted(str(e.getPath().getName()) for e in entries
                   if not _is_delta_entry(str(e.getPath().getName()), bool(e.isDirectory())))
    if stray:
        shown = ", ".join(stray[:5]) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
        raise TableLocationError(f"cannot create a table at {path}: it holds {shown}, which is not a Delta "
                                 "table's; move it away and try again")


def read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The table at ``path`` (at ``version`` if given) as a DataFrame."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


_ROWS: dict[tuple[str, str], tuple] = {}
_ROWS_LIMIT = 20_000


def _utc_times(data_type):
    """``data_type`` with every timestamp in it (nested in structs and lists too) as aware UTC
    microseconds: Delta's timestamps are UTC instants, whether a file stores them with a zone
    (INT64) or not (Spark's INT96)."""
    import pyarrow as pa

    if pa.types.is_timestamp(data_type):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_struct(data_type):
        return pa.struct([pa.field(f.name, _utc_times(f.type), f.nullable) for f in data_type])
    if pa.types.is_list(data_type):
        item = data_type.value_field
        return pa.list_(pa.field(item.name, _utc_times(item.type), item.nullable))
    return data_type


def read_rows(spark: SparkSession, path: str, files: Sequence[FileEntry]) -> list[dict]:
    """The rows of a few small data files of the table at ``path`` (partition columns added), as
    dicts with Python values (timestamps aware UTC). A file never changes once written, so rows
    are kept per file path: reading the same files again costs nothing. The bytes are read through
    the table's Hadoop file system and decoded with pyarrow (no Spark job)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: list[dict] = []
    jvm = spark.sparkContext._jvm
    base = hadoop_path(jvm, path)
    for f in files:
        key = (path, f.path)
        rows = _ROWS.get(key)
        if rows is None:
            child = hadoop_path(jvm, java_class(jvm, "java.net.URI")(f.path))
            full = child if child.isAbsolute() else hadoop_path(jvm, base, child)
            fs = full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
            stream = fs.open(full)
            try:
                data = bytes(java_class(jvm, "org.apache.commons.io.IOUtils").toByteArray(stream))
            finally:
                stream.close()
            table = pq.read_table(pa.BufferReader(data))
            columns = [table.column(field.name).cast(_utc_times(field.type)) for field in table.schema]
            table = pa.table(columns, names=table.schema.names)
            parts = dict(f.partition_values)
            rows = tuple({**r, **parts} for r in table.to_pylist())
            if len(_ROWS) >= _ROWS_LIMIT:
                _ROWS.clear()
            _ROWS[key] = rows
        out.extend(dict(r) for r in rows)
    return out


def read_rows_where(spark: SparkSession, path: str, files: Sequence[FileEntry], column: str,
                    values: Sequence[int]) -> list[dict]:
    """The rows of ``files`` whose ``column`` is one of ``values`` (partition columns added), read
    with pyarrow straight from storage when it can reach it (local files; S3 with the session's
    settings): only the files' footers and the row groups whose statistics may hold a value are
    read, no Spark job. Other file systems read whole files (``read_rows``) and filter here."""
    import pyarrow.parquet as pq

    wanted = {int(v) for v in values}
    local = local_dir(path)
    s3 = None
    if local is None:
        from .object_store import pyarrow_s3_options

        options = pyarrow_s3_options(spark, path)
        if options is None:
            return [r for r in read_rows(spark, path, files) if r.get(column) in wanted]
        import pyarrow.fs as pafs

        s3 = (pafs.S3FileSystem(**options), urlparse(path))
    out: list[dict] = []
    for f in files:
        relative = unquote(f.path)
        if local is not None:
            where, fs = (relative if os.path.isabs(relative) else os.path.join(local, relative)), None
        else:
            fs, parsed = s3
            where = f"{parsed.netloc}{parsed.path.rstrip('/')}/{relative}"
        table = pq.read_table(where, filesystem=fs, filters=[(column, "in", sorted(wanted))])
        parts = dict(f.partition_values)
        out.extend({**r, **parts} for r in table.to_pylist())
    return out


def vacuum(spark: SparkSession, path: str, retention_hours: float | None) -> None:
    """VACUUM the table; retention below the table's own window needs the safety check off.

    Runs in a session of its own: the retention check and the listing parallelism (the cluster's
    cores, not Spark's 10,000 tasks) are set for this VACUUM only. Delta records a VACUUM as two
    commits (start and end), so on the local file system it holds the table's commit lock
    (``commit_lock``) throughout.
    """
    session = spark.newSession()
    session.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism",
                     str(max(2, spark.sparkContext.defaultParallelism)))
    if retention_hours is not None:
        session.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    with commit_lock(path), console_to_log(spark, f"VACUUM {path}"):
        DeltaTable.forPath(session, path).vacuum(retention_hours)


@contextmanager
def console_to_log(spark: SparkSession, what: str):
    """Catch what the JVM prints with Scala's ``println`` in this thread meanwhile (Delta's
    VACUUM prints "Deleted N files and directories ..." to the driver's stdout, which is the
    user's, with no setting to stop it) and log it at INFO instead. Scala's console stream is
    per thread, and py4j serves a Python thread from one JVM thread: other threads print as
    before."""
    jvm = spark.sparkContext._jvm
    console = getattr(java_class(jvm, "scala.Console$"), "MODULE$")
    caught = jvm.java.io.ByteArrayOutputStream()
    before = console.out()
    console.setOutDirect(jvm.java.io.PrintStream(caught, True, "UTF-8"))
    try:
        yield
    finally:
        console.setOutDirect(before)
        text = str(caught.toString("UTF-8")).strip()
        if text:
            log.info("%s: %s", what, text)


def _fs(spark: SparkSession, path: str):  # -> (FileSystem, Path) JVM objects
    full = hadoop_path(spark.sparkContext._jvm, path)
    return full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), full


def delete_files(spark: SparkSession, table_path: str, paths: list[str]) -> int:
    """Delete files that no commit references (table-relative or absolute paths) from storage
    right away; returns how many existed. For staged data discarded by an abort: nothing can
    read them, so there is no need to wait for VACUUM."""
    local = local_dir(table_path)
    if local is not None:  # no round trip to the JVM per file
        deleted = 0
        for p in paths:
            relative = unquote(p)
            full = relative if os.path.isabs(relative) else os.path.join(local, relative)
            try:
                os.unlink(full)
                deleted += 1
            except FileNotFoundError:
                pass
            with suppress(FileNotFoundError):  # Hadoop's checksum beside a file it wrote
                os.unlink(_checksum_of(full))
        return deleted
    jvm = spark.sparkContext._jvm
    base = hadoop_path(jvm, table_path)
    deleted = 0
    for p in paths:
        child = hadoop_path(jvm, java_class(jvm, "java.net.URI")(p))
        full = child if child.isAbsolute() else hadoop_path(jvm, base, child)
        fs = full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        deleted += bool(fs.delete(full, False))
    return deleted


def remove_path(spark: SparkSession, path: str) -> bool:
    """Recursively delete ``path`` from storage (any Hadoop file system)."""
    fs, p = _fs(spark, path)
    return bool(fs.delete(p, True)) if fs.exists(p) else False


def link_files(spark: SparkSession, table_path: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Give each file ``source`` of the table a second name ``target`` (table-relative paths, as
    the log writes them), leaving ``source`` in place: a hard link on a local file system (no
    bytes copied; a copy where links are refused), a server-side copy on S3 (pyarrow, with the
    session's S3A settings), a copy through the table's Hadoop file system elsewhere. A target
    that exists already is the same file (names are unique per write): it is kept. Safe to repeat,
    and to run from two processes at once."""
    if not pairs:
        return
    local = local_dir(table_path)
    if local is not None:
        for source, target in pairs:
            src, dst = os.path.join(local, unquote(source)), os.path.join(local, unquote(target))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            try:
                os.link(src, dst)
            except FileExistsError:
                continue
            except OSError:  # a mount without hard links: copy under a temporary name, then rename
                shutil.copyfile(src, dst + ".copying")
                os.replace(dst + ".copying", dst)
            with suppress(FileExistsError, FileNotFoundError):  # Hadoop's checksum, if it wrote one
                os.link(_checksum_of(src), _checksum_of(dst))
        return
    from .object_store import pyarrow_s3_options

    options = pyarrow_s3_options(spark, table_path)
    if options is not None:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(**options)
        parsed = urlparse(table_path)
        root = f"{parsed.netloc}{parsed.path.rstrip('/')}"
        with ThreadPoolExecutor(max_workers=min(16, len(pairs))) as pool:
            list(pool.map(lambda p: fs.copy_file(f"{root}/{unquote(p[0])}", f"{root}/{unquote(p[1])}"), pairs))
        return
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    base = hadoop_path(jvm, table_path)
    for source, target in pairs:
        src, dst = hadoop_path(jvm, base, unquote(source)), hadoop_path(jvm, base, unquote(target))
        fs = src.getFileSystem(conf)
        if not fs.exists(dst):
            jvm.org.apache.hadoop.fs.FileUtil.copy(fs, src, fs, dst, False, conf)


def _checksum_of(path: str) -> str:
    """Hadoop's local checksum file of ``path`` (``.<name>.crc`` beside it)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.crc")


_WRITE_SLICE = 1 << 20


def write_file(spark: SparkSession, table_path: str, relative: str, data: memoryview) -> None:
    """Write ``data`` as a new file at ``relative`` under the table (fails if it exists)."""
    jvm = spark.sparkContext._jvm
    full = hadoop_path(jvm, hadoop_path(jvm, table_path), relative)
    fs = full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    out = fs.create(full, False)
    try:  # in slices: each crosses to the JVM as a copy (a big chunk would be copied whole)
        for start in range(0, len(data), _WRITE_SLICE):
            out.write(bytearray(data[start:start + _WRITE_SLICE]))
    finally:
        out.close()


COMMIT_LOCK = ".pravega_spark.commit.lock"


def local_dir(path: str) -> str | None:
    """The local directory of a ``file:`` path (None for any other scheme)."""
    parsed = urlparse(path)
    return unquote(parsed.path) if parsed.scheme == "file" else None


@contextmanager
def commit_lock(path: str) -> Iterator[None]:
    """Hold the table's commit lock while committing to a table on the local file system.

    Delta writes a commit ``_delta_log/N.json`` only if absent, but on the local file system its
    log store checks for the file and then renames onto it, two steps that exclude other
    committers only inside one JVM: two processes committing the same version at once could both
    succeed, the later file replacing the earlier (a lost commit, and with it a broken fence). An
    exclusive ``flock`` on a file in the table's log directory makes the two steps one across the
    processes of a machine; the kernel releases it if the process dies. Other file systems (the
    object stores' log stores, HDFS) need no lock here: nothing is done.
    """
    local = local_dir(path)
    if local is None:
        yield
        return
    log_dir = os.path.join(local, "_delta_log")
    os.makedirs(log_dir, exist_ok=True)
    fd = os.open(os.path.join(log_dir, COMMIT_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
