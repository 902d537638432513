"""Structured Streaming (``read_stream``) on a real store: real streaming queries with checkpoints
under tmp_path, Delta sinks, scaling and truncation while queries run."""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict

import pytest

import pravega_spark as ps
from pravega_spark import streaming
from tests.conftest import eventually

SCOPE, STREAM = "iot", "sensors"


class Batches:
    """A ``foreachBatch`` function collecting each micro-batch's rows (test-sized data)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []  # (batch_id, routing_key, event, segment_id, offset)
        self.sizes: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = [(batch_id, r.routing_key, bytes(r.event), r.segment_id, r.offset)
                for r in df.select("routing_key", "event", "segment_id", "offset").collect()]
        with self.lock:
            self.rows += rows
            self.sizes.append(len(rows))

    def events(self) -> list[bytes]:
        return [r[2] for r in self.rows]

    def check_key_order(self) -> None:
        """Per key, ordering by (batch, segment, offset) gives the writers' sequence numbers in order."""
        by_key = defaultdict(list)
        for batch_id, key, event, sid, offset in sorted(self.rows, key=lambda r: (r[0], r[3], r[4])):
            if key is not None and event[:1] != b"L":
                by_key[key].append(int(event.split(b":")[1]))
        for key, seqs in by_key.items():
            assert seqs == sorted(seqs), f"key {key} out of order: {seqs}"


def _write(manager, start: int, n: int, keys: int = 8, writer: str = "w") -> list[bytes]:
    """Events ``k<i % keys>:<i>`` for i in [start, start+n): the number is the key's append order."""
    rows = [(f"k{i % keys}", f"k{i % keys}:{i:06d}") for i in range(start, start + n)]
    manager.create_event_writer(SCOPE, STREAM, writer).write_events(
        manager.spark.createDataFrame(rows, "routing_key string, event string"))
    return [e.encode() for _, e in rows]


def _run(manager, sink, checkpoint: str, **options):
    """One availableNow run of a read_stream query into ``sink``."""
    query = (manager.read_stream(SCOPE, STREAM, **options).writeStream.foreachBatch(sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    return query


def test_a_running_query_across_split_merge_transactions_and_large_events(manager, stream2, tmp_path):
    """Exactly once and per-key order while a split and a merge happen under a running query;
    staged transaction data never shows, then appears after commit; a large event arrives whole."""
    sink = Batches()
    expected = _write(manager, 0, 80)
    txn_writer = manager.create_transactional_writer(SCOPE, STREAM, "tw")
    txn = txn_writer.begin_txn()
    txn.write_events(manager.spark.createDataFrame([("tx", "tx:1"), ("tx", "tx:2")], "routing_key string, event string"))
    txn.flush()
    query = (manager.read_stream(SCOPE, STREAM).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="300 milliseconds").start())
    try:
        query.processAllAvailable()
        assert sorted(sink.events()) == sorted(expected)  # nothing staged is visible
        manager.scale_stream(SCOPE, STREAM, [0], [(0.0, 0.25), (0.25, 0.5)])
        expected += _write(manager, 80, 80)
        query.processAllAvailable()
        big = b"L" + os.urandom(3000)
        with manager.create_event_writer(SCOPE, STREAM, "lw").stream_event("k3", chunk_size=1024) as large:
            large.write(big)
            large.commit()
        txn.commit()
        segments = manager.segments(SCOPE, STREAM, epoch=1).orderBy("key_start").collect()
        manager.scale_stream(SCOPE, STREAM, [segments[0].segment_id, segments[1].segment_id], [(0.0, 0.5)])
        expected += _write(manager, 160, 80)
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(sink.events()) == sorted(expected + [b"tx:1", b"tx:2", big])  # exactly once, the event whole
    assert len(sink.sizes) >= 3
    sink.check_key_order()
    progress = manager.stream_progress(query)
    assert progress.unread_bytes == 0 and progress.stream_cut == manager.tail_stream_cut(SCOPE, STREAM)
