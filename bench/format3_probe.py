"""Probes P1, P2 and P10 of #68 (``docs/notes/issue68_design.md`` §6): a format-2 stream's events
table whose log is rewritten one level up, at ``<stream>/_delta_log``, every file path prefixed with
``events/`` (no data file moves). Nothing here is the library's code: it checks the Delta
behaviour the upgrade's design assumes, on a classic session.

- P1: the table at ``<stream>`` reads the same rows as ``<stream>/events`` (Spark, delta-rs,
  Polars); a DELETE (a truncation), an append, OPTIMIZE and VACUUM work on it, and VACUUM deletes
  no file the log references.
- P2: the rewritten log loads at the same version with the same table id, commits V+1, and a
  streaming query whose checkpoint was made on ``<stream>/events`` goes on on ``<stream>``; the
  rewrite's time for a log of N commits.
- P10: VACUUM of ``<stream>`` leaves ``events/_delta_log`` (a hidden directory) alone; what
  ``load("<stream>/events")`` gives once that log is gone.

Usage: .venv/bin/python bench/format3_probe.py [--commits 120] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps  # noqa: E402

PREFIX = "events/"


def prefixed(path: str) -> str:
    """A log path one level down from the new root: relative paths only (absolute ones and
    paths with a scheme name their file wherever the table is)."""
    return path if (":" in path.split("/")[0] or path.startswith("/")) else PREFIX + path


def rewrite_action(action: dict) -> dict:
    for kind in ("add", "remove", "cdc"):
        if kind in action and action[kind].get("path"):
            action[kind]["path"] = prefixed(action[kind]["path"])
    return action


def rewrite_checkpoint(source: Path, target: Path) -> None:
    """A checkpoint parquet with ``add.path`` and ``remove.path`` prefixed, same schema."""
    table = pq.read_table(source)
    for kind in ("add", "remove"):
        if kind not in table.column_names:
            continue
        column = table.column(kind).combine_chunks()
        fields = [column.field(i) for i in range(column.type.num_fields)]
        names = [column.type.field(i).name for i in range(column.type.num_fields)]
        paths = fields[names.index("path")]
        relative = pc.invert(pc.or_(pc.starts_with(paths, "/"), pc.match_substring_regex(paths, r"^[a-zA-Z][\w+.-]*:")))
        fields[names.index("path")] = pc.if_else(pc.and_(pc.is_valid(paths), relative),
                                                 pc.binary_join_element_wise(PREFIX, paths, ""), paths)
        rebuilt = pa.StructArray.from_arrays(fields, fields=list(column.type), mask=column.is_null())
        table = table.set_column(table.column_names.index(kind), table.schema.field(kind), rebuilt)
    pq.write_table(table, target)


def relocate_log(events_dir: Path, stream_dir: Path) -> dict:
    """Write ``stream_dir/_delta_log`` from ``events_dir/_delta_log``: the latest checkpoint, the
    commits and checksums after it, ``_last_checkpoint``. Returns counts and seconds."""
    started = time.perf_counter()
    source, target = events_dir / "_delta_log", stream_dir / "_delta_log"
    target.mkdir()
    last = json.loads((source / "_last_checkpoint").read_text()) if (source / "_last_checkpoint").exists() else None
    since = last["version"] if last else -1
    counts = {"commits": 0, "checksums": 0, "checkpoint_files": 0, "checkpoint_bytes": 0}
    for entry in sorted(source.iterdir()):
        name = entry.name
        version = int(name.split(".")[0]) if name[:1].isdigit() else None
        if version is None:
            continue
        if ".checkpoint" in name and version == since:
            rewrite_checkpoint(entry, target / name)
            counts["checkpoint_files"] += 1
            counts["checkpoint_bytes"] += entry.stat().st_size
        elif name.endswith(".json") and version > since:
            lines = [json.dumps(rewrite_action(json.loads(line))) for line in entry.read_text().splitlines() if line]
            (target / name).write_text("\n".join(lines) + "\n")
            counts["commits"] += 1
        elif name.endswith(".crc") and version >= since:
            crc = json.loads(entry.read_text())
            for add in crc.get("allFiles") or []:
                add["path"] = prefixed(add["path"])
            (target / name).write_text(json.dumps(crc))
            counts["checksums"] += 1
    if last:
        (target / "_last_checkpoint").write_text(json.dumps(last))
    counts["seconds"] = round(time.perf_counter() - started, 3)
    return counts


def rows(spark, path: str) -> set:
    """The raw rows: ``(segment_id, base_offset + rel_offset, record_type, event)``."""
    return {(r.segment_id, r.base_offset + r.rel_offset, r.record_type, bytes(r.event or b"")) for r in
            spark.read.format("delta").load(path).select("segment_id", "base_offset", "rel_offset", "record_type",
                                                         "event").collect()}


def referenced(spark, path: str) -> set:
    return set(spark.read.format("delta").load(path).inputFiles())


def listed(stream_dir: Path) -> set:
    return {str(p) for p in stream_dir.rglob("*.parquet") if "_delta_log" not in p.parts}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=120, help="small appends after the scenario (a checkpoint at 100)")
    parser.add_argument("--keep", default=None, help="write the store here and keep it")
    args = parser.parse_args(argv)
    spark = ps.spark_session()
    base = Path(args.keep or tempfile.mkdtemp(prefix="format3-"))
    shutil.rmtree(base, ignore_errors=True)
    manager = ps.StreamManager(spark, str(base / "store"))
    manager.create_scope("iot")
    manager.create_stream("iot", "s", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    writer = manager.create_event_writer("iot", "s", "w")
    frame = lambda tag, n: spark.createDataFrame([(f"k{i % 7}", f"{tag}:{i}") for i in range(n)],  # noqa: E731
                                                  "routing_key string, event string")
    for b in range(3):
        writer.write_events(frame(f"a{b}", 50))
    manager.scale_stream("iot", "s", [0], [(0.0, 0.25), (0.25, 0.5)])
    cut = manager.tail_stream_cut("iot", "s")
    writer.write_events(frame("b", 50))
    manager.truncate_stream("iot", "s", cut)
    with writer.stream_event(routing_key="k1") as event:
        event.write(os.urandom(ps.MAX_EVENT_SIZE + 5))
        event.commit()
    started = time.perf_counter()
    for b in range(args.commits):
        writer.write_events(frame(f"c{b}", 3))
    print(f"scenario + {args.commits} appends: {time.perf_counter() - started:.1f} s")
    manager.compact("iot", "s")

    stream_dir = base / "store" / "iot" / "s"
    events_dir = stream_dir / "events"
    old, new = str(events_dir), str(stream_dir)
    before = rows(spark, old)
    from delta.tables import DeltaTable
    old_detail = DeltaTable.forPath(spark, old).detail().first()
    # a streaming query on the old path, drained
    sink, checkpoint = str(base / "sink"), str(base / "checkpoint")

    def drain(path: str) -> int:
        query = (spark.readStream.format("delta").option("skipChangeCommits", "true").load(path)
                 .writeStream.format("delta").option("checkpointLocation", checkpoint).trigger(availableNow=True)
                 .start(sink))
        query.awaitTermination()
        return spark.read.format("delta").load(sink).count()

    drained = drain(old)
    counts = relocate_log(events_dir, stream_dir)
    print(f"P2 rewrite: {counts}")

    # P1/P2: the same table, one level up
    detail = DeltaTable.forPath(spark, new).detail().first()
    history = DeltaTable.forPath(spark, new).history(1).first().version
    old_version = DeltaTable.forPath(spark, old).history(1).first().version
    print(f"P2 id same: {detail.id == old_detail.id}; version {history} vs {old_version}; "
          f"numFiles {detail.numFiles} vs {old_detail.numFiles}")
    print(f"P1 Spark rows equal: {rows(spark, new) == before} ({len(before)} rows)")
    from deltalake import DeltaTable as RsTable
    rs = RsTable(new).to_pyarrow_table(columns=["segment_id", "base_offset", "rel_offset"]).to_pylist()
    rs = [(r["segment_id"], r["base_offset"] + r["rel_offset"]) for r in rs]
    print(f"P1 delta-rs rows equal: {sorted(rs) == sorted((s, o) for s, o, *_ in before)}")
    import polars as pl
    pl_rows = pl.read_delta(new).select("segment_id", pl.col("base_offset") + pl.col("rel_offset")).rows()
    print(f"P1 Polars rows equal: {sorted(pl_rows) == sorted((s, o) for s, o, *_ in before)}")

    # P3, through the library: the store's events path pointed at the stream's directory
    tail_before = manager.tail_stream_cut("iot", "s")
    events_before = sorted((r.segment_id, r.offset) for r in manager.read_events("iot", "s").collect())
    from pravega_spark.store.segment_store import SegmentStore
    legacy = SegmentStore.events_path
    SegmentStore.events_path = lambda self, scope, stream: self.stream_dir(scope, stream)
    try:
        fresh = ps.StreamManager(spark, str(base / "store"))
        spark.sparkContext.setJobGroup("p3", "tail cut")
        tail = fresh.tail_stream_cut("iot", "s")
        jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup("p3"))
        spark.sparkContext.setJobGroup("other", "other")
        print(f"P3 tail_stream_cut at the new root: equal {tail == tail_before}; Spark jobs {jobs} (expect 0)")
        got = sorted((r.segment_id, r.offset) for r in fresh.read_events("iot", "s").collect())
        print(f"P1 read_events at the new root: equal {got == events_before} ({len(got)} events)")
        validation = fresh.validate_stream("iot", "s")
        failed = [r.expectation for r in validation.results if not r.success]
        print(f"P1 validate_stream at the new root: success {validation.success}; failed {failed}")
    except Exception as exc:  # noqa: BLE001 - what the library says is the finding
        print(f"P3/P1 library at the new root: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    finally:
        SegmentStore.events_path = legacy

    # V+1: a truncation-like DELETE; V+2: an append; both on the new root
    spark.sql(f"DELETE FROM delta.`{new}` WHERE segment_id = 1")
    extra = spark.read.format("delta").load(new).where("record_type = 0").limit(3)
    extra.withColumn("rel_offset", extra.rel_offset + 10**9).write.format("delta").mode("append").save(new)
    after = rows(spark, new)
    print(f"P2 V+1 DELETE and V+2 append: version {DeltaTable.forPath(spark, new).history(1).first().version}; "
          f"rows {len(after)} (= {len(before)} - segment 1 + 3: "
          f"{len(after) == len({r for r in before if r[0] != 1}) + 3})")
    new_paths = [f for f in referenced(spark, new) if "/events/" not in f]
    print(f"P1 new files land at the new root: {len(new_paths)} of {len(referenced(spark, new))} "
          f"(e.g. {new_paths[0].split('/s/', 1)[1] if new_paths else '-'})")
    print(f"P2 the old path's query goes on at the new root: {drain(new) - drained} new rows (expect 3)")

    # OPTIMIZE, then VACUUM with no retention: nothing referenced deleted, the old log left alone
    spark.sql(f"OPTIMIZE delta.`{new}`")
    kept = rows(spark, new)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    old_log_files = len(list((events_dir / "_delta_log").iterdir()))
    listed_before = listed(stream_dir)
    spark.sql(f"VACUUM delta.`{new}` RETAIN 0 HOURS")
    refs = {f.replace("file://", "").replace("file:", "") for f in referenced(spark, new)}
    gone = listed_before - listed(stream_dir)
    print(f"P1 OPTIMIZE keeps rows: {kept == after}; VACUUM deleted {len(gone)} files, "
          f"{len(gone & refs)} of them referenced (expect 0); rows after: {rows(spark, new) == after}")
    print(f"P10 events/_delta_log after VACUUM: {len(list((events_dir / '_delta_log').iterdir()))} of {old_log_files} files")
    shutil.rmtree(events_dir / "_delta_log")
    try:
        got = spark.read.format("delta").load(old).count()
        print(f"P10 load(<stream>/events) without its log: {got} rows")
    except Exception as exc:  # noqa: BLE001 - what Delta says is the finding
        print(f"P10 load(<stream>/events) without its log: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    print(f"store: {base}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
