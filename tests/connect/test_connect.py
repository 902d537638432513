"""The library on a Spark Connect session (no JVM in this process): what only this tier can show.

The core scenarios of every feature run here too: the tests marked ``connect`` elsewhere (streams,
writers, scaling, cuts, truncation, retention, reader groups, streaming, validation), among them
``tests/integration/test_sql_backend.py``, whose bodies run on both backends in the local suite.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
from pyspark.sql import functions as F

import pravega_spark as ps
from pravega_spark import _delta
from tests.conftest import eventually
from tests.connect.conftest import assert_no_jvm, relations_sent_ahead
from tests.helpers import absolute_events
from tests.invariants import check_key_order, check_stream_consistent
from tests.processes import spawn
from tests.workers import batch_rows

pytestmark = pytest.mark.connect


def events_df(spark, rows):
    return spark.createDataFrame(rows, "routing_key string, event string")


def test_the_session_is_remote_and_the_backend_is_sql(spark, manager):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(spark, ConnectSession)
    assert _delta.backend_kind(spark) == ("sql", "the session is a Spark Connect session (no JVM handle)")
    assert repr(manager._store.backend) == "SqlBackend()"
    assert_no_jvm()


def test_a_relative_root_is_refused_before_any_io(spark, tmp_path):
    before = set(os.listdir(tmp_path))
    with pytest.raises(ps.InvalidConfigError, match="relative") as caught:
        ps.StreamManager(spark, "relative/store")
    assert "\n" not in str(caught.value)
    assert set(os.listdir(tmp_path)) == before


def test_a_small_write_is_placed_by_this_process_at_the_offsets_a_reader_sees(spark, manager, stream2):
    """Up to ``SMALL_WRITE_ROWS`` events of local data are routed, framed and placed by this
    process (the write knows its ends without a query after its MERGE); one event more takes the
    DataFrame path. Both writes, the first holding an event of the largest size, read back at
    contiguous offsets in each key's order, and each result's tail cut is the stream's tail."""
    from pravega_spark.store.schema import MAX_EVENT_SIZE
    from pravega_spark.writers.appender import SMALL_WRITE_ROWS

    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "w")

    def rows(first: int, count: int) -> list[tuple[str, str]]:
        return [(f"k{i % 13}", f"w:{i:06d}:" + "x" * (i % 300)) for i in range(first, first + count)]

    small = rows(0, SMALL_WRITE_ROWS - 1)
    prefix = f"w:{SMALL_WRITE_ROWS - 1:06d}:"
    small.append(("k0", prefix + "x" * (MAX_EVENT_SIZE - len(prefix))))
    df = events_df(spark, small)
    # local data (above a few MiB the client sends it ahead, as chunks the server caches)
    assert _delta.backend_for(spark).plan_leaves(df) == ["ChunkedCachedLocalRelation"]
    first = writer.write_events(df)
    assert (first.event_count, first.byte_count) == (len(small), sum(8 + len(e) for _, e in small))
    assert first.tail_stream_cut == manager.tail_stream_cut(scope, stream)
    second = writer.write_events(events_df(spark, rows(SMALL_WRITE_ROWS, SMALL_WRITE_ROWS + 1)))
    assert second.event_count == SMALL_WRITE_ROWS + 1
    assert second.tail_stream_cut == manager.tail_stream_cut(scope, stream)
    event_rows = check_stream_consistent(spark, manager, scope, stream)
    assert len(event_rows) == 2 * SMALL_WRITE_ROWS + 1
    check_key_order(event_rows)


def test_a_dataframe_write_to_64_segments_and_a_read_from_a_cut_inside_its_files(spark, manager):
    """At 64 segments (``routing.MAX_CASE_SEGMENTS``) a DataFrame write's plan stays shallow
    enough for the client to encode (the tails once nested a CASE per segment), and a read from a
    cut inside its files returns exactly the events after it."""
    manager.create_scope("wide")
    manager.create_stream("wide", "s", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(64)))
    writer = manager.create_event_writer("wide", "s", "w")

    def source(first: int):
        return spark.range(first, first + 2000).select(
            F.concat(F.lit("k"), (F.col("id") % 500).cast("string")).alias("routing_key"),
            F.format_string("w:%06d", F.col("id")).alias("event"))

    writer.write_events(source(0))
    writer.write_events(source(2000))
    event_rows = check_stream_consistent(spark, manager, "wide", "s")
    assert len(event_rows) == 4000 and len({r.segment_id for r in event_rows}) > 32
    check_key_order(event_rows)
    # in each segment, the start of its middle event of the first write: inside that write's file
    first = {}
    for r in event_rows:
        if int(r.event.decode()[2:]) < 2000:
            first.setdefault(r.segment_id, []).append(r.offset)
    inside = ps.StreamCut("wide/s", {sid: sorted(offs)[len(offs) // 2] for sid, offs in first.items()})
    want = sorted(r.event.decode() for r in event_rows if r.offset >= inside.positions[r.segment_id])
    got = sorted(r.event.decode() for r in manager.read_events("wide", "s", inside).collect())
    assert got == want and 2000 < len(got) < 4000


def test_rows_from_this_process_travel_inside_the_plan_and_come_back_whole(spark):
    """``local_frame``: an 8 MiB value, a string of wide characters and thousands of small rows
    reach the server in relations under its cache threshold (none sent ahead, so none kept for
    the session), and come back byte for byte. A plain ``createDataFrame`` of the same rows is sent
    ahead (the spy sees it: the check can fail)."""
    import random

    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType(), False), StructField("data", BinaryType()),
                         StructField("text", StringType())])
    rng = random.Random(3)
    big = (0, rng.randbytes(8 << 20), "\u00e9\u4e2d" * 300_000)
    small = [(i, rng.randbytes(1000), f"r{i}") for i in range(1, 3001)]
    for rows in ([big], small, [*small[:1500], big, *small[1500:]]):
        with relations_sent_ahead(spark) as sent:
            df = _delta.local_frame(spark, rows, schema)
            assert set(_delta.backend_for(spark).plan_leaves(df)) == {"LocalRelation"}
            back = sorted((r.id, bytes(r.data), r.text) for r in df.collect())
        assert sent == []
        assert back == sorted(rows)
    with relations_sent_ahead(spark) as sent:
        spark.createDataFrame(small, schema)
    assert len(sent) >= 1 and sum(sent) > 3_000_000


def test_large_values_written_reach_the_server_without_being_kept_for_the_session(spark, manager, stream2):
    """Every write path that carries a large value from this process sends nothing ahead: an
    8 MiB event (a writer's and a transaction's ``write_event``), a key-value batch of 16 values of
    the largest size, and a 20 MiB large event's 8 MiB chunks. Each is read back whole."""
    import hashlib
    import random

    from pravega_spark.store.schema import MAX_EVENT_SIZE, MAX_VALUE_LENGTH

    scope, stream = stream2
    rng = random.Random(11)
    single, in_txn = rng.randbytes(MAX_EVENT_SIZE), rng.randbytes(MAX_EVENT_SIZE)
    manager.create_scope("kv")
    manager.create_key_value_table("kv", "t", ps.KeyValueTableConfiguration(2, primary_key_length=4,
                                                                             secondary_key_length=2))
    table = manager.key_value_table("kv", "t")
    values = {b"pkey" + i.to_bytes(2, "big"): rng.randbytes(MAX_VALUE_LENGTH) for i in range(16)}
    large = rng.randbytes(20 << 20)
    with relations_sent_ahead(spark) as sent:
        writer = manager.create_event_writer(scope, stream, "w")
        writer.write_event(single, routing_key="a")
        txn = manager.create_transactional_writer(scope, stream, "tx").begin_txn()
        txn.write_event(in_txn, routing_key="b")
        txn.commit()
        table.update([ps.Put(k, v) for k, v in values.items()])
        with writer.stream_event("c") as event:
            event.write(large)
            event.commit()
    assert sent == []
    digest = F.sha2("event", 256).alias("digest")
    got = {r.routing_key: r.digest for r in manager.read_events(scope, stream).select("routing_key", digest).collect()}
    assert got == {k: hashlib.sha256(v).hexdigest() for k, v in (("a", single), ("b", in_txn), ("c", large))}
    assert {e.key: e.value for e in table.get_all(list(values))} == values


def test_a_transaction_and_a_64_mib_large_event_with_the_client_holding_a_few_chunks(spark, manager, stream2):
    """What needed files placed by hand now runs over Connect: a transaction (staged invisibly,
    seen by another handle, committed at once; an aborted one refuses a commit) and a 64 MiB
    large event through 4 MiB chunks, during which this process never holds much more than a few
    chunks (the payload is made piece by piece, and read back chunk by chunk)."""
    import hashlib
    import random
    import tracemalloc
    from datetime import timedelta

    scope, stream = stream2
    writer = manager.create_transactional_writer(scope, stream, "tx")
    txn = writer.begin_txn(timedelta(seconds=60))
    assert txn.write_events(events_df(spark, [(f"k{i % 4}", f"t:{i:03d}") for i in range(20)])) == 20
    assert manager.read_events(scope, stream).count() == 0  # staged: invisible
    assert writer.get_txn(txn.txn_id).check_status() is ps.TxnStatus.OPEN  # another handle sees it
    assert txn.commit().event_count == 20
    aborted = writer.begin_txn(timedelta(seconds=60))
    aborted.write_event(b"never", routing_key="k0")
    aborted.abort()
    with pytest.raises(ps.TxnFailedError):
        writer.get_txn(aborted.txn_id).commit()

    events = check_stream_consistent(spark, manager, scope, stream)
    check_key_order([e for e in events if e.writer_id == "tx"])

    chunk, mib = 4 << 20, 1 << 20
    manager.create_stream(scope, "big", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    digest, rng = hashlib.sha256(), random.Random(7)
    big = manager.create_event_writer(scope, "big", "big")
    # what this process's Python objects hold at their peak (tracemalloc: not RSS, which also
    # counts what glibc's allocator keeps after a free, 36-42 MiB here in a long test process)
    tracemalloc.start()
    try:
        with big.stream_event("k1", chunk_size=chunk) as event:
            for _ in range(64):
                piece = rng.randbytes(mib)
                digest.update(piece)
                event.write(piece)
                del piece
            result = event.commit()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (result.event_count, result.byte_count) == (1, 8 + 64 * mib)
    print(f"the client's Python objects peaked at {peak / mib:.1f} MiB writing a 64 MiB event in 4 MiB chunks")
    assert peak < 8 * chunk, f"the client held {peak / mib:.1f} MiB: more than half the event"
    # read back chunk by chunk (assembling 64 MiB in one row needs more than this server's 1 GiB heap)
    [(sid, offset)] = [(r.segment_id, r.offset) for r in absolute_events(spark, f"{manager.root}/{scope}/big")
                       .where("segment_id >= 0 AND offset = event_offset").select("segment_id", "offset").collect()]
    read = hashlib.sha256()
    with manager.open_event(ps.EventPointer(f"{scope}/big", sid, offset), window_chunks=2) as event:
        assert event.size == 64 * mib
        for part in event.iter_chunks():
            read.update(part)
    assert read.hexdigest() == digest.hexdigest()
    # read_events refuses to make it one row (past CONNECT_ROW_LIMIT), naming open_event, and the server lives on
    with pytest.raises(Exception, match="open_event") as refused:
        manager.read_events(scope, "big").collect()
    assert f"offset {offset} ({64 * mib} bytes)" in str(refused.value)
    assert spark.range(3).count() == 3  # the server is alive


def test_the_guarded_append_refuses_in_both_windows(spark, root, manager, tmp_path):
    """An append over Connect is a plain append whose source carries a guard over the stream's
    region past the tails. Window 2 (a commit between reading the tails and the write's
    snapshot, here the writer's own stale hinted tails): the guard raises and the writer retries
    from fresh tails. Window 1 (a commit after the write's snapshot, while its job runs): Delta's
    conflict check fails it on the guard's partition read, and the writer retries. Neither
    leaves an overlap, and each commit adds files only (no MERGE, no removal)."""
    manager.create_scope("fence")
    manager.create_stream("fence", "one", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    a = manager.create_event_writer("fence", "one", "a")
    b = manager.create_event_writer("fence", "one", "b")
    rows = lambda w, n, k=8: [(f"k{i % 3}", f"{w}:{n:04d}:{i:06d}") for i in range(k)]  # noqa: E731
    a.write_events(events_df(spark, rows("a", 0)))  # a's hint: the tail after its own write
    b.write_events(events_df(spark, rows("b", 0)))  # ... now stale
    assert a.write_events(events_df(spark, rows("a", 1))).retries >= 1  # window 2: the guard raised

    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    @F.udf("string")
    def held(value):  # runs on the server's Python worker: holds a's write job until told
        import os
        import time

        if not os.path.exists(go):
            open(started, "w").close()
            for _ in range(1200):
                if os.path.exists(go):
                    break
                time.sleep(0.05)
        return value

    import threading

    source = (spark.createDataFrame(rows("a", 2), "routing_key string, event string").coalesce(1)
              .select("routing_key", held("event").alias("event")))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(result=a.write_events(source)))
    thread.start()
    eventually(lambda: os.path.exists(started), timeout=120)  # a's job runs: its snapshot is taken
    b.write_events(events_df(spark, rows("b", 1)))  # commits into a's fenced region meanwhile
    open(go, "w").close()
    thread.join(timeout=300)
    assert outcome["result"].event_count == 8 and outcome["result"].retries >= 1  # window 1: a conflict
    event_rows = check_stream_consistent(spark, manager, "fence", "one")
    assert len(event_rows) == 40 and Counter(r.event.decode()[:6] for r in event_rows) == {
        "a:0000": 8, "a:0001": 8, "a:0002": 8, "b:0000": 8, "b:0001": 8}
    check_key_order(event_rows)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{root}/fence/one`").collect()
    writes = [h for h in history if h["operation"] == "WRITE" and not h["isBlindAppend"]]
    assert len(writes) >= 5 and not [h for h in history if h["operation"] == "MERGE"]
    assert all(int(h["operationMetrics"].get("numRemovedFiles", "0") or 0) == 0 for h in writes)


@pytest.mark.process
@pytest.mark.slow
def test_a_read_resolves_latest_at_evaluation_and_a_stale_cached_row_fails_it(spark, root, manager, stream2):
    """Over Spark Connect ``read_events`` takes the stream's row from this process's cache (no
    request) and resolves "latest" when Spark evaluates the DataFrame. A scale (or a truncation)
    made by a second client between the call and the action fails the action with
    ``StaleReadError``'s message: never the old segments' rows without the new ones'. Reading
    again then gives every event, and a large event committed by another client fails a read
    that skipped assembling, until read again."""
    from pyspark.sql import SparkSession

    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "w")
    writer.write_events(events_df(spark, [(f"k{i % 4}", f"a:{i}") for i in range(8)]))
    assert manager.read_events(scope, stream).count() == 8  # fetched and cached
    whole = manager.read_events(scope, stream)  # from the cache
    writer.write_events(events_df(spark, [(f"k{i % 4}", f"b:{i}") for i in range(4)]))
    assert whole.count() == 12  # "latest" resolves at evaluation

    other_session = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).create()  # a second client
    other = ps.StreamManager(other_session, root)
    stale = manager.read_events(scope, stream)
    segments = sorted(r.segment_id for r in other.segments(scope, stream).collect())
    other.scale_stream(scope, stream, segments, [(0.0, 0.5), (0.5, 1.0)])
    other.create_event_writer(scope, stream, "o").write_events(
        events_df(other_session, [(f"k{i % 4}", f"c:{i}") for i in range(6)]))

    def read_again_on_error(df, action):
        """The action, and on a stale read's error what reading again gives (in the except block)."""
        try:
            action(df)
        except Exception as exc:  # noqa: BLE001 - Spark's exception, recognized below
            error = ps.StaleReadError.of(exc)
            assert isinstance(error, ps.PravegaSparkError) and "call read_events again" in str(error), exc
            assert "SQLSTATE" not in str(error)
            return [r.event for r in manager.read_events(scope, stream).collect()]
        raise AssertionError("the stale read returned rows")

    got = sorted(e.decode() for e in read_again_on_error(stale, lambda df: df.collect()))
    assert len(got) == 18 and sum(e.startswith("c:") for e in got) == 6

    stale = manager.read_events(scope, stream)  # its segments will hold no row at all: nothing to scan
    tail = other.tail_stream_cut(scope, stream)
    other.truncate_stream(scope, stream, tail)
    segments = sorted(tail.positions)
    other.scale_stream(scope, stream, segments, [(0.0, 0.3), (0.3, 0.6), (0.6, 1.0)])
    other.create_event_writer(scope, stream, "o").write_events(
        events_df(other_session, [(f"k{i % 4}", f"d:{i}") for i in range(5)]))
    got = sorted(e.decode() for e in read_again_on_error(stale, lambda df: df.count()))
    assert got == [f"d:{i}" for i in range(5)]

    stale = manager.read_events(scope, stream)  # no chunks when fetched: assembly skipped
    with other.create_event_writer(scope, stream, "big").stream_event(routing_key="k0") as event:
        event.write(b"x" * (ps.MAX_EVENT_SIZE + 1))  # past 8 MiB: committed as chunks
        event.commit()
    got = sorted(len(e) for e in read_again_on_error(stale, lambda df: df.count()))
    assert got == [3] * 5 + [ps.MAX_EVENT_SIZE + 1]
    other_session.stop()


def test_two_client_processes_and_a_killed_writer(spark, root, manager, stream2):
    """Two writer processes append concurrently while a third is killed in the middle of its
    commit (the server runs the MERGE it sent, or not at all): every event of the survivors
    once, in order per key; the killed write all there or not at all; the stream consistent."""
    scope, stream = stream2
    writers = ["w0", "w1"]
    batches, per_batch = 4, 40
    procs = [spawn("append", "--root", root, "--writer", w, "--batches", str(batches), "--per-batch", str(per_batch))
             for w in writers]
    # no failpoint: the test kills it itself, while its write (tails query, MERGE) is under way
    victim = spawn("crash", "--root", root, "--op", "append", "--per-batch", "50", "--failpoint", "none")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # wait until the victim is in its commit, then kill it
        if victim.poll() is not None:
            break
        line = victim.stdout.readline()
        if line.startswith("COMMITTING"):
            time.sleep(1.5)
            victim.send_signal(signal.SIGKILL)
            break
    victim.wait(timeout=60)
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    event_rows = check_stream_consistent(spark, manager, scope, stream)
    counts = Counter(r.event.decode() for r in event_rows)
    assert all(c == 1 for c in counts.values()), [e for e, c in counts.items() if c > 1][:5]
    for w in writers:
        for b in range(batches):
            for _, payload in batch_rows(w, b, per_batch, 8):
                assert counts[payload] == 1, payload
    crashed = [e for e in counts if e.startswith("crasher:")]
    assert len(crashed) in (0, 50), len(crashed)
    check_key_order(event_rows)


def test_the_library_sinks_run_on_the_server_and_apply_the_head_there(spark, manager, stream2, tmp_path):
    """Over Spark Connect a ``foreachBatch`` function runs in the server's Python worker:
    ``ps.idempotent_delta_sink`` copies a ``head="plan"`` query's events exactly once, and a
    replayed batch id is skipped. With ``head="sink"`` the sink reads the head there, from the
    batch's session: events below a truncation made after the query started (between two runs
    from its checkpoint, which replays the commits before the truncation) never reach the copy,
    and a file sink other than the library's fails before writing anything."""
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "src")
    writer.write_events(events_df(spark, [(f"k{i % 3}", f"old:{i}") for i in range(6)]))
    manager.truncate_stream(scope, stream, manager.tail_stream_cut(scope, stream))
    writer.write_events(events_df(spark, [(f"k{i % 3}", f"new:{i}") for i in range(5)]))
    path = str(tmp_path / "copy")
    sink = ps.idempotent_delta_sink(path, "copy")
    query = (manager.read_stream(scope, stream).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    copied = spark.read.format("delta").load(path)
    assert sorted(r.event.decode() for r in copied.collect()) == [f"new:{i}" for i in range(5)]
    sink(manager.read_events(scope, stream), 0)  # a replay of batch 0, called here: skipped
    assert copied.count() == 5

    def run(sink_path: str, checkpoint: str) -> None:
        q = (manager.read_stream(scope, stream, head="sink").writeStream
             .foreachBatch(ps.idempotent_delta_sink(sink_path, "head-sink"))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None

    headed, checkpoint = str(tmp_path / "headed"), str(tmp_path / "headed_checkpoint")
    run(headed, checkpoint)  # the query starts: it reads what is there
    writer.write_events(events_df(spark, [(f"k{i % 3}", f"mid:{i}") for i in range(4)]))
    manager.truncate_stream(scope, stream, manager.tail_stream_cut(scope, stream))  # after "mid"
    writer.write_events(events_df(spark, [(f"k{i % 3}", f"late:{i}") for i in range(3)]))
    run(headed, checkpoint)  # from its checkpoint: the commit adding "mid" is replayed, below the head
    got = sorted(r.event.decode() for r in spark.read.format("delta").load(headed).collect())
    assert got == sorted([f"new:{i}" for i in range(5)] + [f"late:{i}" for i in range(3)])
    assert not [c for c in spark.read.format("delta").load(headed).columns if c.startswith("__pravega")]

    plain = (manager.read_stream(scope, stream, head="sink").writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "plain_checkpoint")).trigger(availableNow=True)
             .start(str(tmp_path / "plain")))
    with pytest.raises(Exception, match="CalendarIntervalType"):  # its marker column: no file sink stores it
        plain.awaitTermination(300)
        raise AssertionError(f"a plain Delta sink wrote a head='sink' query: {plain.exception()}")
    assert not os.path.exists(str(tmp_path / "plain" / "_delta_log"))  # nothing was written


def test_a_writer_captured_by_foreach_batch_runs_on_the_server_exactly_once(spark, manager, stream2, tmp_path):
    """The README's stream-to-stream copy over Spark Connect: the ``foreachBatch`` function (and
    the writer it captured) is pickled by root and names, runs on the server, and the micro-batch
    id as write number applies each batch once, also when a batch is replayed."""
    scope, stream = stream2
    manager.create_stream(scope, "copy", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
    manager.create_event_writer(scope, stream, "src").write_events(
        events_df(spark, [(f"k{i % 3}", f"f:0000:{i:06d}") for i in range(9)]))
    copier = manager.create_event_writer(scope, "copy", writer_id="copier")

    def copy(df, batch_id):
        copier.write_events(df, write_number=batch_id)
        copier.write_events(df, write_number=batch_id)  # a replay of the batch: skipped

    query = (manager.read_stream(scope, stream).writeStream.foreachBatch(copy)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    copied = sorted(r.event.decode() for r in manager.read_events(scope, "copy").collect())
    assert copied == sorted(f"f:0000:{i:06d}" for i in range(9))
    assert copier.last_write_number() == 0


def test_a_reader_groups_query_into_the_users_own_sink_publishes_its_position_and_retention_truncates_there(
        spark, manager, stream2, tmp_path):
    """``read_stream(reader_group=...)`` into the user's own sink, a Delta table and then a
    ``foreachBatch`` function: the group's subscriber cut becomes the position the query
    committed, published by the session's listener (in this client over Spark Connect; Spark
    informs it asynchronously) or at the latest by ``stream_progress``; consumption-based
    retention truncates exactly there, never at events written after."""
    scope, stream = stream2
    manager.update_stream(scope, stream, ps.StreamConfiguration(
        scaling_policy=ps.ScalingPolicy.fixed(2), retention_policy=ps.RetentionPolicy.by_size_bytes(0)))
    manager.create_reader_group(scope, "g", ps.ReaderGroupConfig(
        {f"{scope}/{stream}": "earliest"}, retention_type=ps.StreamDataRetention.MANUAL_RELEASE_AT_USER_STREAMCUT))
    writer = manager.create_event_writer(scope, stream, "w")

    def published() -> dict[int, int]:
        rows = manager.subscribers(scope, stream).collect()
        return {e.segment_id: e.offset for e in rows[0].stream_cut} if rows else {}

    # a Delta sink: the listener publishes the committed position without any further call
    writer.write_events(events_df(spark, [(f"k{i % 5}", f"a:{i}") for i in range(40)]))
    reached = manager.tail_stream_cut(scope, stream)
    query = (manager.read_stream(scope, stream, reader_group="g").writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "ck-delta")).trigger(availableNow=True)
             .start(str(tmp_path / "sink-delta")))
    query.awaitTermination(300)
    assert query.exception() is None
    eventually(lambda: published() == dict(reached.positions), timeout=60)
    writer.write_events(events_df(spark, [(f"k{i % 5}", f"b:{i}") for i in range(40)]))  # not consumed yet
    [run] = manager.run_retention(scope=scope, stream=stream)
    assert run.truncated_at == reached and manager.head_stream_cut(scope, stream) == reached

    # a foreachBatch function (it runs on the server): stream_progress returns with the cut published
    sink = str(tmp_path / "sink-batches")
    query = (manager.read_stream(scope, stream, reader_group="g").writeStream
             .foreachBatch(lambda df, _: df.write.format("delta").mode("append").save(sink))
             .option("checkpointLocation", str(tmp_path / "ck-batches")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    tail = manager.tail_stream_cut(scope, stream)
    progress = manager.stream_progress(query)
    assert progress.stream_cut == tail and published() == dict(tail.positions)
    assert sorted(r.event.decode() for r in spark.read.format("delta").load(sink).collect()) == sorted(
        f"b:{i}" for i in range(40))  # it started at the head, where retention truncated
    [run] = manager.run_retention(scope=scope, stream=stream)
    assert manager.head_stream_cut(scope, stream) == tail
