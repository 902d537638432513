"""The local file system's log store (``pravegaspark.delta.LocalListingLogStore``) lists what
Delta's own local store lists, in the same order, reading the status of the files it returns only.

The sessions the library builds use it for ``file:`` paths; every local test then commits and
reads through it. Here its listing is compared with Delta's (``io.delta.storage.HDFSLogStore``, Delta's default for ``file:``)
on a log folder holding every kind of name Delta's folder can hold."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

from pravega_spark import _session

pytestmark = pytest.mark.skipif(not _session.log_store_jar(), reason="the log store's jar is missing")

NAMES = [
    *(f"{v:020d}.json" for v in range(0, 23)),
    *(f".{v:020d}.json.crc" for v in range(0, 23)),  # Hadoop's hidden checksum files
    *(f"{v:020d}.crc" for v in range(0, 23)),  # Delta's checksum files
    "00000000000000000010.checkpoint.parquet", ".00000000000000000010.checkpoint.parquet.crc",
    "00000000000000000020.checkpoint.0000000001.0000000002.parquet",
    "00000000000000000020.checkpoint.0000000002.0000000002.parquet",
    "_last_checkpoint", "._last_checkpoint.crc", ".commit.lock", "00000000000000000023.json.tmp",
]


def listing(spark, store_class: str, start) -> list[str]:
    java_class = spark.sparkContext._jvm
    for part in store_class.split("."):
        java_class = getattr(java_class, part)
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    store = java_class(conf)
    found = store.listFrom(start, conf)
    names = []
    while found.hasNext():
        names.append(found.next().getPath().getName())
    return names


@pytest.fixture
def log_folder(tmp_path):
    folder = tmp_path / "_delta_log"
    folder.mkdir()
    for name in NAMES:
        (folder / name).write_text(name)
    (folder / "_commits").mkdir()  # a folder among the files (Delta's coordinated commits)
    return folder


def test_the_library_session_lists_local_logs_with_it(spark):
    assert spark.conf.get("spark.delta.logStore.file.impl") == _session.LOCAL_LOG_STORE_CLASS


@pytest.mark.parametrize("start", [0, 9, 10, 11, 20, 22, 23, 99])
def test_it_lists_what_deltas_local_store_lists_in_the_same_order(spark, log_folder, start):
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(f"file:{log_folder}/{start:020d}.json")
    ours = listing(spark, _session.LOCAL_LOG_STORE_CLASS, path)
    deltas = listing(spark, "io.delta.storage.HDFSLogStore", path)
    assert ours == deltas
    assert ours == sorted(n for n in [*NAMES, "_commits"] if n >= f"{start:020d}.json" and not n.startswith("."))


def test_a_missing_folder_is_file_not_found_as_in_delta(spark, tmp_path):
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(f"file:{tmp_path}/none/_delta_log/{0:020d}.json")
    for store_class in (_session.LOCAL_LOG_STORE_CLASS, "io.delta.storage.HDFSLogStore"):
        with pytest.raises(Py4JJavaError, match="java.io.FileNotFoundException"):
            listing(spark, store_class, path)
