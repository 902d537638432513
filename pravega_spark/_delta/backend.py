"""The interface the library uses to reach Delta, and the one place that picks its implementation.

``DeltaBackend`` is operation-level: each method is one thing the store does to a table or asks
of its session (qualify a path, read rows or a summary of partitions, compare-and-set a
partition's rows, open a fenced transaction, truncate, read the log's changes, VACUUM, remove
tables). It says what must hold, not how:

- ``ClassicBackend`` (``classic_backend.py``) drives a transaction directly through the JVM
  (open, read, decide in Python, commit files placed by hand: ``DeltaTransaction``);
- ``SqlBackend`` (``connect_backend.py``), with no JVM handle, expresses the same fence as one
  MERGE whose ON clause names the partitions literally and whose condition carries the decision.

Both take and hand out the plain values of ``files.py``, and both implement every method, so a
method one of them forgot is an ``AttributeError`` at once, never a silent fall into the other's
path. ``backend_for`` chooses once per session, by capability (``backend_kind``); no module outside ``_delta`` asks which it got,
only what it can do (``places_files``, ``reads_log_changes``).
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ..errors import InvalidConfigError
from . import jvm
from .classic_backend import ClassicBackend
from .files import CommitMetrics, PartitionSummary, TableState
from .local_data import is_connect_session
from .retry import RetryPolicy
from .rows import RowsChange
from .sql_backend import SqlBackend
from .sql_requests import BACKEND_ENV, DATABRICKS_ENV
from .transaction_protocol import TableTransaction

log = logging.getLogger("pravega_spark")


class DeltaBackend(Protocol):
    """What the library needs from Delta, one method per operation (see the module docstring)."""

    spark: SparkSession
    places_files: bool
    """Whether commits may add files placed by hand (transactions, large events, compaction)."""
    reads_log_changes: bool
    """Whether the log is read without a Spark job (``table_state``'s file lists, ``recent_changes``);
    ``file_changes`` works on both backends (a query of the JSON commits on the public-API one)."""
    removes_folders: bool
    """Whether ``remove_tables`` deletes the tables' files (else it empties them, and VACUUM
    removes the bytes later)."""
    resolves_at_evaluation: bool
    """Whether a read resolves "latest" each time Spark evaluates it (a Spark Connect session,
    where every request is a round trip) rather than pinning it at the call (SPEC ``read_events``)."""

    # the session
    def configure_session(self) -> None:
        """Apply the settings the backend's reads rely on (none where a session refuses them)."""

    def writer_session(self, conf: Mapping[str, str]) -> SparkSession:
        """The session a writer commits in, with ``conf`` set where a session of its own can hold it."""

    def check_root(self, root: str) -> None:
        """Refuse a store root whose commits would not be atomic, in one line."""

    def pyarrow_s3_options(self, path: str) -> dict | None:
        """The S3 settings pyarrow needs to open ``path``'s files, or None."""

    def in_session(self, df: DataFrame) -> DataFrame:
        """``df`` bound to the backend's session."""

    def plan_leaves(self, df: DataFrame) -> list[str]:
        """The leaves of ``df``'s plan, as text (empty where plans cannot be inspected)."""

    def estimated_size(self, df: DataFrame) -> int | None:
        """The optimizer's size estimate of ``df`` in bytes, or None."""

    def activate(self) -> None:
        """Make the session the thread's active one."""

    def wait_for_listeners(self, timeout_seconds: float) -> bool:
        """Wait until the session's listener bus is empty; False on timeout."""

    def is_stopped(self) -> bool:
        """Whether the session has been stopped."""

    # tables
    def qualify(self, path: str) -> str:
        """``path`` absolute and qualified by its file system."""

    def exists(self, path: str) -> bool:
        """Whether a Delta table is at ``path``."""

    def is_table(self, path: str) -> bool:
        """Whether ``path`` holds a Delta table (a log with a commit)."""

    def latest(self, path: str) -> tuple[int, str]:
        """The table's latest version and its id."""

    def version(self, path: str) -> int:
        """The table's latest version (-1 when there is none)."""

    def table_state(self, path: str, version: int | None = None) -> TableState:
        """A version of the table: number, id, and its files when listed without a job."""

    def create_table(self, path: str, schema: StructType, partition_by: tuple[str, ...] = (),
                     properties: dict[str, str] | None = None, rows: list[tuple] | None = None) -> bool:
        """Create the table unless it exists (safe to race); True if this call created it."""

    def table_property(self, path: str, key: str) -> str | None:
        """A property of the table's latest version, or None."""

    def read(self, path: str, version: int | None = None) -> DataFrame:
        """The table (at ``version``) as a DataFrame."""

    def read_rows(self, path: str, column: str | None = None, value: str | None = None) -> list[dict] | None:
        """A small table's rows (or one string partition's); None when the backend cannot read
        them without a query (the caller then queries ``read``)."""

    def read_rows_together(self, reads: Sequence[tuple[str, str | None, str | None]]) -> list[list[dict]] | None:
        """``read_rows`` of several ``(path, column, value)`` in one request, where a request is
        the cost (Connect); None when the backend reads them apart (or a table is missing)."""

    def summarize(self, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
                  version: int | None = None) -> dict[int, PartitionSummary]:
        """Per partition: the largest ``end_column`` and the extrema of ``stat``."""

    def lookup(self, path: str, column: str, value: int, stat: str, wanted: list[int],
               version: int | None = None) -> tuple[list[dict], int | None]:
        """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted``, and the
        number of data files read (None: a query read them)."""

    def file_changes(self, path: str, start: int, end: int) -> list[tuple[int, list[dict], list[dict]]]:
        """The adds and removes of commits ``start..end``, from the log (both backends)."""

    def recent_changes(self, path: str, since_ms: int, keep) -> list[tuple[int, list[dict], list[dict]]]:
        """The adds and removes of the commits since ``since_ms`` that ``keep`` accepts."""

    def added_in(self, path: str) -> DataFrame:
        """``file_name, added_in``: the version that added each data file."""

    def version_adding(self, path: str, partition: Mapping[str, object]) -> int | None:
        """The latest commit that added a data file to ``partition`` and removed none: a write
        at a segment's tail, when its commit did not return its version (``sql_tables``)."""

    # commits
    def transaction(self, path: str) -> TableTransaction:
        """A new fenced transaction on the table at ``path``."""

    def replace_rows(self, path: str, schema: StructType, change: RowsChange, what: str,
                     partition: Mapping[str, str] | None = None, partition_by: tuple[str, ...] = (),
                     retry: RetryPolicy | None = None) -> bool:
        """Compare-and-set of a partition (or a small table): one commit replacing its rows with
        ``change(rows)`` (None: no change), retried on any concurrent change there."""

    def rewrite_where(self, path: str, rows: DataFrame, condition: str) -> None:
        """Replace the rows matching ``condition`` (partition values) by ``rows``: one commit
        that changes no data, conflicting with a concurrent removal there."""

    def marks_in(self, path: str, prefix: str) -> dict[str, int]:
        """The row marks of a table with ``scope``, ``stream`` and ``segment_id`` columns (see
        ``sql_writes.SINK_MARK_SCOPE``) whose id starts with ``prefix``."""

    def merge_marked(self, path: str, rows: DataFrame | None, marks: Mapping[str, int],
                     expected: Mapping[str, int | None]) -> None:
        """Append ``rows`` and set row ``marks`` in one commit, a compare-and-set of ``expected``."""

    def delete_matching(self, path: str, source: DataFrame, on: list[str]) -> int:
        """Delete the rows equal on ``on`` to a row of ``source``; the rows deleted."""

    def delete_partitions(self, path: str, column: str, values: Sequence) -> None:
        """Delete every row of these partitions (int or str values): one DELETE on partition
        values, no file read."""

    def truncate(self, path: str, column: str, below: Mapping[int, int | None]) -> CommitMetrics:
        """Delete an events table's rows below each partition's offset (None: all its rows)."""

    # storage
    def vacuum(self, path: str, retention_hours: float | None) -> None:
        """VACUUM the table."""

    def remove_tables(self, paths: Sequence[str], folder: str | None = None) -> bool:
        """Remove these tables (their folder where a file system is at hand; else their rows)."""

    def delete_files(self, table_path: str, paths: list[str]) -> int:
        """Delete files written and never committed; how many were deleted."""


_CHOSEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # session -> {variable's value: kind}
# the values of ``PRAVEGA_SPARK_BACKEND`` (``connect``: the public-API backend's former name)
_KINDS = {"": "", "classic": "classic", "sql": "sql", "connect": "sql"}


def backend_kind(spark: SparkSession) -> tuple[str, str]:
    """Which backend serves ``spark`` (``"classic"`` or ``"sql"``) and why, by capability:

    - ``classic`` only where OSS Delta's classes can be driven: the session has a JVM handle, the
      classes the classic backend calls load there, and its Scala is the one ``_delta`` builds
      for (``jvm.classic_unavailable``); never on Databricks Runtime
      (``DATABRICKS_RUNTIME_VERSION`` set), whose Delta is its own;
    - ``sql`` (public SQL and DataFrame calls only) everywhere else: Spark Connect sessions
      (Databricks standard and serverless compute), and JVM sessions without OSS Delta.

    ``PRAVEGA_SPARK_BACKEND`` (``classic`` or ``sql``) chooses instead, for tests and for users
    who want to; ``classic`` where it cannot work is refused.

    Raises:
        InvalidConfigError: the variable has another value, or says ``classic`` where the classic
            backend cannot serve the session (the reason named).
    """
    raw = os.environ.get(BACKEND_ENV, "").strip().lower()
    if raw not in _KINDS:
        raise InvalidConfigError(f"{BACKEND_ENV} must be 'classic' or 'sql', got {raw!r}")
    forced = _KINDS[raw]
    if forced == "sql":
        return "sql", f"{BACKEND_ENV}={raw}"
    if os.environ.get(DATABRICKS_ENV):
        why = (f"Databricks Runtime {os.environ[DATABRICKS_ENV]} ships its own Delta, not OSS Delta's classes "
               "the classic backend drives")
    elif is_connect_session(spark):
        why = "the session is a Spark Connect session (no JVM handle)"
    else:
        why = jvm.classic_unavailable(spark)
    if why is None:
        return "classic", f"OSS Delta (Scala {jvm.SCALA_BINARY}) loads in the session's JVM"
    if forced == "classic":
        raise InvalidConfigError(f"{BACKEND_ENV}=classic, but {why}: unset it")
    return "sql", why


def backend_for(spark: SparkSession) -> DeltaBackend:
    """The backend serving ``spark`` (see ``backend_kind``), chosen once per session and per
    value of ``PRAVEGA_SPARK_BACKEND``; the public-API backend's choice is logged at INFO with
    its reason.

    Only the choice is kept per session, never the backend: a backend holds its session, and a
    value holding its key would keep every session ever served (each writer's own session, with
    its session state) alive in the driver for good.
    """
    key = os.environ.get(BACKEND_ENV, "").strip().lower()
    try:
        chosen = _CHOSEN.setdefault(spark, {})
    except TypeError:  # a session that cannot be weakly referenced: not cached
        chosen = {}
    if key not in chosen:
        kind, why = backend_kind(spark)
        if kind != "classic":
            log.info("pravega_spark uses its public-API Delta backend (SQL only): %s", why)
        chosen[key] = kind
    return ClassicBackend(spark) if chosen[key] == "classic" else SqlBackend(spark)
