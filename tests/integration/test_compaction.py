"""Compaction: runs of small consecutive files rewritten with every absolute offset unchanged."""

from __future__ import annotations

import json

import pyspark.sql.functions as F
import pytest

from pravega_spark.store.compaction import FileExtent, plan_runs
from tests.invariants import check_key_order, check_stream_consistent


def _f(path, sid, base, end, size=10):
    return FileExtent(path, sid, base, end, size)


def test_runs_are_consecutive_small_files_of_one_segment_up_to_the_target():
    files = [_f("a", 1, 0, 10), _f("b", 1, 10, 30), _f("m", 1, 30, 30),  # a marker: skipped, no break
             _f("c", 1, 30, 40), _f("big", 1, 40, 90, size=600), _f("d", 1, 90, 95), _f("e", 1, 95, 99),
             _f("x", 2, 0, 5), _f("y", 2, 7, 9),                            # not consecutive: no run
             _f("s1", 3, 0, 20), _f("s2", 3, 0, 20)]                        # one task's split extent
    runs = plan_runs(files, target_size=1000)
    assert [[f.path for f in run] for run in runs] == [["a", "b", "c"], ["d", "e"], ["s1", "s2"]]
    assert [[f.path for f in run] for run in plan_runs(files, target_size=25)] == [["a", "b"], ["d", "e"], ["s1", "s2"]]


@pytest.mark.slow
@pytest.mark.connect
@pytest.mark.both_backends
def test_compaction_keeps_every_offset_and_event(spark, root, manager, stream2, delta_backend):
    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    cuts = []
    for b in range(12):
        rows = [(f"key-{i % 5}", f"w:{b:04d}:{i:06d}") for i in range(20)]
        cuts.append(writer.write_events(spark.createDataFrame(rows, "routing_key string, event string")).tail_stream_cut)
    manager.truncate_stream("iot", "sensors", cuts[2])
    manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    writer.write_events(spark.createDataFrame([("key-1", "after")], "routing_key string, event string"))

    def read(start="earliest", end="latest"):
        return sorted((r.segment_id, r.offset, bytes(r.event)) for r in manager.read_events(
            "iot", "sensors", start, end).collect())

    before, between = read(), read(cuts[4], cuts[9])
    path = f"{root}/iot/sensors"
    files_before = spark.read.format("delta").load(path).select(F.input_file_name()).distinct().count()
    result = manager.compact("iot", "sensors", target_file_size=1 << 20)
    assert result.runs >= 2 and result.files_removed > result.files_added
    # the public-API backend does not look its commit's version up (a request): its latest
    assert (result.version is not None) == (delta_backend == "classic")
    version = result.version if result.version is not None else int(
        spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"])
    with open(f"{path}/_delta_log/{version:020d}.json") as f:
        actions = [json.loads(line) for line in f if line.strip()]
    changes = [a.get("add", a.get("remove")) for a in actions if "add" in a or "remove" in a]
    assert changes and all(c["dataChange"] is False for c in changes)  # invisible to streaming reads
    assert spark.read.format("delta").load(path).select(F.input_file_name()).distinct().count() < files_before
    assert read() == before and read(cuts[4], cuts[9]) == between  # cuts inside runs still work
    assert manager.compact("iot", "sensors", target_file_size=1 << 20).runs == 0  # nothing left to do
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    check_key_order(events)


def test_the_readmes_plain_sql_reads_what_read_events_reads(spark, root, manager, stream2):
    """The README's SQL over the events table gives read_events' offsets and events."""
    import re
    from pathlib import Path

    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    for b in range(3):
        writer.write_events(spark.createDataFrame([(f"key-{i % 5}", f"{b}:{i}") for i in range(30)],
                                                  "routing_key string, event string"))
    txn = manager.create_transactional_writer("iot", "sensors", writer_id="tx").begin_txn()
    txn.write_event(b"staged, invisible", routing_key="key-1")
    txn.flush()  # its manifest row is in the table too, and must stay invisible
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    sql = re.findall(r"```sql\n(.*?)```", readme, re.S)[0]
    sql = sql.replace("/lake/pravega/iot/sensors", f"{root}/iot/sensors")
    plain = [(r.segment_id, r.offset, r.routing_key, bytes(r.event)) for r in spark.sql(sql).collect()]
    ours = [(r.segment_id, r.offset, r.routing_key, bytes(r.event)) for r in manager.read_events("iot", "sensors")
            .orderBy("segment_id", "offset").collect()]
    assert plain == ours and len(ours) == 90
