"""The Databricks quick-start notebook runs as a plain script (its cells in order) on a local
store, in the test's session as a notebook runs in the cluster's (``ps.spark_session()`` returns
the active session, as Databricks' ``spark`` is)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_quickstart_notebook_runs_as_a_script(spark, tmp_path, monkeypatch, capsys):
    notebook = REPO / "notebooks" / "quickstart.py"
    assert notebook.read_text().startswith("# Databricks notebook source\n")
    assert notebook.read_text().count("# COMMAND ----------") >= 8
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(notebook), str(tmp_path / "store")])
    monkeypatch.setenv("MPLBACKEND", "Agg")
    runpy.run_path(str(notebook), run_name="__main__")  # a cell that raises fails the test with its traceback
    out = capsys.readouterr().out
    assert "QUICKSTART OK" in out
    assert "events before the commit: 70 after: 72" in out
    assert (tmp_path / "store" / "quickstart" / "sensors" / "_delta_log").is_dir()
