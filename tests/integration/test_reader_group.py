"""Reader groups on a real store: the group's state in Delta, readers sharing segments, successors
read only after their predecessors (from offset 0), offline readers, checkpoints, end cuts."""

from __future__ import annotations

import signal
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest

import pravega_spark as ps
from jobs import reader_groups as reader_groups_job
from pravega_spark.store.schema import shard_of
from pravega_spark.store.store import group_key
from tests.conftest import eventually
from tests.helpers import table_versions
from tests.processes import Watched, assert_alive, spawn

S = "iot/sensors"


def _write(manager, batch: int, n: int = 24, keys: int = 6) -> None:
    writer = manager.create_event_writer("iot", "sensors", writer_id=f"w{batch}")
    writer.write_events(manager.spark.createDataFrame(
        [(f"key-{i % keys}", f"{batch}:{i:04d}") for i in range(n)], "routing_key string, event string"))


def _drain(reader, calls: int = 6) -> list:
    """Events of ``calls`` read_next calls, in batch order then (segment, offset) order."""
    out = []
    for _ in range(calls):
        batch = reader.read_next()
        out += [(r.routing_key, r.event.decode(), r.segment_id, r.offset)
                for r in batch.events.orderBy("segment_id", "offset").collect()]
    return out


def _check_exactly_once_in_key_order(read: list, expected: list[str]) -> None:
    assert sorted(e for _, e, _, _ in read) == sorted(expected)  # every event once
    by_key = defaultdict(list)
    for key, event, _, _ in read:
        by_key[key].append(tuple(int(x) for x in event.split(":")))
    for key, seq in by_key.items():
        assert seq == sorted(seq), key  # per key: append order, across batches and segments


def test_create_get_list_delete_and_bad_input_changes_nothing(manager, stream2):
    config = ps.ReaderGroupConfig({S: "earliest"})
    assert manager.create_reader_group("iot", "analytics", config) is True
    assert manager.create_reader_group("iot", "analytics", ps.ReaderGroupConfig({S: "latest"})) is False
    group = manager.reader_group("iot", "analytics")
    assert (group.scope, group.name, group.config, group.generation) == ("iot", "analytics", config, 0)
    assert [r.reader_group for r in manager.list_reader_groups("iot").collect()] == ["analytics"]
    before = table_versions(manager.spark, manager.root.replace("file:", ""))
    with pytest.raises(ps.StreamNotFoundError):
        manager.create_reader_group("iot", "other", ps.ReaderGroupConfig({"iot/missing": "earliest"}))
    with pytest.raises(ps.InvalidConfigError):
        manager.create_reader_group("iot", "other", {S: "earliest"})
    with pytest.raises(ps.InvalidNameError):
        manager.create_reader_group("iot", "bad/name", config)
    assert table_versions(manager.spark, manager.root.replace("file:", "")) == before
    assert manager.delete_reader_group("iot", "analytics") is True
    assert manager.delete_reader_group("iot", "analytics") is False
    with pytest.raises(ps.ReaderGroupNotFoundError):
        manager.reader_group("iot", "analytics")


@pytest.mark.slow
def test_split_and_merge_successors_are_read_after_predecessors_from_offset_zero(manager, stream2):
    _write(manager, 0)
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig({S: "earliest"}))
    reader = manager.reader_group("iot", "g").create_reader("r1")
    read = _drain(reader, 1)
    assert len(read) == 24 and set(reader.position()) == {0, 1}  # one reader owns both segments
    split = manager.scale_stream("iot", "sensors", [0], [(0.0, 0.25), (0.25, 0.5)])
    _write(manager, 1)
    read += _drain(reader, 3)
    new = sorted(r.segment_id for r in manager.segments("iot", "sensors", epoch=split).collect() if r.creation_epoch == split)
    successors = {sid for _, _, sid, _ in read[24:] if sid in new}
    assert successors and min(off for _, _, sid, off in read if sid in new) == 0  # from offset 0
    merged = manager.scale_stream("iot", "sensors", new, [(0.0, 0.5)])
    _write(manager, 2)
    read += _drain(reader, 3)
    assert any(sid >> 32 == merged for _, _, sid, _ in read)
    _check_exactly_once_in_key_order(read, [f"{b}:{i:04d}" for b in range(3) for i in range(24)])


@pytest.mark.connect
def test_two_readers_share_segments_then_offline_with_a_position_and_rejoin(manager, stream2):
    manager.scale_stream("iot", "sensors", [0, 1], [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)])
    start = manager.tail_stream_cut("iot", "sensors")  # the four new segments, at 0
    _write(manager, 0, n=40, keys=20)
    # no automatic checkpoint: on a slow machine (or over Connect) its 30 s can pass before a read
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig({S: start}, automatic_checkpoint_interval=None))
    group = manager.reader_group("iot", "g")
    r1, r2 = group.create_reader("r1"), group.create_reader("r2")
    b1, b2 = r1.read_next(), r2.read_next()
    assert len(b1.position) == 2 and len(b2.position) == 2 and not set(b1.position) & set(b2.position)
    first = b1.events.count() + b2.events.count()
    assert first == 40 and sorted(group.online_readers()) == ["r1", "r2"]
    mid = {sid: off for sid, off in b1.position.items()}
    group.reader_offline("r1", mid)  # its segments go back at that position
    _write(manager, 1, n=40, keys=20)
    later = r2.read_next()  # acquires r1's segments: the new events of all four segments
    assert later.events.count() == 40 and len(later.position) == 4
    with pytest.raises(ps.IllegalStateError):
        r1.read_next()  # offline
    r1 = group.create_reader("r1")
    for _ in range(3):
        r1.read_next(), r2.read_next()
    sizes = sorted(len(r.position()) for r in (r1, r2))
    assert sizes == [2, 2]


@pytest.mark.slow
def test_offline_without_a_position_rereads_from_the_last_checkpoint(manager, stream2, root):
    _write(manager, 0)
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig(  # no automatic checkpoint: a slow machine's
        {S: "earliest"}, max_outstanding_checkpoints=1, automatic_checkpoint_interval=None))  # would start one
    group = manager.reader_group("iot", "g")
    r1, r2 = group.create_reader("r1"), group.create_reader("r2")
    assert r1.read_next().events.count() + r2.read_next().events.count() == 24
    group.initiate_checkpoint("cp-1")
    with pytest.raises(ps.MaxNumberOfCheckpointsExceededError):
        group.initiate_checkpoint("cp-2")
    batch = r1.read_next()
    assert batch.checkpoint == "cp-1" and batch.events.count() == 0
    assert group.get_checkpoint("cp-1") is None  # r2 has not reached it
    assert r2.read_next().checkpoint == "cp-1"
    cuts = group.get_checkpoint("cp-1")
    assert cuts == {S: manager.tail_stream_cut("iot", "sensors")}
    _write(manager, 1)
    seen = r1.read_next().events.count()
    group.reader_offline("r1")  # no position: back to the checkpoint's offsets (at-least-once)
    again = r2.read_next().events.count() + r2.read_next().events.count()
    assert again == 24 and seen <= 24  # r1's share is read again, nothing is lost
    tail = manager.tail_stream_cut("iot", "sensors")
    assert group.get_stream_cuts()[S] != tail and group.unread_bytes() > 0  # lags: r2 has not refreshed yet
    store = manager.controller.store
    members = f"_pravega/s{shard_of(group_key('iot', 'g'), store.shards)}/reader_group_members"
    revision, before = group.state().revision, table_versions(manager.spark, root).get(members, -1)
    now = group.now()
    group._clock = lambda: now + 10_000  # the refresh interval has passed
    assert r2.read_next().events.count() == 0  # records its positions in its member row, not in the group's
    assert group.state().revision == revision
    assert table_versions(manager.spark, root)[members] > before
    assert group.get_stream_cuts() == {S: tail} and group.unread_bytes() == 0


def test_end_cut_then_end_of_data(manager, stream2):
    _write(manager, 0)
    end = manager.tail_stream_cut("iot", "sensors")
    _write(manager, 1)  # after the end cut: never read
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig({S: ("earliest", end)}))
    group = manager.reader_group("iot", "g")
    batch = group.create_reader("r1").read_next()
    assert sorted(r.event.decode() for r in batch.events.collect()) == sorted(f"0:{i:04d}" for i in range(24))
    assert not batch.end_of_data  # the segments complete on the next call, once this batch is processed
    group.reader_offline("r1")  # r1 died with the batch in hand: its segments go back, none completed
    reader = group.create_reader("r2")
    again = reader.read_next()
    assert sorted(r.event.decode() for r in again.events.collect()) == sorted(f"0:{i:04d}" for i in range(24))
    last = reader.read_next()
    assert last.end_of_data and last.events.count() == 0 and last.revision > batch.revision


@pytest.mark.slow
def test_retention_types_subscribe_publish_and_drive_run_retention(manager, stream2):
    manager.create_stream("iot", "c", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2),
                                                             retention_policy=ps.RetentionPolicy.by_size_bytes(0)))
    writer = manager.create_event_writer("iot", "c", writer_id="w")
    first = writer.write_events(manager.spark.createDataFrame(
        [(f"key-{i % 4}", f"0:{i:04d}") for i in range(20)], "routing_key string, event string")).tail_stream_cut
    kinds = {"auto": ps.StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT,
             "manual": ps.StreamDataRetention.MANUAL_RELEASE_AT_USER_STREAMCUT, "none": ps.StreamDataRetention.NONE}
    for name, kind in kinds.items():
        manager.create_reader_group("iot", name, ps.ReaderGroupConfig({"iot/c": "earliest"}, retention_type=kind))
    subs = {r.subscriber: (r.generation, list(r.stream_cut)) for r in manager.subscribers("iot", "c").collect()}
    assert subs == {"iot/auto": (0, []), "iot/manual": (0, [])}  # NONE is no subscriber; nothing published yet
    auto, manual = manager.reader_group("iot", "auto"), manager.reader_group("iot", "manual")
    with pytest.raises(ps.InvalidConfigError, match="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"):
        auto.update_retention_stream_cut({"iot/c": first})
    reader = auto.create_reader("r1")
    assert reader.read_next().events.count() == 20
    writer.write_events(manager.spark.createDataFrame([("key-1", "1:0000")], "routing_key string, event string"))
    manual.update_retention_stream_cut({"iot/c": manager.tail_stream_cut("iot", "c")})  # ahead of auto
    auto.initiate_checkpoint("cp-1")
    assert reader.read_next().checkpoint == "cp-1"  # completes the checkpoint: its cuts are published
    published = {r.subscriber: {e.segment_id: e.offset for e in r.stream_cut}
                 for r in manager.subscribers("iot", "c").collect()}
    assert published["iot/auto"] == dict(first.positions)
    run = [o for o in manager.run_retention(scope="iot", stream="c")][0]
    assert run.truncated_at == first and manager.head_stream_cut("iot", "c") == first  # exactly the group's cut
    assert manager.delete_reader_group("iot", "auto") is True
    assert [r.subscriber for r in manager.subscribers("iot", "c").collect()] == ["iot/manual"]
    old_handle = manager.reader_group("iot", "manual")  # taken before the reset
    manual.reset_reader_group(ps.ReaderGroupConfig({"iot/c": "earliest"}))  # to NONE: unsubscribed
    assert manual.generation == 1 and manager.subscribers("iot", "c").count() == 0
    with pytest.raises(ps.IllegalStateError, match="was reset"):
        old_handle.create_reader("late")


def test_automatic_checkpoints_republication_and_silent_readers_taken_offline(manager, stream2, capsys):
    _write(manager, 0)
    config = ps.ReaderGroupConfig({S: "earliest"}, automatic_checkpoint_interval=timedelta(seconds=30),
                                  retention_type=ps.StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT)
    manager.create_reader_group("iot", "g", config)
    group = manager.reader_group("iot", "g")
    base = group.state().last_checkpoint_ms
    clock = [base]
    group._clock = lambda: clock[0]
    r1, r2 = group.create_reader("r1"), group.create_reader("r2")
    clock[0] = base + 29_999  # just before the interval: plain reads
    assert r1.read_next().checkpoint is None and r2.read_next().checkpoint is None
    clock[0] = base + 30_000
    first = r1.read_next().checkpoint
    assert first == f"auto-{base + 30_000}" and r1.read_next().checkpoint is None  # r1 acknowledged it
    crash = RuntimeError("process died between the state commit and the publication")

    def publish_fails(cuts):
        raise crash
    group._publish = publish_fails
    with pytest.raises(RuntimeError):
        r2.read_next()  # completes the checkpoint, then "dies" before publishing
    del group._publish
    cut = group.get_checkpoint(first)[S]
    assert cut == manager.tail_stream_cut("iot", "sensors")
    assert [list(r.stream_cut) for r in manager.subscribers("iot", "sensors").collect()] == [[]]
    clock[0] = base + 60_000
    assert r1.read_next().checkpoint == f"auto-{base + 60_000}"  # the next one re-publishes the first
    published = manager.subscribers("iot", "sensors").collect()[0].stream_cut
    assert {e.segment_id: e.offset for e in published} == dict(cut.positions)
    # r2 has been silent since base + 30 s; the job takes it offline at the next minute
    now = datetime.fromtimestamp((base + 90_000) / 1000, tz=timezone.utc).isoformat()
    assert reader_groups_job.main(["--root", manager.root, "--scope", "iot", "--silence-seconds", "60",
                                   "--now", now]) == 0
    assert "1 silent readers taken offline" in capsys.readouterr().out
    assert group.online_readers() == ["r1"]
    with pytest.raises(ps.IllegalStateError, match="offline"):
        r2.read_next()
    assert group.get_checkpoint(f"auto-{base + 60_000}") is not None  # offline readers count as done
    with pytest.raises(ps.InvalidConfigError):
        group.offline_silent_readers(timedelta(0))


def _lines(proc) -> list[str]:
    """The process's stdout lines, collected by a thread as they come."""
    out: list[str] = []
    threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    return out


def _group_commits(spark, root: str) -> int:
    """Commits to the group tables (the coordinator's and the members'), creations left out."""
    versions = table_versions(spark, root)
    return sum(v for p, v in versions.items() if p.endswith(("/reader_groups", "/reader_group_members")))


def _sink_rows(spark, sink: str) -> list:
    rows = spark.read.format("delta").load(sink).collect()
    return [(r.routing_key, r.event, r.segment_id, r.offset)
            for r in sorted(rows, key=lambda r: (r.revision, r.segment_id, r.offset))]


def _scale_current(manager, index: int) -> None:
    """Split the current epoch's ``index``-th segment (by key) in two."""
    segs = sorted(manager.segments("iot", "sensors", epoch=manager.stream_info("iot", "sensors").current_epoch)
                  .collect(), key=lambda s: s.key_start)
    s = segs[index]
    middle = (s.key_start + s.key_end) / 2
    manager.scale_stream("iot", "sensors", [s.segment_id], [(s.key_start, middle), (middle, s.key_end)])


@pytest.mark.process
@pytest.mark.slow
def test_three_reader_processes_tail_a_scaled_and_truncated_stream_at_pravegas_commit_rate(spark, manager, stream2,
                                                                                           root, tmp_path):
    """Pravega's write rule: readers commit group state only for ownership changes, checkpoints
    and a refresh every 10 s, so three readers tailing a stream for a minute commit at most
    0.15 times per reader per second, while the group's sink gets every event once, in key order."""
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig({S: "earliest"}))
    sink = str(tmp_path / "sink")
    readers = ["A", "B", "C"]
    procs = {r: spawn("read-group", "--root", root, "--reader", r, "--sink", sink, "--pause", "0.5") for r in readers}
    group = manager.reader_group("iot", "g")
    eventually(lambda: group.online_readers() == readers, timeout=180)  # the JVMs started and joined

    def settled() -> bool:  # the joins' rebalancing done: both segments held, each by its own reader
        state = group.state()
        return not state.unassigned and sum(map(len, state.assigned.values())) == 2 and all(
            len(held) <= 1 for held in state.assigned.values())

    # counted from here: the joins' ownership changes (how many depends on when each reader joined
    # relative to the others' first reads) are not the steady state this measures
    eventually(settled, timeout=180)
    written, started, created = 0, time.monotonic(), _group_commits(spark, root)
    while time.monotonic() - started < 60:
        _write(manager, written, n=60, keys=12)
        written += 1
        elapsed = time.monotonic() - started
        if written == 8:
            _scale_current(manager, 0)
        if written == 14:  # truncate where the group has processed (its recorded positions)
            manager.truncate_stream("iot", "sensors", group.get_stream_cuts()[S])
        assert all(p.poll() is None for p in procs.values()), {r: p.stderr.read()[-2000:] for r, p in procs.items()
                                                               if p.poll() is not None}
        time.sleep(max(0.0, 2.5 - (time.monotonic() - started - elapsed)))
    manager.seal_stream("iot", "sensors")
    for r, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and f"DONE {r}" in out and "REJOIN" not in out, err[-3000:]
    duration = time.monotonic() - started
    commits = _group_commits(spark, root) - created
    rate = commits / len(readers) / duration
    print(f"group commits: {commits} in {duration:.0f} s: {rate:.3f} per reader per second")
    assert rate <= 0.15
    _check_exactly_once_in_key_order(_sink_rows(spark, sink), [f"{b}:{i:04d}" for b in range(written) for i in range(60)])


@pytest.mark.process
@pytest.mark.slow
def test_a_reader_killed_mid_batch_is_taken_over_after_the_silence_limit(spark, manager, stream2, root, tmp_path):
    """A reader SIGKILLed with a batch in hand is not restarted: after the group's silence limit
    the survivors take its segments at the offsets the sink holds, and the sink has every event
    exactly once, in key order. Any survivor exiting fails the test at once with its output; a
    timeout prints the group's state, its member rows and the clock."""
    manager.scale_stream("iot", "sensors", [0, 1], [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)])
    written = 0
    _write(manager, written, n=80, keys=16)
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig(
        {S: "earliest"}, automatic_checkpoint_interval=None, position_refresh_interval=timedelta(seconds=2),
        reader_silence_limit=timedelta(seconds=10)))
    group = manager.reader_group("iot", "g")
    sink, stall = str(tmp_path / "sink"), tmp_path / "stall-A"
    workers = {r: Watched(r, spawn("read-group", "--root", root, "--reader", r, "--sink", sink, "--pause", "0.3",
                                   *(["--stall-file", str(stall)] if r == "A" else []))) for r in "ABC"}
    survivors = [workers["B"], workers["C"]]

    def wait_for(condition, what: str, timeout: float):
        deadline = time.monotonic() + timeout
        while not condition():
            assert_alive(survivors)
            if time.monotonic() > deadline:
                state = group.state()
                raise AssertionError(
                    f"{what}: not within {timeout:.0f} s; clock {time.time() * 1000:.0f} ms; state {state.to_json()}; "
                    f"member rows {group._members(state)}\n" + "\n".join(w.report() for w in workers.values()))
            time.sleep(0.3)

    def has_read(worker: Watched) -> bool:  # a READ line with segment ranges: the worker is warm
        return any(ln.startswith(f"READ {worker.name}") and int(ln.split()[3]) > 0 for ln in list(worker.out))

    wait_for(lambda: group.online_readers() == ["A", "B", "C"], "all three joined", 120)
    while not all(has_read(w) for w in workers.values()):  # every reader has written a batch
        written += 1
        _write(manager, written, n=80, keys=16)
        assert workers["A"].alive() and written < 60, workers["A"].report()
        assert_alive(survivors)
        time.sleep(1)
    stall.touch()  # A stops with its next batch of events in hand, unwritten
    while not any(line.startswith("STALLED") for line in list(workers["A"].out)):
        written += 1
        _write(manager, written, n=80, keys=16)
        assert workers["A"].alive() and written < 90, workers["A"].report()
        time.sleep(0.5)
    workers["A"].proc.send_signal(signal.SIGKILL)
    workers["A"].wait(timeout=60)
    assert int([ln for ln in workers["A"].out if ln.startswith("STALLED")][0].split()[3]) > 0  # it held events
    # a survivor starved of CPU past the silence limit is taken offline too and joins again (the
    # documented path, which its worker follows): wait until A is out and both survivors are in
    wait_for(lambda: set(group.online_readers()) == {"B", "C"}, "the survivors took A offline and are online", 90)
    written += 1
    _write(manager, written, n=80, keys=16)
    manager.seal_stream("iot", "sensors")
    for w in survivors:
        code = w.wait(timeout=300)
        assert code == 0 and f"DONE {w.name}" in "".join(w.out), w.report()
    read = _sink_rows(spark, sink)
    assert {r.reader for r in spark.read.format("delta").load(sink).select("reader").distinct().collect()} == set("ABC")
    _check_exactly_once_in_key_order(read, [f"{b}:{i:04d}" for b in range(written + 1) for i in range(80)])
    assert group.online_readers() == [] and group.get_stream_cuts() == {S: ps.StreamCut(S, {})}


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.both_backends
def test_a_reader_rejoining_during_a_half_done_take_over_completes_it_and_reads_on(spark, manager, stream2, tmp_path,
                                                                                  monkeypatch, caplog, delta_backend):
    """The README's "join again" while a take-over is half done (the remover fenced the reader's
    segments in the sink and has not removed it from the group yet): ``create_reader`` completes
    the take-over at the sink's offsets and joins; the remover's late removal leaves the new join
    alone; the readers go on and the sink has every event exactly once."""
    _write(manager, 0)
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig(
        {S: "earliest"}, automatic_checkpoint_interval=None, reader_silence_limit=None))  # taken offline by hand
    group = manager.reader_group("iot", "g")
    sink = group.delta_sink(str(tmp_path / "sink"))
    slow, live = group.create_readers(["slow", "live"])
    assert sink.write(slow.read_next()) == 1 and sink.write(live.read_next()) == 1
    _write(manager, 1)
    held = slow.read_next()  # in hand, not yet written
    assert held.ranges
    incarnation = group.state().incarnations["slow"]
    remover = manager.reader_group("iot", "g")  # another handle (another process, in effect)
    release = tmp_path / "release"
    monkeypatch.setenv("PRAVEGA_SPARK_HOLD", f"offline:after_fence={release}")  # between the fence and the removal
    thread = threading.Thread(target=remover.reader_offline, args=("slow",))
    thread.start()
    eventually(lambda: (tmp_path / "release.held").exists(), timeout=60)  # the remover is between its commits
    monkeypatch.delenv("PRAVEGA_SPARK_HOLD")
    assert sink.taken_over("slow", incarnation)
    assert "slow" in group.online_readers()  # half done: fenced, still listed
    with pytest.raises(ps.ReaderNotInReaderGroupError, match="handed to another reader"):
        sink.write(held)
    with caplog.at_level("WARNING", logger="pravega_spark"):
        rejoined = group.create_reader("slow")  # join again, as the README says
    assert "rejoined during their take-over" in caplog.text
    release.touch()  # the remover goes on to its removal
    thread.join(timeout=120)
    assert not thread.is_alive() and sorted(group.online_readers()) == ["live", "slow"]  # the late removal: no-op
    for _ in range(12):
        for r in (rejoined, live):
            batch = r.read_next()
            if batch.ranges:
                sink.write(batch)
        if sink.read().count() >= 48:
            break
    rows = sink.read()
    assert rows.count() == 48 and rows.select("segment_id", "offset").distinct().count() == 48
    assert {bytes(r.event) for r in rows.select("event").collect()} == {f"{b}:{i:04d}".encode() for b in (0, 1) for i in range(24)}


@pytest.mark.both_backends(slow=("sql",))
def test_a_zombie_reader_cannot_write_segments_it_no_longer_owns(spark, manager, stream2, tmp_path, delta_backend):
    """``create_readers`` shares the segments in one commit; a reader declared dead (silent past
    the limit) while it still runs is fenced in the group's sink: its batch is refused, the new
    owner's is written, and the zombie's next read says it is offline."""
    _write(manager, 0)
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig(
        {S: "earliest"}, automatic_checkpoint_interval=None, position_refresh_interval=timedelta(seconds=1),
        reader_silence_limit=timedelta(seconds=2)))
    group = manager.reader_group("iot", "g")
    clock = [group.now()]
    group._clock = lambda: clock[0]  # the group's clock, not the machine's load, says who is silent
    revision = group.state().revision
    zombie, live = group.create_readers(["zombie", "live"])
    assert group.state().revision == revision + 1  # one commit: both joined with a segment each
    assert zombie.position() == {0: 0} and live.position() == {1: 0}
    sink = group.delta_sink(str(tmp_path / "sink"))
    held = zombie.read_next()  # in hand, not yet written
    assert sink.write(live.read_next()) == 1
    clock[0] += 3_000  # the zombie stays silent past the limit
    taken = live.read_next()  # refreshes, takes the zombie offline (fenced in the sink), reads its segment
    assert group.online_readers() == ["live"]
    with pytest.raises(ps.ReaderNotInReaderGroupError, match="handed to another reader"):
        sink.write(held)
    assert taken.ranges == {(S, 0): (0, held.ranges[(S, 0)][1])} and sink.write(taken) == 1
    assert sink.write(taken) == 0  # a replay writes nothing
    with pytest.raises(ps.ReaderNotInReaderGroupError, match="offline"):
        zombie.read_next()
    rows = sink.read()
    assert rows.count() == 24 and rows.select("segment_id", "offset").distinct().count() == 24


def test_segments_truncated_away_while_owned_are_left_for_the_head(manager, stream2, caplog):
    _write(manager, 0)
    manager.create_reader_group("iot", "g", ps.ReaderGroupConfig({S: "earliest"}))
    reader = manager.reader_group("iot", "g").create_reader("r1")
    assert reader.read_next().events.count() == 24  # owns segments 0 and 1, at their tails
    manager.scale_stream("iot", "sensors", [0, 1], [(0.0, 0.5), (0.5, 1.0)])
    _write(manager, 1)
    cut = manager.tail_stream_cut("iot", "sensors")
    _write(manager, 2)
    manager.truncate_stream("iot", "sensors", cut)  # 0 and 1 deleted whole, batch 1 gone too
    read = _drain(reader, 3)
    assert "truncated away" in caplog.text
    assert sorted(e for _, e, _, _ in read) == sorted(f"2:{i:04d}" for i in range(24))  # from the head on
