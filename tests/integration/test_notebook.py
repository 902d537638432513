"""The Databricks quick-start notebook runs as a plain script (its cells in order) on a local
session and store, and prints no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_quickstart_notebook_runs_as_a_script(tmp_path):
    notebook = REPO / "notebooks" / "quickstart.py"
    assert notebook.read_text().startswith("# Databricks notebook source\n")
    assert notebook.read_text().count("# COMMAND ----------") >= 8
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_", "SPARK_"))}
    done = subprocess.run([sys.executable, str(notebook), str(tmp_path / "store")], cwd=tmp_path,
                          env=dict(env, PYTHONPATH=str(REPO), MPLBACKEND="Agg"), capture_output=True, text=True,
                          timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "QUICKSTART OK" in done.stdout and "Traceback" not in out
    assert "events before the commit: 70 after: 72" in done.stdout
    assert (tmp_path / "store" / "quickstart" / "sensors" / "events" / "_delta_log").is_dir()
