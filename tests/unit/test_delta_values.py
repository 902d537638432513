"""The Delta seam's plain values: files as the log records them, removals, application versions,
partition summaries and commit times (no Spark session)."""

from __future__ import annotations

import json

import pytest

from pravega_spark import _delta
from pravega_spark._delta import AppVersion, FileEntry, PartitionSummary, Removal

LOG_ADD = {"path": "segment_id=3/part-00000-x.c000.snappy.parquet",
           "partitionValues": {"segment_id": "3", "base_offset": "-7", "end_offset": "-7"},
           "size": 1234, "modificationTime": 1795686024578, "dataChange": True,
           "stats": json.dumps({"numRecords": 5, "minValues": {"rel_offset": 0, "record_type": 0},
                                "maxValues": {"rel_next_offset": 90, "record_type": 0}, "nullCount": {}})}


def test_a_file_reads_its_log_entry_and_writes_the_same_entry_back():
    entry = FileEntry.from_log(LOG_ADD)
    assert (entry.path, entry.size, entry.modification_time, entry.data_change) == (
        LOG_ADD["path"], 1234, 1795686024578, True)
    assert entry.partition("segment_id") == "3" and entry.int_partition("base_offset") == -7
    assert entry.partition("absent") is None
    assert (entry.num_records, entry.min_values["rel_offset"], entry.max_values["rel_next_offset"]) == (5, 0, 90)
    back = entry.to_log()
    assert {**back, "stats": json.loads(back["stats"])} == {**LOG_ADD, "stats": json.loads(LOG_ADD["stats"])}
    assert FileEntry.from_json(entry.to_json()) == entry


def test_a_file_without_statistics_has_no_records_and_empty_extrema():
    entry = FileEntry.from_log({"path": "a.parquet", "partitionValues": {}, "size": 1, "modificationTime": 2})
    assert (entry.num_records, entry.min_values, entry.max_values, entry.stats) == (0, {}, {}, {})
    assert "stats" not in entry.to_log()


def test_placing_a_file_sets_partition_values_and_keeps_the_original():
    entry = FileEntry.from_log(LOG_ADD)
    placed = entry.placed({"base_offset": 100, "end_offset": 190}, data_change=False, modification_time=7)
    assert placed.partition_values == {"segment_id": "3", "base_offset": "100", "end_offset": "190"}
    assert (placed.data_change, placed.modification_time, placed.path) == (False, 7, entry.path)
    assert entry.partition("base_offset") == "-7"  # frozen: the original is unchanged
    with pytest.raises(AttributeError):
        entry.size = 1  # type: ignore[misc]
    assert hash(placed) == hash(entry) and placed != entry  # same file, other placement


def test_removals_and_app_versions_are_log_entries():
    entry = FileEntry.from_log(LOG_ADD)
    [removal] = _delta.removals([entry], data_change=False)
    body = removal.to_log()
    assert (body["path"], body["dataChange"], body["extendedFileMetadata"], body["size"]) == (
        entry.path, False, True, 1234)
    assert body["partitionValues"] == entry.partition_values and json.loads(body["stats"]) == entry.stats
    assert Removal(entry).data_change is True
    assert AppVersion("txn-1", 3, 99).to_log() == {"appId": "txn-1", "version": 3, "lastUpdated": 99}


def test_summaries_take_the_largest_end_and_the_extrema_per_partition():
    def file(segment, end, low, high, records=1):
        return FileEntry("f", {"segment_id": str(segment), "end_offset": str(end)}, 1, 0,
                         stats={"numRecords": records, "minValues": {"record_type": low},
                                "maxValues": {"record_type": high}})

    files = [file(0, 10, 0, 0), file(0, 30, -2, 0), file(1, 5, 1, 1), file(2, 9, 0, 0)]
    assert _delta.summarize(files, "segment_id", [0, 1, 5], "end_offset", "record_type") == {
        0: PartitionSummary(30, -2, 0), 1: PartitionSummary(5, 1, 1)}
    no_stats = FileEntry("g", {"segment_id": "0", "end_offset": "1"}, 1, 0, stats={"numRecords": 3})
    assert _delta.summarize([no_stats], "segment_id", [0], "end_offset", "record_type") is None


def test_commit_times_follow_offsets_within_each_segment_and_the_store_clock():
    previous = _delta.set_clock(lambda: 1000.0)
    try:
        times = _delta.commit_times([(1, 50), (0, 0), (1, 0), (1, 20)])
        assert _delta.clock() == 1000.0
    finally:
        _delta.set_clock(previous)
    assert times == [1_000_002, 1_000_000, 1_000_000, 1_000_001]


def test_both_backends_implement_every_operation_of_the_seam_with_its_signature():
    import inspect

    operations = [n for n, v in vars(_delta.DeltaBackend).items() if callable(v) and not n.startswith("_")]
    assert {"qualify", "table_state", "read_rows", "summarize", "replace_rows", "transaction",
            "file_changes", "vacuum"} <= set(operations)
    for backend in (_delta.ClassicBackend, _delta.SqlBackend):
        for name in operations:
            assert inspect.signature(getattr(backend, name)) == inspect.signature(
                getattr(_delta.DeltaBackend, name)), (backend, name)


def test_the_commit_lock_excludes_other_processes_on_the_local_file_system_only(tmp_path):
    import subprocess
    import sys
    import time

    table = f"file:{tmp_path / 'my table'}"
    assert _delta.local_dir(table) == str(tmp_path / "my table")
    assert _delta.local_dir("s3a://bucket/t") is None and _delta.local_dir("abfss://c@a.dfs.core.windows.net/t") is None
    with _delta.commit_lock("s3a://bucket/t"):  # nothing to lock: the object store's log store decides
        pass
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pravega_spark import _delta\n"
        f"with _delta.commit_lock({table!r}):\n"
        "    print('held', flush=True); time.sleep(1.0)\n")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    with _delta.commit_lock(table):
        waited = time.monotonic() - started
    holder.wait(10)
    assert waited >= 0.5, waited  # the other process held it for a second
    assert (tmp_path / "my table" / "_delta_log" / ".pravega_spark.commit.lock").exists()
