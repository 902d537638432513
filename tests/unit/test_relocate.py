"""The log rewrite of #68's upgrade (``_delta.relocate``), on its pure parts: which paths get the
prefix, and a checkpoint's ``add``/``remove`` columns rewritten with its schema and nulls kept."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from pravega_spark._delta.relocate import (
    prefixed,
    relocated_action,
    relocated_checkpoint,
    relocated_checksum,
)


def test_only_relative_paths_get_the_prefix():
    assert prefixed("segment_id=3/base_offset=0/end_offset=9/part-0.parquet", "events") == \
        "events/segment_id=3/base_offset=0/end_offset=9/part-0.parquet"
    assert prefixed("/data/elsewhere.parquet", "events") == "/data/elsewhere.parquet"
    assert prefixed("s3a://bucket/t/part-1.parquet", "events") == "s3a://bucket/t/part-1.parquet"
    assert prefixed("part-%3A1.parquet", "events") == "events/part-%3A1.parquet"  # escaped, still relative


def test_commit_actions_and_checksums_keep_everything_but_the_data_paths():
    add = {"add": {"path": "segment_id=1/a.parquet", "size": 5, "partitionValues": {"segment_id": "1"}}}
    assert relocated_action(add, "events") == {"add": {**add["add"], "path": "events/segment_id=1/a.parquet"}}
    txn = {"txn": {"appId": "pravega-writer/w", "version": 3}}
    assert relocated_action(dict(txn), "events") == txn
    crc = {"tableSizeBytes": 5, "allFiles": [{"path": "a.parquet", "size": 5}], "setTransactions": [txn["txn"]]}
    assert relocated_checksum(crc, "events") == {**crc, "allFiles": [{"path": "events/a.parquet", "size": 5}]}


def test_a_checkpoint_part_is_rewritten_with_its_schema_and_its_null_actions():
    add_type = pa.struct([("path", pa.string()), ("size", pa.int64())])
    remove_type = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64())])
    table = pa.table({
        "add": pa.array([{"path": "segment_id=0/a.parquet", "size": 1}, None, {"path": "/abs/b.parquet", "size": 2}],
                        add_type),
        "remove": pa.array([None, {"path": "segment_id=0/old.parquet", "deletionTimestamp": 7}, None], remove_type),
        "txn": pa.array([None, None, None], pa.struct([("appId", pa.string())])),
    })
    out = io.BytesIO()
    pq.write_table(table, out)
    rewritten = pq.read_table(pa.BufferReader(relocated_checkpoint(out.getvalue(), "events")))
    assert rewritten.schema == table.schema
    assert rewritten.column("add").to_pylist() == [{"path": "events/segment_id=0/a.parquet", "size": 1}, None,
                                                   {"path": "/abs/b.parquet", "size": 2}]
    assert rewritten.column("remove").to_pylist() == [None, {"path": "events/segment_id=0/old.parquet",
                                                             "deletionTimestamp": 7}, None]
