"""A table's log written one folder up, its data left where it is (format 3's upgrade, issue #68).

The Delta protocol lets an add action's path be any path relative to the table's root, so the
table at ``<stream>/events`` becomes the table at ``<stream>`` by copying its log with ``events/``
before every relative data path: no byte of data moves, and the versions, the table id, the
application versions and the checksums' file lists (the job-free reads) stay as they were. Only
what the latest snapshot needs is written: the latest checkpoint (every part), the commits and
checksums from it on, and ``_last_checkpoint``. Everything goes through the table's Hadoop file
system (local, S3, ABFS), the checkpoint rewritten with pyarrow.
"""

from __future__ import annotations

import io
import json
import re

from pyspark.sql import SparkSession

from .jvm import hadoop_path, java_class
from .storage import remove_path, write_file

LOG = "_delta_log"
_VERSIONED = re.compile(r"^(\d{20})\.")
_SCHEME = re.compile(r"^[a-zA-Z][\w+.-]*:")


def prefixed(path: str, prefix: str) -> str:
    """A log's data path seen from ``prefix``'s parent: relative paths get ``prefix/`` before them
    (absolute ones, and paths with a scheme, name their file wherever the table is)."""
    return path if (path.startswith("/") or _SCHEME.match(path)) else f"{prefix}/{path}"


def relocated_action(action: dict, prefix: str) -> dict:
    """A commit's action with its data path, if any, prefixed."""
    for kind in ("add", "remove", "cdc"):
        if kind in action and action[kind].get("path"):
            action[kind] = {**action[kind], "path": prefixed(action[kind]["path"], prefix)}
    return action


def relocated_checksum(checksum: dict, prefix: str) -> dict:
    """A checksum file's content with the paths of its file list prefixed."""
    files = checksum.get("allFiles")
    if files:
        checksum = {**checksum, "allFiles": [{**f, "path": prefixed(f["path"], prefix)} for f in files]}
    return checksum


def relocated_checkpoint(data: bytes, prefix: str) -> bytes:
    """A checkpoint part (Parquet) with every relative ``add.path`` and ``remove.path`` prefixed,
    its schema unchanged."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(pa.BufferReader(data))
    for kind in ("add", "remove"):
        if kind not in table.column_names:
            continue
        column = table.column(kind).combine_chunks()
        names = [column.type.field(i).name for i in range(column.type.num_fields)]
        fields = [column.field(i) for i in range(column.type.num_fields)]
        paths = fields[names.index("path")]
        relative = pc.invert(pc.or_(pc.starts_with(paths, "/"), pc.match_substring_regex(paths, _SCHEME.pattern)))
        fields[names.index("path")] = pc.if_else(pc.and_(pc.is_valid(paths), relative),
                                                 pc.binary_join_element_wise(f"{prefix}/", paths, ""), paths)
        rebuilt = pa.StructArray.from_arrays(fields, fields=list(column.type), mask=column.is_null())
        table = table.set_column(table.column_names.index(kind), table.schema.field(kind), rebuilt)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _read(spark: SparkSession, path: str) -> bytes:
    jvm = spark.sparkContext._jvm
    full = hadoop_path(jvm, path)
    stream = full.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).open(full)
    try:
        return bytes(java_class(jvm, "org.apache.commons.io.IOUtils").toByteArray(stream))
    finally:
        stream.close()


def log_names(spark: SparkSession, table: str) -> list[str]:
    """The names of the files in the table's log folder ([] if it has none)."""
    jvm = spark.sparkContext._jvm
    folder = hadoop_path(jvm, f"{table}/{LOG}")
    fs = folder.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(folder):
        return []
    return sorted(str(s.getPath().getName()) for s in fs.listStatus(folder) if s.isFile())


def relocate_log(spark: SparkSession, target: str, prefix: str) -> dict[str, int]:
    """Write ``target``'s log from the log of ``target/prefix`` (whose data files stay where
    they are), replacing any log ``target`` has (a killed earlier attempt's). Returns what it
    wrote: ``commits``, ``checksums``, ``checkpoint_parts`` and the latest ``version``."""
    source = f"{target}/{prefix}"
    names = log_names(spark, source)
    last = json.loads(_read(spark, f"{source}/{LOG}/_last_checkpoint")) if "_last_checkpoint" in names else None
    since = int(last["version"]) if last else -1
    remove_path(spark, f"{target}/{LOG}")
    counts = {"commits": 0, "checksums": 0, "checkpoint_parts": 0, "version": -1}
    for name in names:
        found = _VERSIONED.match(name)
        if found is None:
            continue
        version = int(found.group(1))
        if ".checkpoint." in name and version == since:
            data = relocated_checkpoint(_read(spark, f"{source}/{LOG}/{name}"), prefix)
            counts["checkpoint_parts"] += 1
        elif name.endswith(".json") and version > since:
            lines = [json.dumps(relocated_action(json.loads(line), prefix))
                     for line in _read(spark, f"{source}/{LOG}/{name}").decode().splitlines() if line]
            data = ("\n".join(lines) + "\n").encode()
            counts["commits"] += 1
            counts["version"] = max(counts["version"], version)
        elif name.endswith(".crc") and version >= since:
            data = json.dumps(relocated_checksum(json.loads(_read(spark, f"{source}/{LOG}/{name}")), prefix)).encode()
            counts["checksums"] += 1
        else:
            continue
        write_file(spark, target, f"{LOG}/{name}", memoryview(data))
    if last:  # last: a reader finds the checkpoint through it
        write_file(spark, target, f"{LOG}/_last_checkpoint", memoryview(json.dumps(last).encode()))
    counts["version"] = max(counts["version"], since)
    return counts
