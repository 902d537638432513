"""truncate_stream: head moves, whole segments deleted without rewrites, rows below the head
deleted, refusals, reads below the head, physical removal after vacuum."""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from delta.tables import DeltaTable

import pravega_spark as ps
from pravega_spark.stream.cut_algorithms import size_between
from pravega_spark.stream.segments import segment_id
from tests.conftest import local_copy_path
from tests.helpers import table_versions
from tests.invariants import check_key_order, check_stream_consistent

KEYS = 6
S10, S11 = segment_id(2, 1), segment_id(3, 1)  # the halves of segment 0 after the split
S20 = segment_id(4, 2)  # the merge of S10 and S11


def _write(spark, writer, batch: int, n: int = 30):
    rows = [(f"key-{i % KEYS}", f"{writer.writer_id}:{batch:04d}:{i:06d}") for i in range(n)]
    return writer.write_events(spark.createDataFrame(rows, "routing_key string, event string"))


@pytest.fixture
def history(spark, manager, stream2):
    """A 2-segment stream through a split of 0 and a merge of its halves, with a tail cut after
    each batch: cuts[0] in epoch 0, cuts[1] in epoch 1, cuts[2] in epoch 2."""
    w = manager.create_event_writer("iot", "sensors", writer_id="w")
    cuts = [_write(spark, w, 0).tail_stream_cut]
    manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    cuts.append(_write(spark, w, 1).tail_stream_cut)
    manager.scale_stream("iot", "sensors", [S10, S11], [(0.0, 0.5)])
    cuts.append(_write(spark, w, 2).tail_stream_cut)
    _write(spark, w, 3)
    return w, cuts


def _payloads(df):
    return sorted(r.event.decode() for r in df.select("event").collect())


def _delete_commits(spark, root):
    return (DeltaTable.forPath(spark, f"{root}/iot/sensors").history()
            .where("operation = 'DELETE'").orderBy("version").collect())


@pytest.mark.slow
def test_truncation_across_epochs(spark, root, manager, history):
    _, cuts = history
    records = manager.controller.store.segment_records("iot", "sensors")
    start = manager.head_stream_cut("iot", "sensors")
    all_events = _payloads(manager.read_events("iot", "sensors"))
    assert len(all_events) == 120

    assert manager.truncate_stream("iot", "sensors", cuts[0]) is True
    record = manager.truncation_record("iot", "sensors")
    assert record.stream_cut == cuts[0] and record.to_delete == () and record.deleted_segments == ()
    assert record.size_till == size_between(start, cuts[0], records)
    assert manager.head_stream_cut("iot", "sensors") == cuts[0]
    assert _payloads(manager.read_events("iot", "sensors")) == [p for p in all_events if not p.startswith("w:0000")]
    with pytest.raises(ps.TruncatedDataError):
        manager.read_events("iot", "sensors", start=start)

    # epoch 2's cut: 0 and S10/S11 lie wholly before it and are deleted; 1 is truncated
    manager.truncate_stream("iot", "sensors", cuts[2])
    record = manager.truncation_record("iot", "sensors")
    assert record.deleted_segments == (0, S10, S11) and not record.updating
    assert record.size_till == size_between(start, cuts[2], records)
    assert _payloads(manager.read_events("iot", "sensors")) == sorted(p for p in all_events if p.startswith("w:0003"))
    raw = {r.segment_id for r in manager.controller.store.events("iot", "sensors").collect()}
    assert raw == {1, S20}
    info = manager.stream_info("iot", "sensors")
    assert info.size_bytes == size_between(cuts[2], info.tail_stream_cut, records, info.tail_stream_cut.positions)
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    check_key_order(events)

    # the segment deletes rewrote no data file; the partial ones only removed whole files here
    deletes = _delete_commits(spark, root)
    whole = [d for d in deletes if " IN " in d.operationParameters["predicate"]]
    assert len(whole) == 1
    assert int(whole[0].operationMetrics["numRemovedFiles"]) > 0
    assert int(whole[0].operationMetrics.get("numAddedFiles", "0")) == 0
    assert int(whole[0].operationMetrics.get("numCopiedRows", "0")) == 0


@pytest.mark.slow
def test_behind_and_older_segment_truncations_are_refused(spark, root, manager, history):
    _, cuts = history
    manager.truncate_stream("iot", "sensors", cuts[1])
    before = table_versions(spark, root)
    # behind: same segments, smaller offsets
    behind = ps.StreamCut("iot/sensors", {**cuts[1].positions, 1: cuts[0].positions[1]})
    with pytest.raises(ps.InvalidStreamCutError, match="not equal to or after"):
        manager.truncate_stream("iot", "sensors", behind)
    # older segment: epoch 0's cut after the head moved to epoch 1
    with pytest.raises(ps.InvalidStreamCutError):
        manager.truncate_stream("iot", "sensors", cuts[0])
    # not a valid cut: overlapping segments, an offset inside an event, another stream's cut
    with pytest.raises(ps.InvalidStreamCutError):
        manager.truncate_stream("iot", "sensors", ps.StreamCut("iot/sensors", {0: 0, 1: 0, S10: 0, S11: 0}))
    with pytest.raises(ps.InvalidStreamCutError):
        manager.truncate_stream("iot", "sensors", cuts[2].with_positions({S20: cuts[2].positions[S20] - 1}))
    with pytest.raises(ps.InvalidStreamCutError):
        manager.truncate_stream("iot", "sensors", ps.StreamCut("iot/other", cuts[2].positions))
    with pytest.raises(ps.InvalidStreamCutError):
        manager.truncate_stream("iot", "sensors", ps.StreamCut.UNBOUNDED)
    assert table_versions(spark, root) == before  # nothing changed
    # the current head again is a no-op
    assert manager.truncate_stream("iot", "sensors", cuts[1]) is True
    assert table_versions(spark, root) == before


def test_sealed_stream_cannot_be_truncated(spark, root, manager, history):
    _, cuts = history
    manager.seal_stream("iot", "sensors")
    with pytest.raises(ps.StreamSealedError):
        manager.truncate_stream("iot", "sensors", cuts[2])


@pytest.mark.slow
def test_truncating_at_the_tail_keeps_the_segments_lengths(spark, root, manager, history):
    w, _ = history
    tail = manager.tail_stream_cut("iot", "sensors")
    manager.truncate_stream("iot", "sensors", tail)
    assert manager.read_events("iot", "sensors").count() == 0
    assert manager.tail_stream_cut("iot", "sensors") == tail  # every event gone, lengths kept
    result = _write(spark, w, 4)
    assert result.event_count == 30
    assert all(result.tail_stream_cut.positions[s] >= tail.positions[s] for s in tail.positions)
    assert _payloads(manager.read_events("iot", "sensors")) == sorted(f"w:0004:{i:06d}" for i in range(30))
    check_stream_consistent(spark, manager, "iot", "sensors")
    # a fresh writer (no cached tails) appends after them too
    _write(spark, manager.create_event_writer("iot", "sensors", writer_id="v"), 5)
    events = check_stream_consistent(spark, manager, "iot", "sensors")
    assert len(events) == 60


@pytest.mark.slow
@pytest.mark.s3
def test_truncated_bytes_are_gone_from_storage_after_vacuum(spark, root, manager, history):
    _, cuts = history
    manager.truncate_stream("iot", "sensors", cuts[2])
    truncated = {f"w:{b:04d}:{i:06d}".encode() for b in range(3) for i in range(30)}
    kept = {f"w:0003:{i:06d}".encode() for i in range(30)}

    def payloads_in_files():
        found = set()
        for dirpath, _, files in os.walk(local_copy_path(root)):
            for name in files:
                if name.endswith(".parquet") and "_delta_log" not in dirpath:
                    table = pq.read_table(os.path.join(dirpath, name))
                    if "event" in table.column_names:
                        found.update(v for v in table.column("event").to_pylist() if v is not None)
        return found

    assert truncated <= payloads_in_files()  # still in storage: only removed from the table
    vacuumed = manager.vacuum("iot", "sensors", retention=timedelta(0))
    assert f"{manager.root}/iot/sensors" in vacuumed
    left = payloads_in_files()
    assert not (truncated & left) and kept <= left
    # nor anywhere in any file under the store, byte for byte (logs, checkpoints, CRCs)
    assert os.path.isdir(local_copy_path(root))
    for dirpath, _, files in os.walk(local_copy_path(root)):
        for name in files:
            data = open(os.path.join(dirpath, name), "rb").read()
            assert not any(p in data for p in truncated), os.path.join(dirpath, name)
    assert _payloads(manager.read_events("iot", "sensors")) == sorted(p.decode() for p in kept)


@pytest.mark.slow
def test_truncation_at_a_cut_with_a_future_segment_then_read_from_earliest(spark, manager, history):
    """A subscribers' lower bound such as {S10: o, 1: o, S20: -1} (S11 done, S10 not): after a
    truncation there, reading from "earliest" works and starts at the head (regression: it
    raised TruncatedDataError, the head being "before" itself)."""
    _, cuts = history
    head = ps.StreamCut("iot/sensors", {S10: cuts[1].positions[S10], 1: cuts[1].positions[1], S20: -1})
    expected = _payloads(manager.read_events("iot", "sensors", start=head))
    assert manager.truncate_stream("iot", "sensors", head)
    assert manager.head_stream_cut("iot", "sensors") == head
    assert _payloads(manager.read_events("iot", "sensors")) == expected
    assert _payloads(manager.read_events("iot", "sensors", start=head)) == expected
    check_stream_consistent(spark, manager, "iot", "sensors")
