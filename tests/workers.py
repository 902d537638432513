"""Worker processes for the concurrency and crash tests (real OS processes, own JVMs).

    python -m tests.workers append --root R --scope S --stream T --writer W --batches B --per-batch N --keys K [--key-list a,b]
    python -m tests.workers scale  --root R --scope S --stream T --scales M
    python -m tests.workers truncate --root R --scope S --stream T --truncations M --pause P
    python -m tests.workers crash  --root R --scope S --stream T --failpoint NAME --op scale|append|seal|create|delete|truncate|idempotent-append|txn-commit
    python -m tests.workers txn-commit  --root R --scope S --stream T --txns ID,ID,...
    python -m tests.workers txn-timeout --root R --scope S --stream T --rounds M
    python -m tests.workers idempotent-append --root R --scope S --stream T --writer W --number N
    python -m tests.workers large-stage --root R --scope S --stream T --writer W --size BYTES
    python -m tests.workers compact --root R --scope S --stream T --rounds M --pause P
    python -m tests.workers read-group --root R --scope S --group G --reader ID --sink PATH [--stall-after N | --stall-file F]
    python -m tests.workers read-stream --root R --scope S --stream T --sink PATH --checkpoint C --stall-file F
    python -m tests.workers race --root BASE --writer W --rounds M --parties P --barrier DIR
    python -m tests.workers log-race --root R --writer W --rounds M --parties P --barrier DIR

A crash run sets PRAVEGA_SPARK_FAILPOINT so the library SIGKILLs the process at that point.
The tests do not start one process per command: ``tests.processes.spawn`` sends each command to a
warm worker (``python -m tests.workers serve``), which runs commands one after another.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pravega_spark as ps

# a class-data-sharing archive of a worker JVM's classes (``tests.processes.worker_archive``)
CDS_ARCHIVE, CDS_DUMP = "PRAVEGA_SPARK_WORKER_CDS", "PRAVEGA_SPARK_WORKER_CDS_DUMP"
SENTINEL = "\x00pravega-spark-worker-done"  # ends one command's output on a warm worker's stdout and stderr


def java_options() -> str:
    """Short-lived JVMs: the C1 compiler alone starts and runs these small jobs ~15% faster, and
    a class-data-sharing archive (when the test session made one) saves ~2.5 s of start-up."""
    quiet = Path(ps.__file__).with_name("log4j2.properties")  # the library's quiet log4j config, as local sessions use
    options = f"-Dderby.system.home=/tmp/derby -Dlog4j2.configurationFile={quiet} -XX:TieredStopAtLevel=1"
    if os.environ.get(CDS_DUMP):
        return f"{options} -XX:ArchiveClassesAtExit={os.environ[CDS_DUMP]}"
    if os.environ.get(CDS_ARCHIVE) and os.path.exists(os.environ[CDS_ARCHIVE]):
        return f"{options} -XX:SharedArchiveFile={os.environ[CDS_ARCHIVE]}"
    return options


CONF = {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false",
        "spark.driver.memory": "768m", "spark.driver.extraJavaOptions": java_options()}


def payload(writer: str, batch: int, index: int) -> str:
    return f"{writer}:{batch:04d}:{index:06d}"


def batch_rows(writer: str, batch: int, per_batch: int, keys: int):
    return [(f"key-{i % keys}", payload(writer, batch, i)) for i in range(per_batch)]


def crasher_rows(spark, events: int, keys: int = 8):
    """``batch_rows("crasher", 0, events, keys)`` made by Spark (no Python list of rows): the
    crash tests' write, of any size."""
    return spark.range(events).selectExpr(f"concat('key-', id % {keys}) AS routing_key",
                                          "format_string('crasher:0000:%06d', id) AS event")


def run_append(m: ps.StreamManager, a) -> None:
    """BATCHES batches; with ``--until-epoch E``, at least that many and then on (up to 200) until
    the stream's current epoch is E, and one more: the writes then surely span the scales
    whatever the machine's speed. Prints ``WROTE writer batch events version retries``."""
    writer = m.create_event_writer(a.scope, a.stream, writer_id=a.writer)
    names = a.key_list.split(",") if a.key_list else None
    b, reached = 0, False
    while b < a.batches or (a.until_epoch and b < 200 and not reached):
        if b >= a.batches:  # this batch is the last one if the epoch is there now
            reached = m.stream_info(a.scope, a.stream).current_epoch >= a.until_epoch
        rows = batch_rows(a.writer, b, a.per_batch, a.keys)
        if names:  # only these routing keys (e.g. all in one segment)
            rows = [(names[i % len(names)], p) for i, (_, p) in enumerate(rows)]
        df = m.spark.createDataFrame(rows, "routing_key string, event string")
        result = writer.write_events(df)
        print(f"WROTE {a.writer} {b} {result.event_count} {result.version} {result.retries}", flush=True)
        time.sleep(a.write_pause)
        b += 1


def run_scale(m: ps.StreamManager, a) -> None:
    time.sleep(a.delay)
    while a.after_events and not any(m.tail_stream_cut(a.scope, a.stream).positions.values()):
        time.sleep(0.2)  # scale only once the writers are writing
    for i in range(a.scales):
        segs = sorted(m.segments(a.scope, a.stream, epoch=m.stream_info(a.scope, a.stream).current_epoch).collect(),
                      key=lambda s: s.key_start)
        if i % 2 == 0:  # split the widest segment in two
            s = max(segs, key=lambda s: s.key_end - s.key_start)
            mid = (s.key_start + s.key_end) / 2
            epoch = m.scale_stream(a.scope, a.stream, [s.segment_id], [(s.key_start, mid), (mid, s.key_end)])
        else:  # merge the first two neighbours
            x, y = segs[0], segs[1]
            epoch = m.scale_stream(a.scope, a.stream, [x.segment_id, y.segment_id], [(x.key_start, y.key_end)])
        print(f"SCALED {epoch}", flush=True)
        time.sleep(a.pause)


def run_truncate(m: ps.StreamManager, a) -> None:
    """Take the tail, let the writers go on for a while, then truncate at that earlier tail."""
    time.sleep(a.delay)
    for _ in range(a.truncations):
        cut = m.tail_stream_cut(a.scope, a.stream)
        time.sleep(a.pause)
        m.truncate_stream(a.scope, a.stream, cut)
        print(f"TRUNCATED {cut.as_text()}", flush=True)


def run_txn_commit(m: ps.StreamManager, a) -> None:
    """Commit each transaction (by id, as another process would); print its outcome."""
    writer = m.create_transactional_writer(a.scope, a.stream, writer_id="txn-writer")
    for txn_id in a.txns.split(","):
        try:
            result = writer.get_txn(txn_id).commit()
            print(f"COMMITTED {txn_id} {result.event_count}", flush=True)
        except ps.TxnFailedError as exc:
            print(f"FAILED {txn_id} {type(exc).__name__}", flush=True)


def run_txn_timeout(m: ps.StreamManager, a) -> None:
    """The timeout job, with a clock far in the future (every lease has expired)."""
    for _ in range(a.rounds):
        aborted = m.abort_timed_out_transactions(now=datetime.now(timezone.utc) + timedelta(hours=2))
        for ids in aborted.values():
            for txn_id in ids:
                print(f"ABORTED {txn_id}", flush=True)


def run_idempotent_append(m: ps.StreamManager, a) -> None:
    writer = m.create_event_writer(a.scope, a.stream, writer_id=a.writer)
    df = m.spark.createDataFrame(batch_rows(a.writer, a.number, a.per_batch, a.keys), "routing_key string, event string")
    print("COMMITTING", flush=True)
    result = writer.write_events(df, write_number=a.number)
    print(f"WROTE {a.writer} {a.number} {result.event_count} {result.version}", flush=True)


def large_payload(size: int, seed: int = 7) -> bytes:
    """``size`` deterministic, incompressible-looking bytes."""
    import random

    return random.Random(seed).randbytes(size)


def run_large_stage(m: ps.StreamManager, a) -> None:
    """Start a large event, write SIZE bytes in 1 MiB chunks, report, then wait to be killed
    (or commit it, under a crash failpoint)."""
    writer = m.create_event_writer(a.scope, a.stream, writer_id=a.writer)
    event = writer.stream_event(routing_key="key-0", chunk_size=1 << 20)
    event.write(large_payload(a.size))
    print(f"STAGED {event.transient_id} {event.staged_chunks}", flush=True)
    if a.command == "crash":
        result = event.commit()
        print(f"COMMITTED {result.version}", flush=True)
        return
    time.sleep(600)


def run_compact(m: ps.StreamManager, a) -> None:
    """Compact the stream ROUNDS times (small target: every append's files are small)."""
    time.sleep(a.delay)
    for _ in range(a.rounds):
        result = m.compact(a.scope, a.stream, target_file_size=1 << 20)
        print(f"COMPACTED {result.version} {result.runs} {result.files_removed}", flush=True)
        time.sleep(a.pause)


def run_read_group(m: ps.StreamManager, a) -> None:
    """Read as reader ID of group G until the end of data, writing each batch through the
    group's exactly-once sink at SINK (its rows and per-segment positions in one commit). With
    --stall-after N (after N calls) or --stall-file F (once F exists): stop with the next batch
    that holds events in hand, unwritten, and wait to be killed. A reader taken offline by the
    others (silent too long) joins again, as the README says an application does (the library
    completes a take-over that is half done). Each line ends with the time (s since the epoch)."""
    from pyspark.sql import functions as F

    def rows(events, revision: int):
        return events.select("scope", "stream", "routing_key", F.col("event").cast("string").alias("event"),
                             "segment_id", "offset", F.lit(a.reader).alias("reader"), F.lit(revision).alias("revision"))

    group = m.reader_group(a.scope, a.group)
    reader = group.create_reader(a.reader)
    sink = group.delta_sink(a.sink, rows(m.spark.createDataFrame([], group.batch_schema()), 0).schema)
    calls = 0
    while True:
        try:
            batch = reader.read_next()
            calls += 1
            stall = (a.stall_after and calls > a.stall_after) or (a.stall_file and os.path.exists(a.stall_file))
            if batch.ranges and stall:
                print(f"STALLED {a.reader} {batch.revision} {batch.events.count()} {time.time():.3f}", flush=True)
                time.sleep(600)
            if batch.ranges:
                sink.write(batch, rows(batch.events, batch.revision))
        except ps.ReaderNotInReaderGroupError as e:
            print(f"REJOIN {a.reader} {time.time():.3f} {e}", flush=True)
            reader = group.create_reader(a.reader)
            continue
        print(f"READ {a.reader} {batch.revision} {len(batch.ranges)} {batch.checkpoint} {time.time():.3f}", flush=True)
        if batch.end_of_data:
            break
        time.sleep(a.pause)
    reader.close()
    print(f"DONE {a.reader}", flush=True)


def run_crash(m: ps.StreamManager, a) -> None:
    os.environ["PRAVEGA_SPARK_FAILPOINT"] = a.failpoint
    if a.op == "scale":
        m.scale_stream(a.scope, a.stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    elif a.op == "seal":
        m.seal_stream(a.scope, a.stream)
    elif a.op == "delete-scope":
        m.delete_scope(a.scope)
    elif a.op == "update":  # min_num_segments 2 -> 4: a scale-up inside the update
        m.update_stream(a.scope, a.stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(4)))
    elif a.op == "create":
        m.create_stream(a.scope, a.stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    elif a.op == "delete":
        m.delete_stream(a.scope, a.stream)
    elif a.op == "truncate":
        m.truncate_stream(a.scope, a.stream, ps.StreamCut.from_text(a.cut))
    elif a.op == "idempotent-append":
        run_idempotent_append(m, a)
    elif a.op == "txn-commit":
        run_txn_commit(m, a)
    elif a.op == "large-commit":
        run_large_stage(m, a)
    elif a.op == "append":
        writer = m.create_event_writer(a.scope, a.stream, writer_id="crasher")
        df = crasher_rows(m.spark, a.per_batch, a.keys)
        print("COMMITTING", flush=True)
        writer.write_events(df)
    print("NOT KILLED", flush=True)


def run_read_stream(m: ps.StreamManager, a) -> None:
    """A read_stream query into an idempotent Delta sink; once ``--stall-file`` exists, a batch
    that has been written to the sink (but not yet committed by Spark) stalls until killed."""
    sink = ps.idempotent_delta_sink(a.sink, "copy")

    def write(df, batch_id: int) -> None:
        sink(df, batch_id)
        print(f"WROTE {batch_id}", flush=True)
        if a.stall_file and os.path.exists(a.stall_file):
            print("STALLED", flush=True)
            time.sleep(3600)

    query = (m.read_stream(a.scope, a.stream, max_files_per_trigger=2).writeStream.foreachBatch(write)
             .option("checkpointLocation", a.checkpoint).trigger(processingTime="200 milliseconds").start())
    query.awaitTermination()


def barrier(folder: str, name: str, me: str, parties: int, timeout: float = 180.0) -> None:
    """Wait until ``parties`` processes have reached point ``name`` (a file each in ``folder``)."""
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"{name}.{me}"), "w").close()
    deadline = time.monotonic() + timeout
    while sum(f.startswith(f"{name}.") for f in os.listdir(folder)) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier {name}: the other processes never came")
        time.sleep(0.002)


RACE_CONFIG = dict(scaling_policy=ps.ScalingPolicy.by_event_rate(10, 2, 2),
                   retention_policy=ps.RetentionPolicy.by_time(timedelta(hours=1)))


SUBSCRIBERS_PER_PROCESS = 6


def race_steps(a, root: str, session):
    """The first-ever operations on an empty store at ``root``, in order: (name, step) pairs.
    A step returns what it printed as its outcome; every process runs the same steps."""
    state = {}

    def open_store():
        state["m"] = ps.StreamManager(session, root)
        return "opened"

    def m():  # after a failed open (reported), open again so that the later steps still race
        if "m" not in state:
            state["m"] = ps.StreamManager(session, root)
        return state["m"]

    def write():
        writer = m().create_event_writer("race", "s", writer_id=a.writer)
        writer.write_events(session.createDataFrame(batch_rows(a.writer, 0, 40, 8), "routing_key string, event string"))
        writer.note_time(datetime.now(timezone.utc))
        return "wrote"

    def large():  # a large event's first staged chunk creates the stream's transient table
        event = m().create_event_writer("race", "s", writer_id=a.writer).stream_event(routing_key="big", chunk_size=1024)
        event.write(large_payload(3000))
        event.commit()
        return "committed"

    def group():
        config = ps.ReaderGroupConfig(
            {"race/s": "earliest"}, retention_type=ps.StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT)
        return m().create_reader_group("race", "g", config)

    def read():
        batch = m().reader_group("race", "g").create_reader(a.writer).read_next()
        return len(batch.ranges)

    def subscribe():
        name = f"sub-{a.writer}"
        m().add_subscriber("race", "s", name, 1)
        return m().update_subscriber_stream_cut("race", "s", name, 1, m().head_stream_cut("race", "s"))

    def subscribers():  # back-to-back compare-and-sets of one small table by every process
        for i in range(SUBSCRIBERS_PER_PROCESS):
            m().add_subscriber("race", "s", f"sub-{a.writer}-{i}", 1)
        return "added"

    def sink():  # every process's first append creates the same Delta table
        rows = session.createDataFrame([(a.writer, i) for i in range(10)], "writer string, n int")
        ps.idempotent_delta_sink(os.path.join(root, "sink"), a.writer)(rows, 0)
        return "appended"

    return [("open", open_store),
            ("scope", lambda: m().create_scope("race")),
            ("stream", lambda: m().create_stream("race", "s", ps.StreamConfiguration(**RACE_CONFIG))),
            ("write", write), ("large", large), ("group", group), ("read", read), ("subscribe", subscribe),
            ("subscribers", subscribers),
            ("retention", lambda: len(m().run_retention("race", "s"))),
            ("watermarks", lambda: len(m().compute_watermarks("race", "s"))),
            ("autoscale", lambda: len(m().run_autoscale("race", "s"))), ("sink", sink)]


def run_race(session, a) -> None:
    """ROUNDS rounds, each on a fresh store BASE/round-N: every step of ``race_steps`` starts in
    all PARTIES processes at once (a file barrier per step). Prints ``STEP round name outcome``
    or ``FAILED round name error`` for each step (a failed step does not stop the round)."""
    for r in range(a.rounds):
        root = os.path.join(a.root, f"round-{r}")
        for name, step in race_steps(a, root, session):
            barrier(a.barrier, f"{r}-{name}", a.writer, a.parties)
            try:
                print(f"STEP {r} {name} {step()}", flush=True)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
                print(f"FAILED {r} {name} {type(exc).__name__}: {str(exc).splitlines()[0][:300]}", flush=True)


def run_scope_race(m: ps.StreamManager, a) -> None:
    """ROUNDS rounds on scopes s0, s1, ...: the "deleter" deletes scope sN while the "creator"
    creates stream sN/x, both behind a file barrier (the creator starting 0-0.4 s later, varied
    by round). Prints ``ROUND n role outcome`` (``True`` or the error's class name)."""
    for r in range(a.rounds):
        barrier(a.barrier, str(r), a.writer, 2)
        try:
            if a.writer == "deleter":
                outcome = m.delete_scope(f"s{r}")
            else:
                time.sleep((r % 5) * 0.1)
                outcome = m.create_stream(f"s{r}", "x", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(1)))
        except ps.PravegaSparkError as exc:
            outcome = type(exc).__name__
        print(f"ROUND {r} {a.writer} {outcome}", flush=True)


def run_log_race(m: ps.StreamManager, a) -> None:
    """ROUNDS rounds of two races, each started by all PARTIES processes at once (a file barrier):

    - the session's Delta log store writes version 0 of a fresh log ``R/log-race/<round>/_delta_log``
      with this writer's text: prints ``LOG r WON`` or ``LOG r LOST <exception class>``;
    - one event (key ``race``, payload ``<writer>:<round>``) is appended to ``iot/sensors``:
      prints ``WRITE r <retries>``.
    """
    jvm = m.spark.sparkContext._jvm
    conf = m.spark.sparkContext._jsc.hadoopConfiguration()
    store = jvm.pravegaspark.delta.ConditionalPutLogStore(conf)
    writer = m.create_event_writer(a.scope, a.stream, a.writer)
    for r in range(a.rounds):
        path = jvm.org.apache.hadoop.fs.Path(f"{a.root}/log-race/{r}/_delta_log/00000000000000000000.json")
        barrier(a.barrier, f"log-{r}", a.writer, a.parties)
        try:
            store.write(path, jvm.java.util.ArrayList([f'{{"writer":"{a.writer}"}}']).iterator(), False, conf)
            print(f"LOG {r} WON", flush=True)
        except Exception as exc:  # noqa: BLE001 - the loser's error is the outcome
            text = str(exc)
            lost = next((c for c in ("java.nio.file.FileAlreadyExistsException", "RemoteFileChangedException")
                         if c in text), text.splitlines()[1][:200] if len(text.splitlines()) > 1 else text[:200])
            print(f"LOG {r} LOST {lost}", flush=True)
        barrier(a.barrier, f"write-{r}", a.writer, a.parties)
        result = writer.write_event(f"{a.writer}:{r}", routing_key="race")
        print(f"WRITE {r} {result.retries}", flush=True)


def run_kv_cas(m: ps.StreamManager, a) -> None:
    """Rounds of compare-and-set on one key against the other processes: each round every
    process reads the key's version, waits for all to have read it, then puts at that version.
    Prints ``ROUND <r> WIN <version>`` or ``ROUND <r> LOSE``."""
    kvt = m.key_value_table(a.scope, a.stream)
    key = a.key_list.encode()
    for r in range(a.rounds):
        barrier(a.barrier, f"read{r}", a.writer, a.parties)
        current = kvt.get(key)
        barrier(a.barrier, f"put{r}", a.writer, a.parties)
        try:
            version = kvt.put(key, f"{a.writer}:{r}".encode(), current.version)
            print(f"ROUND {r} WIN {version}", flush=True)
        except ps.BadKeyVersionError:
            print(f"ROUND {r} LOSE", flush=True)
        barrier(a.barrier, f"done{r}", a.writer, a.parties)


def run_kv_puts(m: ps.StreamManager, a) -> None:
    """``--number`` puts and conditional puts of keys of one primary key (``--key-list``), then
    the retries this command made. Prints ``RETRIES <n>``."""
    from pravega_spark import _delta

    kvt = m.key_value_table(a.scope, a.stream)
    primary = a.key_list.encode()
    before = _delta.retries()  # the process's count so far (a warm worker ran earlier commands)
    barrier(a.barrier, "start", a.writer, a.parties)
    for i in range(a.number):
        version = kvt.put(primary + b"%02d" % (i % 8), b"v%d" % i)
        kvt.put(primary + b"%02d" % (i % 8), b"w%d" % i, version)
    print(f"RETRIES {_delta.retries() - before}", flush=True)


def run_warm_up(m: ps.StreamManager, a) -> None:
    """Load the classes a worker uses (for the class-data-sharing archive): a stream written,
    read and scaled."""
    m.create_scope(a.scope)
    m.create_stream(a.scope, a.stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    m.create_event_writer(a.scope, a.stream, "warm-up").write_events(
        m.spark.createDataFrame(batch_rows("warm-up", 0, 100, 8), "routing_key string, event string"))
    m.read_events(a.scope, a.stream).count()
    m.scale_stream(a.scope, a.stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    print("WARM", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["append", "scale", "truncate", "crash", "txn-commit", "txn-timeout",
                                       "idempotent-append", "large-stage", "compact", "read-group",
                                       "read-stream", "warm-up", "race", "scope-race", "log-race", "kv-cas", "kv-puts"])
    p.add_argument("--root", required=True)
    p.add_argument("--scope", default="iot")
    p.add_argument("--stream", default="sensors")
    p.add_argument("--writer", default="w")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--per-batch", type=int, default=50)
    p.add_argument("--keys", type=int, default=8)
    p.add_argument("--key-list", default="", help="comma-separated routing keys to use instead")
    p.add_argument("--scales", type=int, default=2)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--pause", type=float, default=1.0)
    p.add_argument("--write-pause", type=float, default=0.0, help="append: seconds between two batches")
    p.add_argument("--until-epoch", type=int, default=0, help="append: go on until the stream reaches this epoch")
    p.add_argument("--after-events", action="store_true", help="scale: wait for the first events first")
    p.add_argument("--truncations", type=int, default=2)
    p.add_argument("--cut", default="")
    p.add_argument("--failpoint", default="")
    p.add_argument("--op", default="scale")
    p.add_argument("--txns", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--number", type=int, default=0)
    p.add_argument("--size", type=int, default=3 << 20)
    p.add_argument("--group", default="g")
    p.add_argument("--reader", default="r1")
    p.add_argument("--sink", default="")
    p.add_argument("--stall-after", type=int, default=0)
    p.add_argument("--stall-file", default="", help="stall once this file exists")
    p.add_argument("--checkpoint", default="")
    p.add_argument("--parties", type=int, default=1, help="race: how many processes meet at each step")
    p.add_argument("--barrier", default="", help="race: the barrier folder")
    p.add_argument("--backend", default="", help="the Delta backend of this command (PRAVEGA_SPARK_BACKEND)")
    p.add_argument("--clock-offset", type=float, default=0.0,
                   help="run the store's clock this many seconds ahead (the library's internal seam)")
    a = p.parse_args(argv)
    if a.backend:  # ``serve`` puts the environment back after the command
        os.environ["PRAVEGA_SPARK_BACKEND"] = a.backend
    if a.clock_offset:
        from pravega_spark import _delta

        _delta.set_clock(lambda: time.time() + a.clock_offset)
    if a.command == "race":  # opens its stores itself: opening one is a step of the race
        run_race(ps.spark_session(**CONF), a)
        return 0
    if a.command == "crash" and a.op == "upgrade":  # opens a store of another format: no manager
        os.environ["PRAVEGA_SPARK_FAILPOINT"] = a.failpoint
        ps.upgrade_store(ps.spark_session(**CONF), a.root)
        print("NOT KILLED", flush=True)
        return 0
    m = ps.StreamManager(ps.spark_session(**CONF), a.root)
    {"append": run_append, "scale": run_scale, "truncate": run_truncate, "crash": run_crash,
     "txn-commit": run_txn_commit, "txn-timeout": run_txn_timeout,
     "idempotent-append": run_idempotent_append, "large-stage": run_large_stage,
     "compact": run_compact, "read-group": run_read_group, "read-stream": run_read_stream,
     "warm-up": run_warm_up, "scope-race": run_scope_race, "log-race": run_log_race,
     "kv-cas": run_kv_cas, "kv-puts": run_kv_puts}[a.command](m, a)
    return 0


def serve() -> int:
    """A warm worker (``tests.processes.spawn``): make the session, then run commands one after
    another, each read from stdin as a JSON line: ``args`` for this module's ``main`` (or for the
    ``main`` of ``jobs/<job>.py``) and ``env``, the test process's ``PRAVEGA_SPARK_*`` variables.
    Each command's output ends with a sentinel line on stdout (with its exit code) and on stderr.
    After each command the process's environment and the store's clock are as they were."""
    from pravega_spark import _delta

    ps.spark_session(**CONF)
    base = dict(os.environ)
    for line in sys.stdin:
        request = json.loads(line)
        os.environ.clear()
        os.environ.update({k: v for k, v in base.items() if not k.startswith("PRAVEGA_SPARK_") or "CDS" in k})
        os.environ.update(request["env"])
        try:
            if request.get("job"):  # a job of jobs/ (its main), as its own process would run it
                code = importlib.import_module(f"jobs.{request['job']}").main(request["args"])
            else:
                code = main(request["args"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - reported like an uncaught exception of a process of its own
            traceback.print_exc()
            code = 1
        finally:
            os.environ.clear()
            os.environ.update(base)
            _delta.set_clock(None)
        for stream in (sys.stderr, sys.stdout):
            stream.flush()
        sys.stderr.write(SENTINEL + "\n")
        sys.stderr.flush()
        sys.stdout.write(f"{SENTINEL} {code}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["serve"] else main())
