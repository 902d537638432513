"""Delta access: the one module that imports ``delta.tables`` or handles commit conflicts.

Every other module describes *what* to commit (a DataFrame and a guard condition); this module
runs the commit, recognises Delta's optimistic-concurrency conflicts (which share no Python base
class) and retries with bounded exponential backoff.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from .errors import RetriesExhaustedError

log = logging.getLogger("pravega_spark")

T = TypeVar("T")

CONFLICTS: tuple[type[BaseException], ...] = (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    ConcurrentDeleteDeleteException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    MetadataChangedException,
    ProtocolChangedException,
    DeltaConcurrentModificationException,
)

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter."""

    attempts: int = 30
    initial_backoff: float = 0.05
    max_backoff: float = 2.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_backoff, self.initial_backoff * (2**attempt)))


DEFAULT_RETRY = RetryPolicy()


class Retry(Exception):
    """Raised inside a retried step to ask for another attempt (e.g. a stale read was detected)."""


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Delta's optimistic-concurrency conflicts."""
    if isinstance(exc, CONFLICTS):
        return True
    # Table creation races surface as a file-already-exists from the log store.
    text = str(exc)
    return "FileAlreadyExistsException" in text or "DELTA_CONCURRENT" in text


def retrying(step: Callable[[], T], what: str, policy: RetryPolicy = DEFAULT_RETRY) -> T:
    """Run ``step`` until it succeeds, retrying on Delta conflicts and :class:`Retry`.

    Raises:
        RetriesExhaustedError: after ``policy.attempts`` conflicting attempts. Each attempt is a
            single Delta commit or none, so nothing is half-written.
    """
    last: BaseException | None = None
    for attempt in range(policy.attempts):
        try:
            return step()
        except Retry as exc:
            last = exc
            log.debug("%s: retry %d (%s)", what, attempt + 1, exc)
        except Exception as exc:  # noqa: BLE001 - filtered right below
            if not is_conflict(exc):
                raise
            last = exc
            log.debug("%s: conflict on attempt %d: %s", what, attempt + 1, type(exc).__name__)
        if attempt + 1 < policy.attempts:
            time.sleep(policy.delay(attempt))
    raise RetriesExhaustedError(
        f"{what}: gave up after {policy.attempts} attempts conflicting with concurrent writers "
        f"(last: {type(last).__name__}: {str(last).splitlines()[0] if last else ''}); nothing was "
        "written by this call") from last


def table(spark: SparkSession, path: str) -> DeltaTable:
    return DeltaTable.forPath(spark, path)


def is_table(spark: SparkSession, path: str) -> bool:
    return DeltaTable.isDeltaTable(spark, path)


def create_table(spark: SparkSession, path: str, schema: StructType,
                 partition_by: tuple[str, ...] = ()) -> None:
    """Create an empty Delta table at ``path`` unless one exists (safe to race)."""

    def create() -> None:
        if DeltaTable.isDeltaTable(spark, path):
            return
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        builder.execute()

    retrying(create, f"create table {path}")


def read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The table at ``path`` (at ``version`` if given) as a DataFrame."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def version(spark: SparkSession, path: str) -> int:
    """The table's latest committed version."""
    return int(DeltaTable.forPath(spark, path).history(1).select("version").first()[0])


@contextlib.contextmanager
def tagged_commit(spark: SparkSession) -> Iterator[str]:
    """Tag commits made inside the block with a unique token in ``userMetadata``.

    Use it with a session of one's own (``spark.newSession()``): the tag is a session setting.
    """
    token = uuid.uuid4().hex
    previous = spark.conf.get(USER_METADATA_CONF, None)
    spark.conf.set(USER_METADATA_CONF, token)
    try:
        yield token
    finally:
        if previous is None:
            spark.conf.unset(USER_METADATA_CONF)
        else:
            spark.conf.set(USER_METADATA_CONF, previous)


def version_of_commit(spark: SparkSession, path: str, token: str, depth: int = 1000) -> int | None:
    """The version whose commit carries ``token`` (see :func:`tagged_commit`), if among the last
    ``depth`` (looked up in the last 4 first: usually ours is the latest)."""
    for limit in (4, depth):
        rows = (DeltaTable.forPath(spark, path).history(limit)
                .where(f"userMetadata = '{token}'").select("version").collect())
        if rows:
            return int(rows[0][0])
    return None


@dataclass(frozen=True)
class MergeOutcome:
    """What a MERGE did, from the DataFrame Delta returns."""

    affected: int
    updated: int
    deleted: int
    inserted: int


def merge(spark: SparkSession, path: str, source: DataFrame, on: str, *,
          insert: bool = True, update: dict[str, str] | None = None,
          update_condition: str | None = None) -> MergeOutcome:
    """One MERGE commit: ``source`` aliased ``s`` into the table aliased ``t``.

    Literal partition predicates in ``on`` make the MERGE read (and so be fenced on) exactly those
    partitions: if a concurrent commit adds files there, this one fails with
    ``ConcurrentAppendException`` and nothing is written.
    """
    builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), on)
    if update is not None:
        builder = builder.whenMatchedUpdate(condition=update_condition, set=update)
    if insert:
        builder = builder.whenNotMatchedInsertAll()
    row = builder.execute().first()
    if row is None:
        return MergeOutcome(0, 0, 0, 0)
    values = row.asDict()
    return MergeOutcome(int(values.get("num_affected_rows") or 0),
                        int(values.get("num_updated_rows") or 0),
                        int(values.get("num_deleted_rows") or 0),
                        int(values.get("num_inserted_rows") or 0))


def delete(spark: SparkSession, path: str, condition: str) -> None:
    DeltaTable.forPath(spark, path).delete(condition)


def vacuum(spark: SparkSession, path: str, retention_hours: float | None) -> None:
    """VACUUM the table; retention below the table's own window needs the safety check off."""
    check = "spark.databricks.delta.retentionDurationCheck.enabled"
    previous = spark.conf.get(check, None)
    if retention_hours is not None:
        spark.conf.set(check, "false")
    try:
        DeltaTable.forPath(spark, path).vacuum(retention_hours)
    finally:
        if previous is None:
            spark.conf.unset(check)
        else:
            spark.conf.set(check, previous)


def _fs(spark: SparkSession, path: str):  # -> (FileSystem, Path) JVM objects
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hadoop_path


def remove_path(spark: SparkSession, path: str) -> bool:
    """Recursively delete ``path`` from storage (any Hadoop file system)."""
    fs, p = _fs(spark, path)
    return bool(fs.delete(p, True)) if fs.exists(p) else False
