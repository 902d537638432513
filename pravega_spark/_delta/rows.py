"""A small table's rows replaced in one commit: the compare-and-set both backends share.

The transaction reads the partition (or the whole table), ``change`` decides on the rows it read,
and the commit replaces the files read with one new file per partition. A concurrent change to
what was read makes the commit conflict; ``retrying`` runs it again on a fresh read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyspark.sql.types import StructType

from .retry import RetryPolicy, retrying

RowsChange = Callable[[list[dict]], "list[tuple] | None"]


def replace(txn, files: Sequence, rows: Sequence[tuple], schema: StructType,
            partition_by: tuple[str, ...] = ()) -> int:
    """Commit ``rows`` (one new file per partition) in place of ``files``; returns the version."""
    adds = txn.write_rows(list(rows), schema, partition_by) if rows else None
    return txn.commit(adds, partition_by, extra=txn.removals(files))


def replace_rows(open_transaction: Callable[[], object], schema: StructType, change: RowsChange, what: str,
                 partition: Mapping[str, str] | None = None, partition_by: tuple[str, ...] = (),
                 retry: RetryPolicy | None = None) -> bool:
    """Compare-and-set of a partition (its columns' string values; or a small table), retried
    on conflicts: True if ``change`` returned rows and they were committed."""
    partition_by = partition_by or tuple(partition or ())

    def attempt() -> bool:
        txn = open_transaction()
        files = txn.read_partition(partition) if partition else txn.read_whole_table()
        rows = change(txn.rows(files))
        if rows is None:
            return False
        replace(txn, files, rows, schema, partition_by)
        return True

    return retrying(attempt, what) if retry is None else retrying(attempt, what, retry)
