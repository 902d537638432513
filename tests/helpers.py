"""Test helpers: snapshots of every Delta table under a store, event payload helpers."""

from __future__ import annotations

import os

from delta.tables import DeltaTable


def table_versions(spark, root: str) -> dict[str, int]:
    """Latest Delta version of every table under ``root`` (to assert that nothing changed)."""
    out = {}
    for dirpath, dirnames, _ in os.walk(root):
        if "_delta_log" in dirnames:
            out[os.path.relpath(dirpath, root)] = int(
                DeltaTable.forPath(spark, dirpath).history(1).select("version").first()[0])
            dirnames.clear()
    return out


def events_rows(spark, root: str, scope: str, stream: str):
    """Every raw row of a stream's events table (control records included)."""
    return spark.read.format("delta").load(f"{root}/{scope}/{stream}/events").collect()
