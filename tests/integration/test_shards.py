"""The store's shard tables (format 3, issue #68): a stream's bookkeeping rows sit in the shard
of its key, in its own partition, and nowhere else; the shard count is fixed at the store's
creation; a deleted stream leaves no row behind."""

from __future__ import annotations

import os
import tarfile
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import pravega_spark as ps
from pravega_spark.store.schema import SHARD_KINDS, shard_of
from pravega_spark.store.store import stream_key
from pravega_spark.stream.retention import RetentionRecord
from tests.helpers import table_versions


def test_the_shard_rule_spreads_keys_evenly_and_its_sql_form_agrees(spark):
    keys = [stream_key("scope", f"stream-{i}") for i in range(4096)]
    for shards in (1, 2, 16, 256):
        counts = Counter(shard_of(k, shards) for k in keys)
        assert set(counts) == set(range(shards))
        assert max(counts.values()) <= 2 * len(keys) / shards + 8, (shards, counts.most_common(3))
    rows = spark.createDataFrame([(k,) for k in keys[:200]], "stream_key string").select(
        "stream_key", F.expr("conv(substr(stream_key, 1, 4), 16, 10) % 16").cast("int").alias("k")).collect()
    assert all(r.k == shard_of(r.stream_key, 16) for r in rows)


def test_a_bad_shard_count_is_refused_before_anything_is_written(spark, root):
    for bad in (0, 3, 512, True, "16"):
        with pytest.raises(ps.InvalidConfigError, match="shards must be a power of two"):
            ps.StreamManager(spark, root, shards=bad)
    assert not os.path.exists(root.removeprefix("file:"))


@pytest.mark.both_backends(slow=("sql",))
def test_each_streams_rows_are_in_its_shard_only_and_go_with_the_stream(spark, root, delta_backend):
    """Two streams of different shards: every kind of their rows is in the shard of their key,
    partitioned by it; deleting one removes its rows of every kind and leaves the other's."""
    manager = ps.StreamManager(spark, root, shards=4)
    assert ps.StreamManager(spark, root, shards=64).controller.store.shards == 4  # fixed at creation
    store = manager.controller.store
    manager.create_scope("iot")
    names = ["a", "b", "c", "d", "e"]
    mine = {}
    for name in names:  # two streams of different shards
        mine.setdefault(shard_of(stream_key("iot", name), 4), name)
        if len(mine) == 2:
            break
    streams = sorted(mine.values())
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for name in streams:
        manager.create_stream("iot", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
        writer = manager.create_event_writer("iot", name, "w1")
        writer.write_events(spark.createDataFrame([("k", b"x")], "routing_key string, event binary"))
        writer.note_time(t0)
        writer.stream_event(routing_key="big", chunk_size=1024).write(b"x" * 1500)  # a chunk staged, left open
        manager.add_subscriber("iot", name, "sub", 1)
        manager.compute_watermarks("iot", name, now=t0 + timedelta(seconds=1))
        store.add_retention_record("iot", name, RetentionRecord(t0, 1, manager.tail_stream_cut("iot", name)))
        store.merge_autoscale_marks("iot", name, [{"segment_id": 0, "last_up": t0, "last_down": None,
                                                   "cold_until": None}], {0})
    # every shard table of every kind, read once (no Spark job on classic): which keys it holds
    holders = {}
    for kind in SHARD_KINDS:
        for path in store.shard_paths(kind):
            if store.backend.exists(path):
                holders[path] = {r["stream_key"] for r in store.table_rows(path)}
    for name in streams:
        key = stream_key("iot", name)
        for kind in SHARD_KINDS:
            home = store.shard_path(kind, key)
            assert home.endswith(f"/_pravega/s{shard_of(key, 4)}/{kind}")
            assert {p for p, keys in holders.items() if key in keys and p.endswith(f"/{kind}")} == {home}, (kind, name)
    assert all(len(keys) == 1 for keys in holders.values()), holders  # no other stream in these shards
    gone, kept = streams
    manager.seal_stream("iot", gone)
    assert manager.delete_stream("iot", gone)
    for kind in SHARD_KINDS:
        assert store.shard_rows(kind, "iot", gone) == [], kind
        assert store.shard_rows(kind, "iot", kept) != [], kind
    validation = manager.validate_stream("iot", kept)  # its placement invariants hold on this backend too
    assert validation.success and validation.counts["shard_table"] >= len(SHARD_KINDS), validation
    before = table_versions(spark, root.removeprefix("file:"))
    assert manager.subscribers("iot", kept).count() == 1 and manager.retention_set("iot", kept).count() == 1
    assert table_versions(spark, root.removeprefix("file:")) == before  # reads commit nothing


def test_a_store_written_by_the_format_2_library_is_refused_naming_the_upgrade(spark, tmp_path):
    """The store the last format-2 commit wrote (``tests/data/make_format2_store.py``): the
    library refuses it in one line naming the upgrade command, and writes nothing."""
    with tarfile.open(Path(__file__).resolve().parents[1] / "data" / "format2_store.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    root = str(tmp_path / "format2-store")
    before = table_versions(spark, root)
    assert len(before) >= 20  # the scenario's tables, each its own (the format-2 layout)
    with pytest.raises(ps.StoreFormatError, match=r"has format 2, .* `pravega-spark --root .* upgrade-store`") as caught:
        ps.StreamManager(spark, root)
    assert "\n" not in str(caught.value)
    assert table_versions(spark, root) == before


@pytest.mark.both_backends(slow=("sql",))
def test_control_operations_keep_one_live_file_per_stream_and_kind_and_vacuum_removes_the_rest(spark, root,
                                                                                            delta_backend):
    """The store's own tables stay compact: a control operation rewrites its stream's partition,
    so a shard table's live files stay one per stream (and kind) however many operations ran;
    ``vacuum_store_tables`` removes the files those rewrites replaced, each table once, and the
    streams carry on."""
    manager = ps.StreamManager(spark, root, shards=2)
    store = manager.controller.store
    manager.create_scope("iot")
    names = ("a", "b", "c")
    for name in names:
        manager.create_stream("iot", name, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
        manager.add_subscriber("iot", name, "sub", 1)
    for days in range(1, 3):  # control operations on one stream: its catalogue row and subscriber row rewritten
        assert manager.update_stream("iot", "a", ps.StreamConfiguration(
            scaling_policy=ps.ScalingPolicy.fixed(1), retention_policy=ps.RetentionPolicy.by_time(timedelta(days=days))))
        assert manager.add_subscriber("iot", "a", "sub", 1 + days)

    def on_disk(path: str) -> int:
        return sum(name.endswith(".parquet") for folder, _, files in os.walk(path.removeprefix("file:"))
                   if "_delta_log" not in folder for name in files)

    def live(path: str) -> int:
        return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().numFiles

    catalogue = store.shard_path("streams", stream_key("iot", "a"))
    subscribers = store.shard_path("subscribers", stream_key("iot", "a"))
    for path in (catalogue, subscribers):
        keys = {r["stream_key"] for r in store.table_rows(path)}
        assert live(path) == len(keys), (path, live(path), keys)  # one live file per stream
        assert on_disk(path) > live(path)  # the replaced ones, still on disk
    vacuumed = manager.vacuum_store_tables(retention=timedelta(0))
    assert len(vacuumed) == len(set(vacuumed)) and {catalogue, subscribers, store.streams_path} <= set(vacuumed)
    assert all(on_disk(p) == live(p) for p in vacuumed), {p: (on_disk(p), live(p)) for p in vacuumed}
    assert manager.stream_info("iot", "a").configuration.retention_policy == ps.RetentionPolicy.by_time(timedelta(days=2))
    assert {r.subscriber for r in manager.subscribers("iot", "a").collect()} == {"sub"}
    for name in names:
        assert manager.validate_stream("iot", name).success
