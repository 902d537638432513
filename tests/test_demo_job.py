"""The demo job runs end to end on data_samples/ and reports success, as a new user runs it: with
its default arguments (a relative store root) from whatever the working directory is."""

from __future__ import annotations

import pytest

from jobs import demo_pipeline


@pytest.mark.slow
def test_demo_pipeline_main_with_default_arguments(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert demo_pipeline.main([]) == 0
    out = capsys.readouterr().out
    assert "events ingested: 24000, read back: 24000, per-device order violations: 0" in out
    assert "epoch 1" in out and "RESULT: OK" in out
    assert (tmp_path / "store" / "demo" / "demo" / "telemetry" / "events" / "_delta_log").is_dir()
