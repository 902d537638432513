"""The README's quick start runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.connect  # also on a Spark Connect session (the Connect tier): the same code, unchanged
def test_quick_start_runs(spark, tmp_path, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python block"
    namespace = {"root": str(tmp_path / "lake")}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "WriteResult(events=3" in out
    assert namespace["restored"] == namespace["cut"]
    assert "after the cut: 1 in all: 4" in out
    assert not namespace["manager"].check_stream_exists("iot", "sensors")


@pytest.mark.slow  # a whole job/README walk-through: in `make test`, not the inner loop
def test_retention_writers_and_large_events_examples_run(spark, tmp_path, capsys):
    """The truncation/retention, writers and large-events sections, run after the quick start
    (they use its names), in one go: each section costs minutes of Delta commits on 2 cores;
    then the auto-scaling section."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    namespace = {"root": str(tmp_path / "lake")}
    for block in blocks[:4]:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "kept: 3" in out and "TruncationRecord(complete" in out and "RetentionOutcome(iot/metrics" in out
    assert "WriteResult(events=0" in out and "TxnStatus.OPEN WriteResult(events=3" in out
    assert "Watermark([2026-01-01T12:00:00+00:00" in out and "TimeWindow(" in out
    assert "WriteResult(events=1, bytes=20971528" in out and "20971520 True" in out
    autoscaling = next(b for b in blocks if "run_autoscale(" in b)
    exec(compile(autoscaling, "README.md", "exec"), namespace)  # noqa: S102
    assert "AutoscaleOutcome(iot/telemetry: no scale, 0 skipped)" in capsys.readouterr().out


@pytest.mark.slow
def test_reader_group_example_runs(spark, tmp_path, capsys):
    """The reader groups section, after the quick start (it uses its names), then the Structured
    Streaming section (it reads the reader groups' stream)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if "create_reader_group(\"iot\", \"dashboard\"" in b)
    namespace = {"root": str(tmp_path / "lake")}
    for block in (blocks[0], example):
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "6 False" in out and "hourly" in out and "{'iot/clicks': StreamCut(iot/clicks" in out
    assert namespace["group"].online_readers() == []
    streaming = next(b for b in blocks if "read_stream(" in b)
    exec(compile(streaming, "README.md", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "StreamProgress(iot/clicks, batch 0, 0 bytes unread" in out
    assert out.splitlines().count("6") == 2  # the archive and the copied stream each hold the 6 clicks
