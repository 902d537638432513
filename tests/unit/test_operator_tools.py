"""The jobs' progress lines and bar, and the CLI's argument checks (no Spark)."""

from __future__ import annotations

import pytest

from jobs._common import Progress
from pravega_spark import cli


def test_progress_prints_a_line_per_stream_a_bar_on_a_terminal_and_a_summary(capsys):
    p = Progress("retention", 2, tty=True)
    p.step("iot/a", "truncated 10 bytes")
    p.step("iot/b", "FAILED: boom", failed=True)
    p.summary("retention: 2 streams")
    out, err = capsys.readouterr()
    assert out.splitlines() == ["[1/2] iot/a: truncated 10 bytes", "[2/2] iot/b: FAILED: boom",
                                "retention: 2 streams; 2 of 2 streams done, 1 failures"]
    assert "retention [" + "#" * 15 + "." * 15 + "] 1/2" in err and "] 2/2" in err
    quiet = Progress("compact", 1, tty=False)
    quiet.step("iot/a", "ok")
    out, err = capsys.readouterr()
    assert out == "[1/1] iot/a: ok\n" and err == ""


@pytest.mark.parametrize("argv, message", [
    (["--root", "r", "describe", "bad name/x"], "InvalidNameError"),
    (["--root", "r", "describe", "no-slash"], "InvalidNameError"),
    (["--root", "r", "cuts", "a/b", "--at", "yesterday"], "not an ISO 8601 time"),
    (["describe", "a/b"], "no store root"),
])
def test_cli_refuses_bad_input_in_one_line_before_starting_spark(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("PRAVEGA_SPARK_ROOT", raising=False)
    assert cli.main(argv) == cli.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_cli_table_aligns_columns():
    text = cli.table([{"a": 1, "bb": "x"}, {"a": 22, "bb": None}])
    assert text.splitlines() == ["a   bb  ", "--  ----", "1   x   ", "22  None"]
