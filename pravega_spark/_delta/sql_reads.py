"""The public-API backend's summaries: per-partition extrema, versioned lookups and the
application versions a table's log records (one query each)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from .files import PartitionSummary
from .sql_requests import (
    quiet_client_logs,
    read,
    row_dict,
)


def summarize(spark: SparkSession, path: str, column: str, values: Sequence[int], end_column: str, stat: str,
              at: int | None = None) -> dict[int, PartitionSummary]:
    """Per partition value: the largest ``end_column`` and the extrema of ``stat`` (one aggregate
    query over the partitions' rows: Connect reads no log)."""
    ids = sorted({int(v) for v in values})
    if not ids:
        return {}
    df = read(spark, path, at).where(F.col(column).isin(ids))
    rows = df.groupBy(column).agg(F.max(end_column).alias("end"), F.min(stat).alias("low"),
                                  F.max(stat).alias("high")).collect()
    return {int(r[column]): PartitionSummary(int(r["end"]), r["low"], r["high"]) for r in rows}

def lookup(spark: SparkSession, path: str, column: str, value: int, stat: str, wanted: Sequence[int],
           at: int | None = None) -> list[dict]:
    """The rows of partition ``column = value`` whose ``stat`` is one of ``wanted`` (one query)."""
    df = read(spark, path, at)
    names = df.columns
    rows = df.where((F.col(column) == int(value)) & F.col(stat).isin([int(w) for w in wanted])).collect()
    return [row_dict(r, names) for r in rows]

def app_versions(spark: SparkSession, path: str, prefix: str) -> dict[str, tuple[int, int | None]]:
    """Application versions (Delta's ``SetTransaction``) recorded in the table's log for ids
    starting with ``prefix``: the largest version of each and its last update (ms). One query
    over the log's JSON commits and checkpoints (the log must be readable as files by the
    server: a path-based table, as a store's tables are)."""
    quiet_client_logs()
    log_dir = path.rstrip("/") + "/_delta_log"
    found: dict[str, tuple[int, int | None]] = {}
    for reader in (lambda: spark.read.json(log_dir + "/*.json"),
                   lambda: spark.read.parquet(log_dir + "/*.checkpoint*.parquet")):
        try:
            df = reader()
            if "txn" not in df.columns:
                continue
            rows = (df.where(F.col("txn").isNotNull() & F.col("txn.appId").startswith(prefix))
                    .groupBy(F.col("txn.appId").alias("app"))
                    .agg(F.max("txn.version").alias("version"), F.max("txn.lastUpdated").alias("updated")).collect())
        except Exception as exc:  # noqa: BLE001 - no checkpoint yet (or no commit) matches the glob
            if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
                continue
            raise
        for r in rows:
            seen = found.get(r["app"])
            if seen is None or int(r["version"]) > seen[0]:
                found[r["app"]] = (int(r["version"]), None if r["updated"] is None else int(r["updated"]))
    return found
