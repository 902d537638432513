"""Other Delta engines read a store's events tables as the library does.

A store written, scaled, truncated, given a committed transaction and a large event, and
compacted is read with Spark SQL, delta-rs (``deltalake``: its Arrow table and its DataFusion SQL)
and Polars (``pl.read_delta``, which takes partition values from the files' directories, not from
the log). In each, the README's plain-SQL offsets (``base_offset + rel_offset`` of the event rows;
for a large event's chunks ``base_offset + rel_event_offset`` is the event's start) must equal
``read_events``' offsets. Nothing is downloaded at run time: DuckDB's Delta reader would fetch an
extension, so it is not here.
"""

from __future__ import annotations

import os
import re
import textwrap
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import pravega_spark._delta.transaction as delta_transaction
from tests.conftest import TEST_ROOT
from tests.invariants import files_outside_their_partition

pytestmark = pytest.mark.skipif(bool(TEST_ROOT), reason="the other engines read the local store")

# The README's expression ("The events table in plain SQL"), and the large events' variant.
EVENTS_SQL = ("SELECT segment_id, base_offset + rel_offset AS offset, event FROM events "
              "WHERE segment_id >= 0 AND record_type = 0")
LARGE_SQL = ("SELECT DISTINCT segment_id, base_offset + rel_event_offset AS offset FROM events "
             "WHERE segment_id >= 0 AND record_type IN (-3, -4)")


def _write_everything(spark, manager) -> None:
    """Appends over two epochs (a scale between), a truncation, a committed transaction, a large
    event of three chunks, and a compaction."""
    writer = manager.create_event_writer("iot", "sensors", writer_id="w")
    schema = "routing_key string, event string"
    cuts = [writer.write_events(spark.createDataFrame([(f"k{i % 7}", f"a{b}:{i}") for i in range(60)], schema))
            .tail_stream_cut for b in range(2)]
    manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    writer.write_events(spark.createDataFrame([(f"k{i % 7}", f"b:{i}") for i in range(60)], schema))
    manager.truncate_stream("iot", "sensors", cuts[0])
    txn = manager.create_transactional_writer("iot", "sensors", writer_id="t").begin_txn(timedelta(seconds=60))
    txn.write_events(spark.createDataFrame([(f"k{i % 7}", f"t:{i}") for i in range(40)], schema))
    txn.commit()
    with writer.stream_event(routing_key="k3", chunk_size=1024) as event:
        event.write(bytes(range(256)) * 10)  # 2,560 bytes: three chunks
        event.commit()
    assert manager.compact("iot", "sensors", target_file_size=1 << 20).runs >= 1


def _expected(manager) -> tuple[set, set]:
    """``read_events``' (segment, offset, event) of the plain events, and (segment, offset) of the
    large ones."""
    rows = manager.read_events("iot", "sensors").collect()
    plain = {(r.segment_id, r.offset, bytes(r.event)) for r in rows if len(r.event) < 2560}
    large = {(r.segment_id, r.offset) for r in rows if len(r.event) == 2560}
    assert len(plain) == len(rows) - 1 and len(large) == 1
    return plain, large


def _polars(path: str) -> tuple[set, set]:
    import polars as pl

    events = pl.read_delta(path)
    ctx = pl.SQLContext(events=events)
    plain = {(s, o, bytes(e)) for s, o, e in ctx.execute(EVENTS_SQL, eager=True).iter_rows()}
    return plain, set(ctx.execute(LARGE_SQL, eager=True).iter_rows())


def _delta_rs(path: str) -> tuple[set, set]:
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(path)
    query = QueryBuilder().register("events", table)

    def rows(sql: str) -> list[dict]:  # DataFusion's result, an Arrow stream
        return pa.table(query.execute(sql).read_all()).to_pylist()

    plain = {(r["segment_id"], r["offset"], bytes(r["event"])) for r in rows(EVENTS_SQL)}
    large = {(r["segment_id"], r["offset"]) for r in rows(LARGE_SQL)}
    # the Arrow table of the whole snapshot, with the expression in Python
    arrow = [r for r in table.to_pyarrow_table().to_pylist() if r["segment_id"] >= 0 and r["record_type"] == 0]
    assert {(r["segment_id"], r["base_offset"] + r["rel_offset"], bytes(r["event"])) for r in arrow} == plain
    return plain, large


def _spark_sql(spark, path: str) -> tuple[set, set]:
    spark.read.format("delta").load(path).createOrReplaceTempView("events")
    plain = {(r.segment_id, r.offset, bytes(r.event)) for r in spark.sql(EVENTS_SQL).collect()}
    return plain, {(r.segment_id, r.offset) for r in spark.sql(LARGE_SQL).collect()}


@pytest.mark.slow
@pytest.mark.both_backends
def test_other_engines_read_the_offsets_that_read_events_reads(spark, root, manager, stream2, delta_backend):
    _write_everything(spark, manager)
    expected = _expected(manager)
    path = os.path.join(root, "iot", "sensors")
    assert _spark_sql(spark, path) == expected
    assert _delta_rs(path) == expected
    assert _polars(path) == expected
    # the README's delta-rs and Polars example, as written (on this store)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "QueryBuilder" in b)
    namespace: dict = {}
    exec(compile(textwrap.dedent(example).replace("/lake/pravega/iot/sensors", path), "README.md", "exec"),
         namespace)  # noqa: S102
    offsets = {(s, o) for s, o, _ in expected[0]}
    assert {(r["segment_id"], r["offset"]) for r in pa.table(namespace["table"]).to_pylist()} == offsets
    assert {(s, o) for s, o, *_ in namespace["df"].iter_rows()} == offsets


@pytest.mark.slow
def test_a_store_written_before_its_files_were_named_by_their_place_is_read_and_compact_moves_them(
        spark, root, manager, stream2, monkeypatch):
    """Files left under their placeholder directories (as every classic store before this
    layout): the library reads them by the log's values; ``compact`` names them under their true
    directories, after which Polars and delta-rs read them right. (Polars before 2.2 took a file's
    partition from its directory, so the old layout misled it; 2.2 reads the log's values, and the
    test no longer depends on that.)"""
    with monkeypatch.context() as m:
        m.setattr(delta_transaction, "misplaced", lambda entry, columns: False)  # the old commit
        writer = manager.create_event_writer("iot", "sensors", writer_id="w")
        for b in range(3):
            writer.write_events(spark.createDataFrame([(f"k{i % 7}", f"a{b}:{i}") for i in range(60)],
                                                      "routing_key string, event string"))
    rows = manager.read_events("iot", "sensors").collect()
    expected = {(r.segment_id, r.offset, bytes(r.event)) for r in rows}
    path = os.path.join(root, "iot", "sensors")
    assert _spark_sql(spark, path)[0] == expected
    assert files_outside_their_partition(spark, path)
    result = manager.compact("iot", "sensors", target_file_size=1024)  # no run: files are only moved
    assert result.runs == 0 and result.files_moved >= 3, result
    assert {(r.segment_id, r.offset, bytes(r.event)) for r in manager.read_events("iot", "sensors").collect()} == expected
    assert _polars(path)[0] == expected and _delta_rs(path)[0] == expected
    assert not files_outside_their_partition(spark, path)
    assert manager.compact("iot", "sensors", target_file_size=1024).files_moved == 0
