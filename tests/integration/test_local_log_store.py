"""The local file system's log store (``pravegaspark.delta.LocalListingLogStore``) lists what
Delta's own store for ``file:`` (``io.delta.storage.HDFSLogStore``) lists, in the same order, reading
the status of the files it returns only.

The sessions the library builds use it for ``file:`` paths; every local test then commits and
reads through it. Here its listing is compared with Delta's on a log folder holding every kind of
name Delta's folder can hold, from the starts Delta lists from (a version's prefix, a commit)."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

from pravega_spark import _session
from pravega_spark._delta import jvm

pytestmark = pytest.mark.skipif(not _session.log_store_jar(), reason="the log store's jar is missing")

DELTAS = "io.delta.storage.HDFSLogStore"
NAMES = [
    *(f"{v:020d}.json" for v in range(0, 23)),
    *(f".{v:020d}.json.crc" for v in range(0, 23)),  # Hadoop's hidden checksum files
    *(f"{v:020d}.crc" for v in range(0, 23)),  # Delta's checksum files
    "00000000000000000010.checkpoint.parquet", ".00000000000000000010.checkpoint.parquet.crc",
    "00000000000000000020.checkpoint.0000000001.0000000002.parquet",
    "00000000000000000020.checkpoint.0000000002.0000000002.parquet",
    "_last_checkpoint", "._last_checkpoint.crc", ".commit.lock", "00000000000000000023.json.tmp",
    "00000000000000000024.a:b",  # a colon: not a URI scheme
]


def java_class(spark, name: str):
    return jvm.java_class(spark.sparkContext._jvm, name)


def listing(spark, store_class: str, start: str) -> list[tuple]:
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    store = java_class(spark, store_class)(conf)
    found = store.listFrom(java_class(spark, "org.apache.hadoop.fs.Path")(start), conf)
    statuses = []
    while found.hasNext():
        status = found.next()
        statuses.append((status.getPath().toString(), status.getLen(), status.isDirectory(),
                         status.getModificationTime()))
    return statuses


@pytest.fixture
def log_folder(tmp_path):
    folder = tmp_path / "_delta_log"
    folder.mkdir()
    for name in NAMES:
        (folder / name).write_text(name)
    (folder / "_commits").mkdir()  # a folder among the files (Delta's coordinated commits)
    return folder


def test_delta_commits_and_lists_a_local_table_through_it(spark, tmp_path):
    assert spark.conf.get("spark.delta.logStore.file.impl") == _session.LOCAL_LOG_STORE_CLASS
    path = f"file:{tmp_path}/table"
    spark.range(3).write.format("delta").save(path)
    spark.range(2).write.format("delta").mode("append").save(path)
    assert spark.read.format("delta").load(path).count() == 5
    delta_log = java_class(spark, "org.apache.spark.sql.delta.DeltaLog").forTable(spark._jsparkSession, path)
    chosen = delta_log.store().getDelegate(java_class(spark, "org.apache.hadoop.fs.Path")(path))
    assert chosen.logStoreImpl().getClass().getName() == _session.LOCAL_LOG_STORE_CLASS


@pytest.mark.parametrize("start", [f"{v:020d}." for v in (0, 10, 20, 23, 24)]
                         + [f"{v:020d}.json" for v in (0, 9, 11, 22, 99)])
def test_it_lists_what_deltas_store_lists_in_the_same_order(spark, log_folder, start):
    ours = listing(spark, _session.LOCAL_LOG_STORE_CLASS, f"file:{log_folder}/{start}")
    assert ours == listing(spark, DELTAS, f"file:{log_folder}/{start}")  # paths, sizes, kinds, times
    assert [path.rsplit("/", 1)[1] for path, *_ in ours] == sorted(
        n for n in [*NAMES, "_commits"] if n >= start and not n.startswith("."))


def test_a_missing_folder_is_file_not_found_as_in_delta(spark, tmp_path):
    for store_class in (_session.LOCAL_LOG_STORE_CLASS, DELTAS):
        with pytest.raises(Py4JJavaError, match="java.io.FileNotFoundException"):
            listing(spark, store_class, f"file:{tmp_path}/none/_delta_log/{0:020d}.json")

