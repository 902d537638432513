"""Build the format-2 store that #68's upgrade is tested on, with the library of a pinned commit.

Run from a checkout of the last format-2 commit (65ca37b), with this repository's virtualenv::

    git worktree add /tmp/format2 65ca37b
    cd /tmp/format2 && SPARK_LOCAL_IP=127.0.0.1 /work/main/.venv/bin/python \\
        /work/main/tests/data/make_format2_store.py /tmp/format2-store
    tar -C /tmp -czf /work/main/tests/data/format2_store.tar.gz format2-store

What it holds (scope ``iot`` unless said): ``scaled`` (split, then merged back: 3 epochs),
``truncated`` (truncated past a split), ``sealed``, ``pending`` (left SCALING by a process killed at
``scale:after_start``), ``kept`` (retention records, subscribers, writer marks, watermarks,
auto-scaling marks, a committed transaction, a committed large event of 3 chunks, write numbers),
a reader group ``iot/dashboards`` on ``kept`` with a completed checkpoint, a key-value table
``iot/settings``, and an empty scope ``empty``. ``expected.json`` beside the store lists, per
stream, what the upgrade must keep: its events, head, tail, retention set, subscribers, watermarks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def build(root: str) -> dict:
    import pravega_spark as ps
    from pravega_spark.store.schema import STORE_FORMAT

    assert STORE_FORMAT == 2, f"run this with the format-2 library (found format {STORE_FORMAT})"
    spark = ps.spark_session(**{"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1",
                                "spark.ui.enabled": "false"})
    manager = ps.StreamManager(spark, root)
    manager.create_scope("iot")
    manager.create_scope("empty")

    def rows(n: int, tag: str):
        return spark.createDataFrame([(f"key-{i % 5}", f"{tag}:{i:04d}".encode()) for i in range(n)],
                                     "routing_key string, event binary")

    fixed2 = ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2))
    manager.create_stream("iot", "scaled", fixed2)
    w = manager.create_event_writer("iot", "scaled", writer_id="w-scaled")
    w.write_events(rows(20, "a"), write_number=1)
    manager.scale_stream("iot", "scaled", [0], [(0.0, 0.25), (0.25, 0.5)])
    w.write_events(rows(20, "b"), write_number=2)
    halves = sorted(s.segment_id for s in manager.segments("iot", "scaled").collect()
                    if s.sealed_epoch is None and s.creation_epoch == 1)
    manager.scale_stream("iot", "scaled", halves, [(0.0, 0.5)])
    w.write_events(rows(10, "c"), write_number=3)

    manager.create_stream("iot", "truncated", fixed2)
    w = manager.create_event_writer("iot", "truncated", writer_id="w-truncated")
    w.write_events(rows(20, "a"))
    manager.scale_stream("iot", "truncated", [1], [(0.5, 0.75), (0.75, 1.0)])
    w.write_events(rows(20, "b"))
    manager.truncate_stream("iot", "truncated", manager.tail_stream_cut("iot", "truncated"))
    w.write_events(rows(10, "c"))

    manager.create_stream("iot", "sealed", fixed2)
    manager.create_event_writer("iot", "sealed").write_events(rows(10, "a"))
    manager.seal_stream("iot", "sealed")

    manager.create_stream("iot", "pending", fixed2)
    manager.create_event_writer("iot", "pending").write_events(rows(10, "a"))
    killed = subprocess.run([sys.executable, __file__, "--scale-pending", root], capture_output=True, text=True,
                            env=dict(os.environ, PRAVEGA_SPARK_FAILPOINT="scale:after_start"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert manager.controller.store.stream_record("iot", "pending").state == "SCALING"

    kept = ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.by_event_rate(100, 2, 1),
                                  retention_policy=ps.RetentionPolicy.by_time(timedelta(days=1)))
    manager.create_stream("iot", "kept", kept)
    w = manager.create_event_writer("iot", "kept", writer_id="w-kept")
    w.write_events(rows(30, "a"), write_number=7)
    w.note_time(T0)
    txn = manager.create_transactional_writer("iot", "kept", writer_id="tx").begin_txn(timedelta(seconds=60))
    txn.write_events(rows(5, "txn"))
    txn.commit()
    with w.stream_event(routing_key="big", chunk_size=1024) as event:
        event.write(bytes(range(256)) * 12)  # 3,072 bytes: 3 chunks
        event.commit()
    manager.create_reader_group("iot", "dashboards", ps.ReaderGroupConfig(
        {"iot/kept": "earliest"}, retention_type=ps.StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT))
    manager.add_subscriber("iot", "kept", "external", 3)
    group = manager.reader_group("iot", "dashboards")
    reader = group.create_reader("r1")
    reader.read_next()
    group.initiate_checkpoint("cp-1")
    reader.read_next()
    manager.run_retention(now=T0 + timedelta(hours=1))
    manager.compute_watermarks(now=T0 + timedelta(seconds=1))
    manager.controller.store.merge_autoscale_marks("iot", "kept", [
        {"segment_id": 0, "last_up": T0, "last_down": None, "cold_until": None}], {0, 1})

    table = manager.create_key_value_table("iot", "settings", ps.KeyValueTableConfiguration(
        2, primary_key_length=4, secondary_key_length=0))
    assert table
    kv = manager.key_value_table("iot", "settings")
    kv.put(b"k001", b"one")
    kv.put(b"k002", b"two")

    expected = {}
    for name in ("scaled", "truncated", "sealed", "kept"):
        events = sorted((r.segment_id, r.offset, r.routing_key, r.event.hex())
                        for r in manager.read_events("iot", name).collect())
        expected[name] = {
            "events": events,
            "head": manager.head_stream_cut("iot", name).as_text(),
            "tail": manager.tail_stream_cut("iot", name).as_text(),
            "retention_set": [r.stream_cut for r in manager.retention_set("iot", name).collect()],
            "subscribers": sorted(r.subscriber for r in manager.subscribers("iot", name).collect()),
            "watermarks": [r.stream_cut for r in manager.watermarks("iot", name).collect()],
        }
    return expected


def scale_pending(root: str) -> None:
    import pravega_spark as ps

    manager = ps.StreamManager(ps.spark_session(**{"spark.master": "local[1]", "spark.ui.enabled": "false"}), root)
    manager.scale_stream("iot", "pending", [0], [(0.0, 0.25), (0.25, 0.5)])  # killed at scale:after_start


if __name__ == "__main__":
    if sys.argv[1] == "--scale-pending":
        scale_pending(sys.argv[2])
    else:
        target = Path(sys.argv[1])
        found = build(str(target.resolve()))
        (target.parent / f"{target.name}.expected.json").write_text(json.dumps(found, indent=1, sort_keys=True))
