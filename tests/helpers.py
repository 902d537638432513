"""Test helpers: snapshots of every Delta table under a store, event payload helpers."""

from __future__ import annotations

import os


def table_versions(spark, root: str) -> dict[str, int]:
    """Latest Delta version of every table under ``root`` (to assert that nothing changed). A
    table another process is creating (its ``_delta_log`` folder made, its first commit not yet
    written: a commit file appears whole, renamed into place) is left out."""
    out = {}
    for dirpath, dirnames, _ in os.walk(root):
        if "_delta_log" in dirnames:
            dirnames.clear()
            if not any(name.endswith(".json") for name in os.listdir(os.path.join(dirpath, "_delta_log"))):
                continue
            quoted = dirpath.replace("`", "``")
            out[os.path.relpath(dirpath, root)] = int(
                spark.sql(f"DESCRIBE HISTORY delta.`{quoted}` LIMIT 1").select("version").first()[0])
    return out


# The README's plain-SQL reading of the events table: absolute offsets from each file's base.
ABSOLUTE_COLUMNS = ["segment_id", "base_offset + rel_offset AS offset", "base_offset + rel_next_offset AS next_offset",
                    "record_type", "routing_key", "event", "writer_id", "write_time",
                    "base_offset + rel_event_offset AS event_offset", "base_offset", "end_offset"]


def absolute_events(spark, path: str):
    """A stream's events table with absolute offsets, read with plain Spark SQL expressions (not
    the library's own view, so that tests state the layout independently)."""
    return spark.read.format("delta").load(path).selectExpr(*ABSOLUTE_COLUMNS)


def events_rows(spark, root: str, scope: str, stream: str):
    """Every row of a stream's events table (control records included), absolute offsets."""
    return absolute_events(spark, f"{root}/{scope}/{stream}").collect()
