"""Scopes and streams: lifecycle, states, listing, info, and error paths that change nothing."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timezone

import pytest

import pravega_spark as ps
from pravega_spark._delta import RetryPolicy
from pravega_spark.store import segment_store
from pravega_spark.store.schema import KVT_PREFIX
from pravega_spark.store.store import stream_key
from tests.helpers import table_versions


@pytest.mark.connect
def test_scope_lifecycle(manager):
    assert manager.create_scope("iot") is True
    assert manager.create_scope("iot") is False
    assert [r.scope for r in manager.list_scopes().collect()] == ["iot"]
    assert manager.check_scope_exists("iot")
    assert manager.delete_scope("iot") is True
    assert manager.delete_scope("iot") is False
    assert manager.list_scopes().count() == 0


@pytest.mark.connect
@pytest.mark.s3
def test_create_stream_makes_equal_segments_and_info(manager):
    manager.create_scope("iot")
    config = ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4), tags=["prod", "eu"])
    assert manager.create_stream("iot", "sensors", config) is True
    assert manager.create_stream("iot", "sensors", config) is False
    segs = manager.segments("iot", "sensors").collect()
    assert [(s.segment_id, s.segment_number, s.creation_epoch) for s in segs] == [(i, i, 0) for i in range(4)]
    assert [(s.key_start, s.key_end) for s in segs] == [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    assert all(s.sealed_epoch is None and s.sealed_size is None for s in segs)
    info = manager.stream_info("iot", "sensors")
    assert info.state == "ACTIVE" and info.current_epoch == 0 and info.size_bytes == 0
    assert info.configuration == config
    assert info.head_stream_cut == info.tail_stream_cut == ps.StreamCut("iot/sensors", {i: 0 for i in range(4)})
    assert "iot/sensors" in repr(info)
    epochs = manager.epochs("iot", "sensors").collect()
    assert [(e.epoch, e.segment_ids) for e in epochs] == [(0, [0, 1, 2, 3])]


def test_list_streams_by_tag_and_exists(manager):
    manager.create_scope("iot")
    manager.create_stream("iot", "a", ps.StreamConfiguration(tags=["prod"]))
    manager.create_stream("iot", "b", ps.StreamConfiguration(tags=["dev"]))
    assert [r.stream for r in manager.list_streams("iot").collect()] == ["a", "b"]
    assert [r.stream for r in manager.list_streams("iot", tag="prod").collect()] == ["a"]
    assert manager.check_stream_exists("iot", "a") and not manager.check_stream_exists("iot", "zz")
    new = ps.StreamConfiguration(tags=["prod", "gold"])
    assert manager.update_stream("iot", "b", new)
    assert [r.stream for r in manager.list_streams("iot", tag="gold").collect()] == ["b"]
    assert manager.stream_info("iot", "b").configuration == new


def test_update_raising_min_segments_scales_up_through_updating(spark, manager, stream2):
    """Pravega's UpdateStreamTask: a raised min_num_segments above the open segments' count scales
    the stream up inside the update (state UPDATING, then ACTIVE at the next epoch); per-key order
    holds across it, and a lowered minimum changes no segment."""
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, writer_id="w")
    rows = [(f"k{i % 6}", f"{i:04d}") for i in range(30)]
    writer.write_events(spark.createDataFrame(rows[:15], "routing_key string, event string"))
    config = ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(5), tags=["wide"])
    assert manager.update_stream(scope, stream, config)
    info = manager.stream_info(scope, stream)
    assert info.state == "ACTIVE" and info.current_epoch == 1 and info.configuration == config
    open_ranges = sorted((s.key_start, s.key_end) for s in manager.segments(scope, stream, 1).collect())
    assert len(open_ranges) == 5 and open_ranges[0][0] == 0.0 and open_ranges[-1][1] == 1.0
    assert all(a[1] == b[0] for a, b in zip(open_ranges[:-1], open_ranges[1:], strict=True))  # they tile [0, 1)
    assert max(hi - lo for lo, hi in open_ranges) <= 0.25  # [0, .5) in 3 parts, [.5, 1) in 2
    states = _row_states(spark, manager.controller.store.catalog_path(stream_key(scope, stream)), stream)
    assert states == ["CREATING", "ACTIVE", "UPDATING", "ACTIVE"], states
    writer.write_events(spark.createDataFrame(rows[15:], "routing_key string, event string"))
    events = manager.read_events(scope, stream).collect()
    for key in {k for k, _ in rows}:
        got = [e.event.decode() for e in sorted(events, key=lambda e: (e.segment_id, e.offset)) if e.routing_key == key]
        assert got == [v for k, v in rows if k == key]
    assert manager.update_stream(scope, stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    assert manager.stream_info(scope, stream).current_epoch == 1


def _row_states(spark, path: str, stream: str) -> list[str]:
    """The state of ``stream``'s row in each version of the streams table that changed it."""
    latest = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").agg({"version": "max"}).first()[0]
    states = []
    for version in range(latest + 1):
        rows = spark.read.format("delta").option("versionAsOf", version).load(path).where(f"stream = '{stream}'")
        row = rows.select("state", "row_version").first()
        if row is not None and (not states or states[-1][1] != row.row_version):
            states.append((row.state, row.row_version))
    return [s for s, _ in states]


@pytest.mark.s3
def test_seal_then_delete_removes_data(manager, root, stream2):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream)
    writer.write_event(b"hello", routing_key="k")
    with pytest.raises(ps.StreamNotSealedError):
        manager.delete_stream(scope, stream)
    assert manager.seal_stream(scope, stream)
    assert manager.stream_info(scope, stream).state == "SEALED"
    sealed = manager.segments(scope, stream).collect()
    assert sorted(s.sealed_size for s in sealed) == sorted([0, 13])
    with pytest.raises(ps.StreamSealedError):
        writer.write_event(b"late", routing_key="k")
    with pytest.raises(ps.StreamSealedError):
        manager.create_event_writer(scope, stream).write_event(b"late", routing_key="k")
    with pytest.raises(ps.StreamSealedError):
        manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    assert manager.successors(scope, stream, 0) == {}
    assert manager.seal_stream(scope, stream)  # idempotent
    with pytest.raises(ps.ScopeNotEmptyError):
        manager.delete_scope(scope)
    assert manager.delete_stream(scope, stream) is True
    assert not os.path.exists(os.path.join(root, scope, stream))
    assert manager.delete_stream(scope, stream) is False
    assert not manager.check_stream_exists(scope, stream)
    assert manager.delete_scope(scope)


@pytest.mark.parametrize("scope,stream", [("..", "s"), ("iot", ".."), ("iot", "."), ("a/b", "s"),
                                          ("iot", "../../etc"), ("iot", "_internal"), ("iot", "x" * 251)])
def test_bad_names_refused_before_io(spark, tmp_path, scope, stream):
    root = str(tmp_path / "store")
    manager = ps.StreamManager(spark, root)
    before = table_versions(spark, root)
    with pytest.raises(ps.InvalidNameError):
        manager.create_scope(scope) if stream == "s" else manager.create_stream("iot", stream)
    assert table_versions(spark, root) == before
    assert sorted(os.listdir(root)) == ["_pravega"]


@pytest.mark.connect
def test_error_paths_change_nothing(manager, root, spark, stream2):
    scope, stream = stream2
    before = table_versions(spark, root)
    with pytest.raises(ps.ScopeNotFoundError):
        manager.create_stream("nope", "s")
    with pytest.raises(ps.StreamNotFoundError):
        manager.stream_info(scope, "nope")
    with pytest.raises(ps.StreamNotFoundError):
        manager.create_event_writer(scope, "nope")
    with pytest.raises(ps.InvalidConfigError):
        manager.create_stream(scope, "x", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(0)))
    with pytest.raises(ps.StreamNotSealedError):
        manager.delete_stream(scope, stream)
    with pytest.raises(ps.ScopeNotEmptyError):
        manager.delete_scope(scope)
    assert table_versions(spark, root) == before


def test_relative_root_is_qualified_once(spark, tmp_path, monkeypatch):
    """A notebook user's ``StreamManager(spark, "lake")``: every table lands under the working
    directory (regression: Delta took the relative table path for a table name and failed)."""
    monkeypatch.chdir(tmp_path)
    manager = ps.StreamManager(spark, "lake")
    assert manager.root == f"file:{tmp_path}/lake"
    assert manager.create_scope("iot")
    assert manager.create_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    writer = manager.create_event_writer("iot", "sensors")
    writer.write_event(b"x", routing_key="k")
    assert [r.event for r in manager.read_events("iot", "sensors").collect()] == [b"x"]
    assert (tmp_path / "lake" / "iot" / "sensors" / "_delta_log").is_dir()
    assert ps.StreamManager(spark, str(tmp_path / "lake")).check_stream_exists("iot", "sensors")


def test_longest_names_fit_every_path_component(spark, manager, root):
    """Scope and stream names at Pravega's limits (255 and 250 chars): every table, the catalog's
    partitions included, keeps its path components within the file system's 255 bytes
    (regression: the catalog's ``stream=<name>`` partition directory was 257 bytes)."""
    scope, stream = "s" * 255, "t-" * 124 + "t."
    assert len(stream) == 250
    assert manager.create_scope(scope)
    assert manager.create_stream(scope, stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    writer = manager.create_event_writer(scope, stream, writer_id="w" * 250)
    writer.write_events(spark.createDataFrame([(f"k{i}", b"e") for i in range(20)], "routing_key string, event binary"))
    writer.note_time(datetime(2026, 1, 1, tzinfo=timezone.utc))
    manager.add_subscriber(scope, stream, "g" * 250, 1)
    manager.update_subscriber_stream_cut(scope, stream, "g" * 250, 1, manager.tail_stream_cut(scope, stream))
    assert manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)]) == 1
    assert manager.read_events(scope, stream).count() == 20
    assert [r.stream for r in manager.list_streams(scope).collect()] == [stream]
    longest = max(len(part.encode()) for path, dirs, files in os.walk(root) for part in dirs + files)
    assert longest <= 255
    assert manager.seal_stream(scope, stream) and manager.delete_stream(scope, stream)
    assert not manager.check_stream_exists(scope, stream)


@pytest.mark.slow
def test_a_seal_losing_to_appends_says_it_is_pending_and_the_next_operation_finishes_it(
        spark, manager, stream2, monkeypatch):
    """A seal whose seal records keep losing to appends must not claim that nothing was written:
    it recorded SEALING, so it raises WorkflowPendingError, and the next operation completes it.
    An append lands inside the seal's transaction (the seal pauses before its commit) and the
    seal may try once."""
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, writer_id="busy")
    writer.write_events(spark.createDataFrame([(f"k{i}", "x") for i in range(8)], "routing_key string, event string"))
    monkeypatch.setattr(segment_store, "SEAL_RETRY", RetryPolicy(attempts=1))
    monkeypatch.setenv("PRAVEGA_SPARK_PAUSE", "seal:before_commit=4")
    appended = []

    def append_during_the_pause():
        time.sleep(1.5)  # the seal has read the tails by now and waits before its commit
        appended.append(writer.write_events(spark.createDataFrame([(f"k{i}", "y") for i in range(8)],
                                                                  "routing_key string, event string")))

    thread = threading.Thread(target=append_during_the_pause)
    thread.start()
    with pytest.raises(ps.WorkflowPendingError) as info:
        manager.seal_stream(scope, stream)
    thread.join()
    assert appended and appended[0].event_count == 8  # the append won: the writer knew its tails
    assert "pending, not undone" in str(info.value) and "nothing was written" not in str(info.value).split("(")[0]
    assert manager.controller.store.stream_record(scope, stream).state == "SEALING"
    monkeypatch.delenv("PRAVEGA_SPARK_PAUSE")
    assert manager.stream_info(scope, stream).state == "SEALED"  # the next operation finished the seal
    with pytest.raises(ps.StreamSealedError):
        writer.write_event(b"late", routing_key="k0")
    assert manager.read_events(scope, stream).count() == 16


def test_deleted_streams_and_key_value_tables_leave_deltas_log_cache(manager, spark, root):
    """On the classic backend a removed table's log and snapshot leave the driver's heap at once
    (Delta itself never evicts a table it saw deleted: a long-lived driver kept every one for the
    cache's retention)."""
    from pravega_spark._delta import jvm

    manager.create_scope("gone")
    manager.create_stream("gone", "s", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    manager.create_event_writer("gone", "s").write_events(
        spark.createDataFrame([("k", "e")], "routing_key string, event string"))
    assert manager.read_events("gone", "s").count() == 1
    manager.create_key_value_table("gone", "t", ps.KeyValueTableConfiguration(2, 4, 2))
    manager.key_value_table("gone", "t").put(b"aaaa01", b"v")

    def cached(folder: str) -> list[str]:
        return [p for p in jvm.cached_delta_log_paths(spark) if f"/gone/{folder}/" in p]

    table = f"{KVT_PREFIX}t"
    assert cached("s") and cached(table)  # what the operations loaded (the cache holds 8 logs)
    manager.seal_stream("gone", "s")
    manager.delete_stream("gone", "s")
    manager.delete_key_value_table("gone", "t")
    assert cached("s") == [] and cached(table) == []
