"""Several processes doing the first-ever operations on an empty store at the same moment.

Every table that is created on first use (the store's catalogs and reader groups, a stream's
segments and events, writer marks, watermarks, subscribers, the retention set, auto-scaling
marks, a large event's transient table, and a Delta sink that ``ps.idempotent_delta_sink``
appends to) is created here by three processes at once, step by step behind a file barrier, on a
fresh store (``make soak`` repeats the scenario).
Before creation was made safe to race (``DeltaBackend.create_table``), every round failed in at least
one process.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import pravega_spark as ps
from tests.processes import sized, spawn
from tests.workers import SUBSCRIBERS_PER_PROCESS, race_steps

# two processes race each step in make test, three in make soak (two rounds there)
PARTIES, ROUNDS, EVENTS_PER_WRITER = sized(2, 3), sized(1, 2), 40


def table_logs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("_delta_log") if p.is_dir())


def metadata_commits(log: Path) -> int:
    """How many commits of a table's log set its metadata (a table created twice would have two)."""
    count = 0
    for commit in log.glob("*.json"):
        if any("metaData" in json.loads(line) for line in commit.read_text().splitlines() if line.strip()):
            count += 1
    return count


@pytest.mark.process
@pytest.mark.slow
def test_processes_racing_through_the_first_operations_on_empty_stores(spark, tmp_path):
    writers = [f"w{i}" for i in range(PARTIES)]
    procs = [spawn("race", "--root", str(tmp_path / "stores"), "--writer", w, "--rounds", str(ROUNDS),
                   "--parties", str(PARTIES), "--barrier", str(tmp_path / "barrier")) for w in writers]
    outcomes: dict[tuple[int, str], list[str]] = defaultdict(list)
    failures = []
    for w, proc in zip(writers, procs, strict=True):
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{w} exited {proc.returncode}: {err[-3000:]}"
        for line in out.splitlines():
            kind, rnd, step, *rest = line.split(" ", 3)
            if kind == "FAILED":
                failures.append(f"{w} round {rnd} {step}: {rest[0]}")
            elif kind == "STEP":
                outcomes[(int(rnd), step)].append(rest[0])
    assert not failures, "\n".join(failures)

    steps = [name for name, _ in race_steps(None, "", None)]
    for r in range(ROUNDS):
        for step in steps:
            assert len(outcomes[(r, step)]) == PARTIES, (r, step, outcomes[(r, step)])
        got = {step: Counter(outcomes[(r, step)]) for step in steps}
        # exactly one process creates each named thing; the others are told it exists
        for step in ("scope", "stream", "group"):
            assert got[step] == Counter({"True": 1, "False": PARTIES - 1}), (r, step, got[step])
        assert got["open"] == Counter({"opened": PARTIES})
        assert got["write"] == Counter({"wrote": PARTIES})
        assert got["large"] == Counter({"committed": PARTIES})
        assert got["subscribe"] == Counter({"True": PARTIES})
        # the group's two segments went to readers exactly once
        assert sum(int(n) for n in outcomes[(r, "read")]) == 2, outcomes[(r, "read")]
        assert got["retention"] == got["autoscale"] == Counter({"1": PARTIES})  # one outcome per stream each
        assert got["sink"] == Counter({"appended": PARTIES})

        root = tmp_path / "stores" / f"round-{r}"
        manager = ps.StreamManager(spark, str(root))
        validation = manager.validate_stream("race", "s")
        assert validation.success, [x for x in validation.results if not x.success]
        events = manager.read_events("race", "s")
        assert events.count() == PARTIES * (EVENTS_PER_WRITER + 1)  # each writer's events and its large event
        assert [len(r.event) for r in events.where("routing_key = 'big'").collect()] == [3000] * PARTIES
        assert sorted(manager.writer_marks("race", "s"), key=lambda m: m.writer_id)  # the marks table works
        # no commit lost: every process's compare-and-sets of the subscribers table are all there
        assert got["subscribers"] == Counter({"added": PARTIES})
        assert {r_.subscriber for r_ in manager.subscribers("race", "s").collect()} >= (
            {f"sub-{w}" for w in writers} | {f"sub-{w}-{i}" for w in writers for i in range(SUBSCRIBERS_PER_PROCESS)})
        assert [g.reader_group for g in manager.list_reader_groups("race").collect()] == ["g"]
        sink = spark.read.format("delta").load(str(root / "sink"))
        assert sorted((x.writer, x.n) for x in sink.collect()) == sorted((w, i) for w in writers for i in range(10))
        # every table was created once: one commit sets its metadata, none replaced it
        logs = table_logs(root)
        names = {log.parent.name for log in logs}
        assert {"scopes", "streams", "reader_groups", "s", "writer_marks", "subscribers",
                "retention_set", "autoscale", "transient", "sink"} <= names, names
        for log in logs:
            assert metadata_commits(log) == 1, log


def test_a_table_location_holding_a_stray_file_is_refused_and_left_alone(spark, tmp_path):
    """A location that will never be a Delta table (a stray file there) gives a clear error and
    nothing is written; a location that is becoming one (an empty ``_delta_log/``, a creator's
    data files) is used."""
    from pyspark.sql.types import LongType, StructField, StructType

    from pravega_spark import _delta

    schema = StructType([StructField("a", LongType())])
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(ps.TableLocationError, match="notes.txt"):
        _delta.backend_for(spark).create_table(f"file:{stray}", schema)
    assert sorted(os.listdir(stray)) == ["notes.txt"]

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(ps.TableLocationError, match="a file is there"):
        _delta.backend_for(spark).create_table(f"file:{a_file}", schema)
    assert a_file.read_text() == "x"

    becoming = tmp_path / "becoming"
    (becoming / "_delta_log").mkdir(parents=True)
    (becoming / "part-00000-0f.c000.snappy.parquet").write_bytes(b"not committed")  # a creator's orphan
    assert _delta.backend_for(spark).create_table(f"file:{becoming}", schema, rows=[(1,), (2,)]) is True
    assert _delta.backend_for(spark).create_table(f"file:{becoming}", schema, rows=[(3,)]) is False
    assert sorted(r.a for r in _delta.backend_for(spark).read(f"file:{becoming}").collect()) == [1, 2]

    # the store's own creation surfaces it the same way: a stray file where a stream's table goes
    manager = ps.StreamManager(spark, str(tmp_path / "store"))
    manager.create_scope("s")
    events = tmp_path / "store" / "s" / "t"  # the stream's table
    events.mkdir(parents=True)
    (events / "README").write_text("x")
    with pytest.raises(ps.TableLocationError, match="README"):
        manager.create_stream("s", "t")
    assert (events / "README").read_text() == "x"
    # once the operator moves it away, the next call finishes the creation (the row was CREATING)
    (events / "README").unlink()
    assert manager.create_stream("s", "t") is False
    assert manager.stream_info("s", "t").state == "ACTIVE"


def test_small_table_rows_are_the_same_with_or_without_the_checksum_file(spark, tmp_path):
    """A process reading right after another's commit may find the version's checksum file not
    yet written; the rows (aware UTC timestamps) must not depend on it. (The race test above
    caught ``run_autoscale`` comparing a naive timestamp from that path with an aware one.)"""
    from datetime import datetime, timezone

    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    from pravega_spark import _delta
    from pravega_spark.store.store import Store

    schema = StructType([StructField("name", StringType()), StructField("at", TimestampType())])
    path = f"file:{tmp_path / 'small'}"
    when = datetime(2026, 11, 25, 6, 30, 15, 123456, tzinfo=timezone.utc)
    Store(spark, str(tmp_path)).rewrite_rows(path, schema, lambda rows: [("a", when)], "write a row")
    with_checksum = Store(spark, str(tmp_path)).table_rows(path)
    for crc in (tmp_path / "small" / "_delta_log").glob("*.crc"):
        crc.unlink()
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert _delta.table_state(spark, path).files is None  # the other path is taken
    without = Store(spark, str(tmp_path)).table_rows(path)
    assert with_checksum == without == [{"name": "a", "at": when}]


@pytest.mark.process
@pytest.mark.slow
def test_delete_scope_racing_create_stream_leaves_no_stream_in_a_deleted_scope(spark, tmp_path):
    """A process deleting scope sN while another creates stream sN/x, round after round: exactly
    one of the two succeeds, and a deleted scope never keeps a stream (before the scope's deletion
    mark fenced the insert, a round could end with the scope gone and its stream there)."""
    rounds = 6
    root = str(tmp_path / "store")
    manager = ps.StreamManager(spark, root)
    for r in range(rounds):
        manager.create_scope(f"s{r}")
    procs = {role: spawn("scope-race", "--root", root, "--writer", role, "--rounds", str(rounds),
                         "--barrier", str(tmp_path / "barrier")) for role in ("deleter", "creator")}
    outcomes: dict[int, dict[str, str]] = defaultdict(dict)
    for role, proc in procs.items():
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{role} exited {proc.returncode}: {err[-3000:]}"
        for line in out.splitlines():
            if line.startswith("ROUND "):
                _, r, who, outcome = line.split(" ", 3)
                outcomes[int(r)][who] = outcome
    store = manager.controller.store
    for r in range(rounds):
        got = outcomes[r]
        scope_left, stream_left = store.scope_exists(f"s{r}"), store.stream_record(f"s{r}", "x") is not None
        assert scope_left or not stream_left, (r, got)  # no stream in a deleted scope
        assert got in ({"deleter": "True", "creator": "ScopeNotFoundError"},
                       {"deleter": "ScopeNotEmptyError", "creator": "True"}), (r, got)
        assert scope_left == (got["creator"] == "True") == stream_left, (r, got)
    assert [s.scope for s in manager.list_scopes().collect()] == sorted(
        f"s{r}" for r in range(rounds) if outcomes[r]["creator"] == "True")
