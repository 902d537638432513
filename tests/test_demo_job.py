"""The demo job runs end to end on data_samples/ and reports success."""

from __future__ import annotations

import pytest

from jobs import demo_pipeline


@pytest.mark.slow
def test_demo_pipeline_main(spark, tmp_path, capsys):
    assert demo_pipeline.main(["--root", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "events ingested: 24000, read back: 24000, per-device order violations: 0" in out
    assert "epoch 1" in out and "RESULT: OK" in out
