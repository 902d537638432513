"""The operator's CLI against a real store, its commands through ``main`` in the test session and
the console script in its own process (exit codes, ``--json``, one-line
errors, ``--yes``), and the pictures' artists matching the stream (boxes per segment, labels,
cut lines): not pixels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from matplotlib.collections import PatchCollection

import pravega_spark as ps
from pravega_spark import plots
from pravega_spark.cli import main as cli_main
from pravega_spark.stream.segments import SegmentRecord, short_segment_name

REPO = Path(__file__).resolve().parents[2]


def artists(figure, gid: str) -> list:
    return [a for ax in figure.axes for a in ax.get_children() if a.get_gid() == gid]


@pytest.mark.slow
def test_epoch_and_retention_pictures_match_the_stream(manager, stream2, spark, tmp_path):
    scope, stream = stream2
    writer = manager.create_event_writer(scope, stream, "w")
    writer.write_events(spark.createDataFrame([(f"k{i}", "e" * 50) for i in range(40)], "routing_key string, event string"))
    manager.scale_stream(scope, stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    manager.add_subscriber(scope, stream, "billing", 1)
    figure = manager.plot_epochs(scope, stream, path=str(tmp_path / "epochs.png"))
    [boxes] = artists(figure, "segments")
    assert isinstance(boxes, PatchCollection) and len(boxes.get_paths()) == 4
    labels = sorted(t.get_text().split("\n")[0] for t in artists(figure, "segment_label"))
    assert labels == sorted(short_segment_name(s) for s in (0, 1, (1 << 32) | 2, (1 << 32) | 3))
    sealed = [t.get_text() for t in artists(figure, "segment_label") if t.get_text().startswith("0.#")]
    assert sealed[0].endswith("B")  # the sealed segment shows its size
    assert len(artists(figure, "head")) == 1 and len(artists(figure, "tail")) == 1
    tail_line = artists(figure, "tail")[0]
    assert len(tail_line.get_xdata()) == 2 * 3  # one vertical stroke per segment of the tail cut
    assert len(artists(figure, "scale")) == 1
    assert (tmp_path / "epochs.png").stat().st_size > 10_000
    manager.create_reader_group(scope, "dashboard", ps.ReaderGroupConfig({f"{scope}/{stream}": "earliest"}))
    group = manager.reader_group(scope, "dashboard")
    reader = group.create_reader("r1")
    reader.read_next()
    group.initiate_checkpoint("c1")
    assert reader.read_next().checkpoint == "c1"
    bars = group.plot()
    assert len(artists(bars, "unread")) == len(group.segment_lag()) >= 1
    retention = manager.plot_retention(scope, stream, path=str(tmp_path / "retention.png"))
    assert len(artists(retention, "subscriber")) == 1 and len(artists(retention, "size")) == 1
    assert len(artists(retention, "checkpoint")) == 1
    assert [t.get_text() for t in artists(retention, "checkpoint_label")] == [f" {scope}/dashboard (checkpoint)"]
    assert (tmp_path / "retention.png").is_file()


def test_a_500_epoch_picture_is_drawn_with_one_collection():
    from datetime import datetime, timedelta

    start = datetime(2026, 1, 1)
    records = [SegmentRecord((e << 32) | e, 0.0, 1.0, start + timedelta(minutes=e), e + 1 if e < 499 else None,
                             100 if e < 499 else None) for e in range(500)]
    figure = plots.epochs_figure("s/t", records)
    [boxes] = artists(figure, "segments")
    assert len(boxes.get_paths()) == 500 and not artists(figure, "segment_label")  # too many to label


def cli(*args: str, root: str) -> subprocess.CompletedProcess:
    """The console script in its own process (its own JVM when the command needs Spark)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_", "SPARK_"))}
    script = Path(sys.executable).with_name("pravega-spark")
    return subprocess.run([str(script), "--root", root, *args], cwd=REPO,
                          env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run(capsys, root):
    """The CLI's ``main`` in this test's process and session (as the console script calls it)."""
    def run_main(*args: str) -> Ran:
        capsys.readouterr()
        code = cli_main(["--root", root, *args])
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run_main


@pytest.mark.slow
def test_the_console_script_starts_spark_quietly_and_refuses_bad_input_in_one_line(stream2, root):
    """Two real processes: a command that starts Spark (its start-up output hidden, --json on
    stdout) and bad input refused before Spark starts (exit code 2, one line)."""
    scope, stream = stream2
    done = cli("--json", "describe", f"{scope}/{stream}", root=root)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["stream"] == f"{scope}/{stream}"
    assert done.stderr.strip() == ""  # Spark's start-up output stays hidden
    done = cli("describe", "bad name/x", root=root)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "InvalidNameError" in done.stderr


@pytest.mark.slow
def test_cli_commands_exit_codes_and_one_line_errors(manager, stream2, root, tmp_path, run):
    scope, stream = stream2
    name = f"{scope}/{stream}"
    done = run("--json", "describe", name)
    assert done.returncode == 0, done.stderr[-3000:]
    described = json.loads(done.stdout)
    assert described["stream"] == name and described["state"] == "ACTIVE" and len(described["segments"]) == 2
    # bad input: one line naming the error, exit code 2, nothing changed
    for args, error in ((["describe", "bad name/x"], "InvalidNameError"),
                        (["describe", f"{scope}/missing"], "StreamNotFoundError"),
                        (["truncate", name, "--cut", "not-a-cut", "--yes"], "InvalidStreamCutError"),
                        (["truncate", name, "--at", "2020-01-01T00:00:00"], "--yes"),
                        (["delete", name], "--yes")):
        done = run(*args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and error in lines[0], (args, done.stderr[-2000:])
    assert manager.stream_info(scope, stream).state == "ACTIVE"
    done = run("--json", "plot", name, "--out", str(tmp_path / "out"))
    assert done.returncode == 0 and len(json.loads(done.stdout)["files"]) == 2
    assert sorted(os.listdir(tmp_path / "out")) == [f"{scope}.{stream}.epochs.png", f"{scope}.{stream}.retention.png"]
    done = run("validate", name)
    assert done.returncode == 0 and done.stdout.startswith(f"OK {name}")
    # listings, cuts, groups, then the commands that change the stream
    assert [r["scope"] for r in json.loads(run("--json", "scopes").stdout)["scopes"]] == [scope]
    assert json.loads(run("--json", "streams", scope).stdout)["streams"] == [
        {"scope": scope, "stream": stream, "state": "ACTIVE"}]
    cuts = json.loads(run("--json", "cuts", name).stdout)
    assert ps.StreamCut.from_text(cuts["tail"]["text"]) == manager.tail_stream_cut(scope, stream)
    manager.create_reader_group(scope, "g", ps.ReaderGroupConfig({name: "earliest"}))
    rows = json.loads(run("--json", "groups", scope).stdout)["segments"]
    assert {(r["group"], r["reader"], r["unread"]) for r in rows} == {("g", "unassigned", 0)} and len(rows) == 2
    done = run("--json", "scale", name, "--seal", "0", "--ranges", "0-0.25,0.25-0.5")
    assert done.returncode == 0 and json.loads(done.stdout)["epoch"] == 1
    assert run("seal", name).returncode == 0
    manager.delete_reader_group(scope, "g")
    done = run("delete", name, "--yes")
    assert done.returncode == 0 and not manager.check_stream_exists(scope, stream)


QUIET_SCRIPT = """
import sys
from datetime import timedelta
import pravega_spark as ps
spark = ps.spark_session()
manager = ps.StreamManager(spark, sys.argv[1])
manager.create_scope("a")
manager.create_stream("a", "b")
manager.create_event_writer("a", "b").write_events(spark.createDataFrame([("k", "v")], "routing_key string, event string"))
manager.truncate_stream("a", "b", manager.tail_stream_cut("a", "b"))
print("vacuumed", len(manager.vacuum("a", "b", retention=timedelta(0))), flush=True)
"""


@pytest.mark.slow
def test_nothing_the_library_runs_prints_to_the_users_stdout(tmp_path):
    """A user's script, in its own process: only what it prints reaches its stdout. Delta's VACUUM
    prints "Deleted N files and directories ..." with Scala's println on the driver's stdout,
    which is the user's: the library logs it instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_", "SPARK_"))}
    done = subprocess.run([sys.executable, "-c", QUIET_SCRIPT, str(tmp_path / "store")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vacuumed "), done.stdout[-3000:]
