"""Manual scaling through the store: epochs, successors, re-routing, validation, one winner."""

from __future__ import annotations

import threading

import pytest

import pravega_spark as ps
from pravega_spark.stream.segments import segment_id
from tests.helpers import events_rows, table_versions


@pytest.mark.connect
def test_split_then_merge_records_epochs_and_successors(manager, spark, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    writer.write_events(spark.createDataFrame([(f"k{i}", b"v" * i) for i in range(20)], "routing_key string, event binary"))
    tail_before = manager.tail_stream_cut(scope, stream)
    assert manager.scale_stream(scope, stream, [1], [(0.75, 1.0), (0.5, 0.75)]) == 1
    s2, s3 = segment_id(2, 1), segment_id(3, 1)  # numbered in the order the ranges were given
    segs = {r.segment_id: r for r in manager.segments(scope, stream).collect()}
    assert (segs[s2].key_start, segs[s2].key_end) == (0.75, 1.0)
    assert (segs[s3].key_start, segs[s3].key_end) == (0.5, 0.75)
    assert segs[1].sealed_epoch == 1 and segs[1].sealed_size == tail_before.positions[1]
    assert manager.successors(scope, stream, 1) == {s2: [1], s3: [1]}
    assert manager.successors(scope, stream, 0) == {}
    assert manager.predecessors(scope, stream, s3) == [1]
    assert manager.scale_stream(scope, stream, [0, s3], [(0.0, 0.75)]) == 2
    s4 = segment_id(4, 2)
    assert manager.successors(scope, stream, s3) == {s4: [0, s3]}
    assert manager.successors(scope, stream, 0) == {s4: [0, s3]}
    assert sorted(manager.predecessors(scope, stream, s4)) == [0, s3]
    epochs = [(e.epoch, e.segment_ids) for e in manager.epochs(scope, stream).collect()]
    assert epochs == [(0, [0, 1]), (1, [0, s2, s3]), (2, [s2, s4])]
    assert [r.segment_id for r in manager.segments(scope, stream, epoch=1).collect()] == [0, s2, s3]
    info = manager.stream_info(scope, stream)
    assert info.current_epoch == 2 and info.state == "ACTIVE"
    assert set(info.tail_stream_cut.positions) == {s2, s4}
    # new writes go to the new segments only; nothing beyond a sealed size
    writer.write_events(spark.createDataFrame([(f"k{i}", b"w") for i in range(20)], "routing_key string, event binary"))
    rows = events_rows(spark, root_of(manager), scope, stream)
    sealed = {sid: r.sealed_size for sid, r in segs.items() if r.sealed_size is not None}
    for r in rows:
        if r.record_type == 0 and r.segment_id in sealed:
            assert r.next_offset <= sealed[r.segment_id]
    assert {r.segment_id for r in rows if r.event == b"w"} <= {s2, s4}
    # per key, (segment_id, offset) order is append order across the two scales
    got = manager.read_events(scope, stream).collect()
    for key in {r.routing_key for r in got}:
        mine = sorted((r for r in got if r.routing_key == key), key=lambda r: (r.segment_id, r.offset))
        assert mine[-1].event == b"w"


def root_of(manager):
    return manager.root


@pytest.mark.parametrize("sealed,ranges,error", [
    ([0], [(0.0, 0.3)], ps.InvalidScaleError),                       # gap
    ([0], [(0.0, 0.3), (0.2, 0.5)], ps.InvalidScaleError),           # overlap
    ([0], [(0.3, 0.3), (0.0, 0.5)], ps.InvalidScaleError),           # low == high
    ([0, 1], [(0.0, 0.6)], ps.InvalidScaleError),                    # does not cover
    ([7], [(0.0, 0.5)], ps.ScalePreconditionError),                  # not in current epoch
    ([0, 1], [(0.0, 1.0)], ps.ScalePreconditionError),               # below min_num_segments (2)
])
def test_invalid_scale_changes_nothing(manager, spark, root, stream2, sealed, ranges, error):
    scope, stream = stream2
    before = table_versions(spark, root)
    with pytest.raises(error):
        manager.scale_stream(scope, stream, sealed, ranges)
    assert table_versions(spark, root) == before
    assert manager.stream_info(scope, stream).state == "ACTIVE"


def test_scale_of_a_previous_epoch_segment_refused(manager, stream2):
    scope, stream = stream2
    manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    with pytest.raises(ps.ScalePreconditionError):
        manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)])


def test_concurrent_scales_exactly_one_wins(spark, root, stream2):
    scope, stream = stream2
    results, errors = [], []

    def scale(ranges):
        try:
            results.append(ps.StreamManager(spark, root).scale_stream(scope, stream, [0], ranges))
        except (ps.ScaleConflictError, ps.ScalePreconditionError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=scale, args=(r,)) for r in
               ([(0.0, 0.25), (0.25, 0.5)], [(0.0, 0.1), (0.1, 0.5)])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [1] and len(errors) == 1
    manager = ps.StreamManager(spark, root)
    assert manager.stream_info(scope, stream).current_epoch == 1
    assert len(manager.segments(scope, stream, epoch=1).collect()) == 3
