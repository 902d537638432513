"""The demo job runs end to end on data_samples/ and reports success, as a new user runs it: with
its default arguments (a relative store root) from whatever the working directory is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from jobs import compact as compact_job
from jobs import demo_pipeline
from jobs import vacuum as vacuum_job
from jobs import validate as validate_job

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv"


@pytest.mark.slow
def test_demo_pipeline_main_with_default_arguments_then_the_validation_job(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert demo_pipeline.main([]) == 0
    out = capsys.readouterr().out
    assert "events ingested: 24000, read back: 24000, per-device order violations: 0" in out
    assert "epoch 1" in out and "RESULT: OK" in out
    assert "invariants: StreamValidation(demo/telemetry, success=True" in out
    events = tmp_path / "store" / "demo" / "demo" / "telemetry"
    assert (events / "_delta_log").is_dir()

    # the validation job on the demo's store, as an operator runs it (relative paths)
    assert validate_job.main(["--root", "store/demo", "--docs", "docs"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] demo/telemetry: OK: 23 expectations" in out and "validate: 1 streams, 0 key-value tables, 0 with violations" in out
    assert (tmp_path / "docs" / "demo" / "telemetry" / "index.html").is_file()

    # the compaction job merges the demo's small files; every offset stays where it was
    before = sorted((r.segment_id, r.offset) for r in demo_pipeline_rows(spark))
    assert compact_job.main(["--root", "store/demo"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] demo/telemetry: COMPACTED version " in out and "compact: 1 streams" in out
    assert sorted((r.segment_id, r.offset) for r in demo_pipeline_rows(spark)) == before
    assert "1 of 1 streams done, 0 failures" in out  # each job walking the store ends with a summary

    # the vacuum job: one line per stream, one for the store's own tables (each once), then the summary
    assert vacuum_job.main(["--root", "store/demo"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] demo/telemetry: VACUUMED 1 tables" in out and "1 of 1 streams done, 0 failures" in out
    assert re.search(r"store tables: VACUUMED [1-9][0-9]* tables", out), out
    assert validate_job.main(["--root", "store/demo"]) == 0
    capsys.readouterr()

    # the README's two group-reader processes, as written, from the same working directory
    (tmp_path / ".venv").symlink_to(Path(sys.executable).resolve().parent.parent if not VENV.is_dir() else VENV)
    (tmp_path / "jobs").symlink_to(REPO / "jobs")
    block = next(b for b in re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
                 if "group_reader.py" in b)
    done = subprocess.run(["bash", "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.count("batches") == 2, done.stderr[-3000:]
    sink = spark.read.format("delta").load(str(tmp_path / "store" / "dashboard"))
    assert sink.count() == 24000 and sink.select("segment_id", "offset").distinct().count() == 24000
    # which reader reads what depends on when each joins (the first takes every segment on its
    # first read, as in Pravega): the guarantee is each event once, in order per key
    assert {r.reader for r in sink.select("reader").distinct().collect()} <= {"reader-1", "reader-2"}
    per_key = Window.partitionBy("routing_key").orderBy("revision", "segment_id", "offset")
    seq = F.get_json_object(F.col("event").cast("string"), "$.seq").cast("long")
    assert sink.withColumn("n", F.row_number().over(per_key) - 1).where(seq != F.col("n")).count() == 0

    # a row written twice behind the library's back: the job reports it and fails
    row = spark.read.format("delta").load(str(events)).where(F.col("record_type") == 0).limit(1)
    row.write.format("delta").mode("append").save(str(events))
    assert validate_job.main(["--root", "store/demo", "--scope", "demo", "--stream", "telemetry"]) == 1
    out = capsys.readouterr().out
    assert "[1/1] demo/telemetry: FAILED: " in out and "  offsets_unique: 1 of " in out
    assert validate_job.main(["--root", "store/demo", "--scope", "demo", "--stream", "nope"]) == 2



def demo_pipeline_rows(spark):
    import pravega_spark as ps

    return ps.StreamManager(spark, "store/demo").read_events("demo", "telemetry").select("segment_id", "offset").collect()
