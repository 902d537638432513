"""``TableTransaction``: one fenced transaction on one table, whichever backend runs it.

The verbs say what they fence and what they read:

- **fence**: ``fence_partitions`` (a concurrent add in these partitions fails the commit),
  ``expect_tails`` (the commit fails unless these partitions still end where given),
  ``expect_max`` (read each partition's largest value of a column; the commit fails if a larger
  one appears), ``read_partition``/``read_whole_table`` (rows read: a concurrent change fails it);
- **read**: ``read_version``, ``table_id``, ``summarize``, ``rows``, ``lookup``, ``frame``,
  ``all_files``, ``app_version(s)``;
- **write and commit**: ``write_rows``, ``removals``, ``set_app_version``, ``append_frame``,
  ``commit``, ``empty_commit``; at the tails: ``insert_frame``, ``ends_of_insert``;
- **files placed by hand** (the classic backend's: transactions, large events, compaction):
  ``files_in``, ``files_where``, ``read_files_in``, ``partition_files_since``, ``unfenced_files``,
  ``track_files``, ``read_files``, ``write``, ``record_metrics``, ``commit_new_table``.

``transaction.DeltaTransaction`` (classic) and ``sql.SqlTransaction`` (public SQL) both
implement every verb. A verb a backend has no use for raises ``NotImplementedError`` (the public
API's: the file verbs, which callers skip where ``places_files`` is False; classic: the insert at
the tails, which its appends do by placing files). ``tests/unit`` checks both against this list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from .files import AppVersion, PartitionSummary


class TableTransaction(Protocol):
    """One fenced transaction on the table at ``path`` (see the module docstring)."""

    path: str
    committed_version: int | None
    """The version of this transaction's commit (None before it, or where finding it costs a query)."""
    unplaced_names: list[str]
    """The names that the files of its last ``commit`` had before it named them under their
    partition directories (empty where files are never written before their place is known)."""

    # ---- fence --------------------------------------------------------------------------------
    def fence_partitions(self, column: str, values: list[int]) -> None:
        """This transaction depends on these (integer) partitions: a concurrent add there fails it."""

    def expect_tails(self, column: str, tails: Mapping[int, int]) -> None:
        """The commit holds only while each partition still ends at its given tail."""

    def expect_max(self, column: str, values: Sequence[int], stat: str) -> dict[int, int]:
        """The largest ``stat`` in each partition now (0: empty); a larger one appearing before
        the commit fails it."""

    def read_partition(self, values: Mapping[str, str]) -> list:
        """One partition's rows or files (string values of its columns), read: a concurrent
        change to them fails the commit."""

    def read_whole_table(self) -> list:
        """The whole table, read (a small table's compare-and-set)."""

    # ---- read ---------------------------------------------------------------------------------
    @property
    def read_version(self) -> int:
        """The version this transaction reads."""

    @property
    def table_id(self) -> str:
        """The table's id (a table created again at the same path has another)."""

    def summarize(self, column: str, values: list[int], end_column: str, stat: str) -> dict[int, PartitionSummary]:
        """Per partition: its end and the extrema of ``stat`` at this transaction's version."""

    def all_files(self) -> list | None:
        """The version's files, when listed without a job; else None."""

    def rows(self, files: Sequence) -> list[dict]:
        """The rows of what ``read_partition``/``read_whole_table`` returned."""

    def lookup(self, column: str, value: int, stat: str, wanted: Sequence[int]) -> list[dict]:
        """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted``."""

    def frame(self) -> DataFrame:
        """The table as a DataFrame (no read declared)."""

    def app_version(self, app_id: str) -> int:
        """The largest version recorded for ``app_id`` (-1: none)."""

    def app_versions(self, prefix: str) -> dict[str, tuple[int, int | None]]:
        """Every application id under ``prefix``: its version and when it was recorded."""

    # ---- write and commit ---------------------------------------------------------------------
    def write_rows(self, rows: list[tuple], schema: StructType, partition_by: tuple[str, ...] = (),
                   stats_columns: tuple[str, ...] = (), folder: str | None = None) -> list:
        """``rows`` made ready to commit (files written, or rows held for the commit's statement)."""

    def removals(self, files: Sequence, data_change: bool = True) -> list:
        """What removes ``files`` (read before) in the commit."""

    def set_app_version(self, app_id: str, number: int) -> AppVersion:
        """An application version to record in the commit."""

    def append_frame(self, df: DataFrame, partition_by: tuple[str, ...]) -> int | None:
        """Commit ``df``'s rows under the fence; the version (None where it would cost a query)."""

    def commit(self, adds: Sequence | None, partition_by: tuple[str, ...] = (), extra: Sequence | None = None,
               delete_predicate: str | None = None) -> int | None:
        """Commit ``adds`` and ``extra`` (removals, application versions) under the fence."""

    def empty_commit(self) -> int:
        """A commit that changes nothing (a new version); its version."""

    def insert_frame(self, source: DataFrame, app: AppVersion | None = None) -> int:
        """Insert ``source`` at the tails expected, in one statement: the rows inserted."""

    def ends_of_insert(self) -> dict[int, int]:
        """After ``insert_frame``: each partition's end of what it inserted."""

    # ---- files placed by hand -------------------------------------------------------------------
    def files_in(self, column: str, values: list[int]) -> list:
        """The version's files in these partitions (not declared read)."""

    def files_where(self, predicate: str | None) -> list:
        """The version's files matching a partition predicate (not declared read)."""

    def read_files_in(self, column: str, values: list[int]) -> list:
        """The version's files in these partitions, declared read."""

    def partition_files_since(self, column: str, values: list[int], after_version: int,
                              limit: int | None = None) -> tuple[list, bool] | None:
        """Files added to these partitions after ``after_version``."""

    def unfenced_files(self) -> list:
        """All the version's files, not declared read."""

    def track_files(self, files: Sequence) -> None:
        """Declare ``files`` read: a concurrent removal of one fails the commit."""

    def read_files(self, files: Sequence) -> DataFrame:
        """The rows of ``files`` as a DataFrame."""

    def write(self, df: DataFrame, partition_by: tuple[str, ...]) -> list:
        """Write ``df`` as new files (not committed yet)."""

    def record_metrics(self, metrics: dict[str, int]) -> None:
        """Operation metrics the commit records."""

    def commit_new_table(self, schema: StructType, partition_by: tuple[str, ...], properties: dict[str, str],
                         adds: list) -> int:
        """Create the table with ``adds`` as its first commit."""


VERBS = tuple(sorted(name for name in vars(TableTransaction) if not name.startswith("_") and name != "path"))
