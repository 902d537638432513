"""#68's upgrade: the format-2 store that the last format-2 commit wrote (``tests/data``) moved to
format 3 in place, straight through and killed at each of its steps then run again. Afterwards
every stream reads the same events, cuts, retention set, subscribers and watermarks as before,
validates, and keeps its write numbers; the pending scale, the reader group and the key-value
table carry on; the store has the format-3 layout."""

from __future__ import annotations

import json
import os
import signal
import tarfile
from pathlib import Path

import pytest

import pravega_spark as ps
from pravega_spark import cli
from tests.helpers import table_versions
from tests.processes import soak_only, spawn

DATA = Path(__file__).resolve().parents[1] / "data" / "format2_store.tar.gz"


def _format2_store(tmp_path) -> tuple[str, dict]:
    with tarfile.open(DATA) as tar:
        tar.extractall(tmp_path, filter="data")
    return str(tmp_path / "format2-store"), json.loads((tmp_path / "format2-store.expected.json").read_text())


def _assert_upgraded(spark, root: str, expected: dict) -> None:
    manager = ps.StreamManager(spark, root)
    for name, facts in expected.items():
        events = sorted([r.segment_id, r.offset, r.routing_key, r.event.hex()]
                        for r in manager.read_events("iot", name).collect())
        assert events == facts["events"], name
        assert manager.head_stream_cut("iot", name).as_text() == facts["head"], name
        assert manager.tail_stream_cut("iot", name).as_text() == facts["tail"], name
        assert [r.stream_cut for r in manager.retention_set("iot", name).collect()] == facts["retention_set"], name
        assert sorted(r.subscriber for r in manager.subscribers("iot", name).collect()) == facts["subscribers"]
        assert [r.stream_cut for r in manager.watermarks("iot", name).collect()] == facts["watermarks"], name
        validation = manager.validate_stream("iot", name)
        assert validation.success, (name, validation)
        assert os.path.isdir(f"{root}/iot/{name}/_delta_log")
        assert sorted(n for n in os.listdir(f"{root}/iot/{name}") if not n.startswith(("_", ".", "part-"))
                      and "=" not in n) == ["events"]  # the data written before stays where it was
        assert not os.path.exists(f"{root}/iot/{name}/events/_delta_log")
    # the write numbers survive: a repeated one writes nothing
    again = manager.create_event_writer("iot", "scaled", writer_id="w-scaled").write_events(
        spark.createDataFrame([("key-0", b"again")], "routing_key string, event binary"), write_number=3)
    assert again.event_count == 0
    # the scale a killed format-2 process left pending is finished by the next operation
    assert manager.stream_info("iot", "pending").current_epoch == 1
    assert manager.validate_stream("iot", "pending").success
    # the store-level rows moved too
    assert manager.key_value_table("iot", "settings").get(b"k001").value == b"one"
    assert [g.reader_group for g in manager.list_reader_groups("iot").collect()] == ["dashboards"]
    assert manager.reader_group("iot", "dashboards").get_checkpoint("cp-1") is not None
    assert sorted(r.scope for r in manager.list_scopes().collect()) == ["empty", "iot"]
    assert manager.delete_scope("empty")
    assert not os.path.exists(f"{root}/_pravega/reader_groups")
    assert spark.read.format("delta").load(f"{root}/_pravega/streams").count() == 0


@pytest.mark.slow
def test_a_format_2_store_upgraded_in_place_reads_and_validates_as_before(spark, tmp_path, capsys):
    root, expected = _format2_store(tmp_path)
    before = table_versions(spark, root)
    assert cli.main(["--root", root, "upgrade-store"]) == 0  # without --yes: says what it would do
    assert "would upgrade" in capsys.readouterr().out and table_versions(spark, root) == before
    with pytest.raises(ps.StoreFormatError, match="has format 2"):
        ps.StreamManager(spark, root)
    lines = []
    report = ps.upgrade_store(spark, root, progress=lines.append)
    assert report.streams == ["iot/kept", "iot/pending", "iot/scaled", "iot/sealed", "iot/truncated"]
    assert report.reader_groups == 1 and report.key_value_tables == 1 and lines[-1].endswith(repr(report))
    assert ps.upgrade_store(spark, root).already  # a second run has nothing to do
    _assert_upgraded(spark, root, expected)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("point", [
    soak_only("upgrade:after_marker"), "upgrade:after_rows", soak_only("upgrade:mid_log"),
    soak_only("upgrade:after_log"), soak_only("upgrade:mid_clean"), soak_only("upgrade:after_store_rows"),
    soak_only("upgrade:after_catalog")])
def test_an_upgrade_killed_at_a_step_is_finished_by_running_it_again(spark, tmp_path, point):
    root, expected = _format2_store(tmp_path)
    proc = spawn("crash", "--root", root, "--failpoint", point, "--op", "upgrade")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"not killed at {point}: {out}\n{err[-2000:]}"
    with pytest.raises(ps.StoreFormatError, match="being upgraded to format 3: run `pravega-spark --root .* "
                                                  "upgrade-store` to finish"):
        ps.StreamManager(spark, root)
    ps.upgrade_store(spark, root)
    _assert_upgraded(spark, root, expected)
