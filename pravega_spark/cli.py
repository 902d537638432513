"""``pravega-spark``: the operator's command line over a store (Pravega's ``pravega-cli``).

    pravega-spark --root R scopes
    pravega-spark --root R streams [SCOPE]
    pravega-spark --root R describe SCOPE/STREAM
    pravega-spark --root R scale SCOPE/STREAM --seal 0,1 --ranges 0-0.25,0.25-0.5
    pravega-spark --root R truncate SCOPE/STREAM (--cut TEXT | --at TIME) --yes
    pravega-spark --root R seal SCOPE/STREAM
    pravega-spark --root R delete SCOPE/STREAM --yes
    pravega-spark --root R cuts SCOPE/STREAM [--at TIME]
    pravega-spark --root R groups SCOPE
    pravega-spark --root R validate [SCOPE/STREAM]
    pravega-spark --root R retention [SCOPE/STREAM]
    pravega-spark --root R compact SCOPE/STREAM
    pravega-spark --root R vacuum [SCOPE/STREAM]
    pravega-spark --root R plot SCOPE/STREAM --out DIR

``--root`` defaults to ``PRAVEGA_SPARK_ROOT``. ``--json`` prints one JSON document instead of
tables. Exit codes: 0 done, 1 a check failed (``validate``) or the operation failed, 2 bad input (a bad name, cut or
time, a missing scope or stream, ``truncate``/``delete`` without ``--yes``): one line on stderr
naming the error. Spark's start-up output is hidden unless ``--verbose``. One Spark session per
invocation, with a small configuration.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from datetime import datetime, timezone

OK, FAILED, BAD_INPUT = 0, 1, 2
SESSION_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                "spark.app.name": "pravega-spark-cli"}


class UsageError(Exception):
    """Bad input found by the CLI itself (exit code 2)."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pravega-spark", description="Inspect and operate a pravega-spark store.")
    p.add_argument("--root", default=os.environ.get("PRAVEGA_SPARK_ROOT"),
                   help="the store's root (default: $PRAVEGA_SPARK_ROOT)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("-v", "--verbose", action="store_true", help="show Spark's output and debug logs")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("scopes", help="list scopes")
    s = sub.add_parser("streams", help="list streams (of a scope, or all)")
    s.add_argument("scope", nargs="?")
    for name, text in (("describe", "a stream: config, state, epochs, segments, head, tail, size, subscribers, "
                                    "reader groups, key-value tables"),
                       ("seal", "seal a stream"), ("compact", "merge a stream's small files")):
        sub.add_parser(name, help=text).add_argument("stream", help="SCOPE/STREAM")
    s = sub.add_parser("scale", help="seal segments and replace them with new key ranges")
    s.add_argument("stream", help="SCOPE/STREAM")
    s.add_argument("--seal", required=True, help="segment ids, comma-separated")
    s.add_argument("--ranges", required=True, help="new key ranges LOW-HIGH, comma-separated")
    s = sub.add_parser("truncate", help="truncate a stream at a cut (needs --yes)")
    s.add_argument("stream", help="SCOPE/STREAM")
    s.add_argument("--cut", help="a stream cut's text form (StreamCut.as_text)")
    s.add_argument("--at", help="the tail as it was at this time (ISO 8601, UTC if no zone)")
    s.add_argument("--yes", action="store_true", help="really truncate")
    s = sub.add_parser("delete", help="seal and delete a stream (needs --yes)")
    s.add_argument("stream", help="SCOPE/STREAM")
    s.add_argument("--yes", action="store_true", help="really delete")
    s = sub.add_parser("upgrade-store", help="move a format-2 store to format 3 in place (needs --yes; "
                       "resumable: run it again after an interruption)")
    s.add_argument("--shards", type=int, default=None, help="the store's shard count (default 16)")
    s.add_argument("--yes", action="store_true", help="really upgrade")
    s = sub.add_parser("cuts", help="a stream's head and tail cuts (and the cut at a time)")
    s.add_argument("stream", help="SCOPE/STREAM")
    s.add_argument("--at", help="also the cut at this time (ISO 8601)")
    s = sub.add_parser("groups", help="a scope's reader groups: readers, positions, lag")
    s.add_argument("scope")
    for name, text in (("validate", "check invariants (exit 1 if one fails)"),
                       ("retention", "apply retention policies once"), ("vacuum", "VACUUM stream tables")):
        sub.add_parser(name, help=text).add_argument("stream", nargs="?", help="SCOPE/STREAM (default: all)")
    s = sub.add_parser("plot", help="write the epoch and retention pictures (PNG)")
    s.add_argument("stream", help="SCOPE/STREAM")
    s.add_argument("--out", required=True, help="folder for the PNG files")
    return p


# ---- output ----------------------------------------------------------------------------------------
def _plain(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    """Rows as an aligned text table."""
    if not rows:
        return "(none)"
    columns = columns or list(rows[0])
    cells = [[str(_plain(r.get(c, ""))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def emit(args, document: dict, text: str) -> None:
    print(json.dumps(_plain(document), indent=2, sort_keys=True) if args.json else text)


# ---- arguments ---------------------------------------------------------------------------------------
def stream_arg(text: str | None) -> tuple[str, str]:
    from .stream.names import parse_scoped_name

    return parse_scoped_name(text)


def time_arg(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"not an ISO 8601 time: {text!r}") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


def optional_stream(args) -> tuple[str | None, str | None]:
    return stream_arg(args.stream) if args.stream else (None, None)


# ---- commands ------------------------------------------------------------------------------------------
def cmd_scopes(m, args) -> int:
    rows = [r.asDict() for r in m.list_scopes().collect()]
    emit(args, {"scopes": rows}, table(rows, ["scope", "creation_time"]))
    return OK


def cmd_streams(m, args) -> int:
    scopes = [args.scope] if args.scope else [r.scope for r in m.list_scopes().collect()]
    rows = [{"scope": s, "stream": r.stream, "state": r.state} for s in scopes
            for r in m.list_streams(s).select("stream", "state").orderBy("stream").collect()]
    emit(args, {"streams": rows}, table(rows))
    return OK


def describe(m, scope: str, stream: str) -> dict:
    """Everything ``describe`` prints, as plain values."""
    info = m.stream_info(scope, stream)
    segments = [r.asDict() for r in m.segments(scope, stream).orderBy("segment_id").collect()]
    epochs = [r.asDict() for r in m.epochs(scope, stream).orderBy("epoch").collect()]
    subscribers = [r.asDict() for r in m.subscribers(scope, stream).collect()]
    groups = [r.asDict() for r in m.list_reader_groups(scope).collect()]
    kvts = [r.asDict() for r in m.list_key_value_tables(scope).collect()]
    name = f"{scope}/{stream}"
    return {
        "stream": name, "state": info.state, "configuration": json.loads(info.configuration.to_json()),
        "current_epoch": info.current_epoch, "size_bytes": info.size_bytes,
        "head": {"text": info.head_stream_cut.as_text(), "positions": dict(info.head_stream_cut.positions)},
        "tail": {"text": info.tail_stream_cut.as_text(), "positions": dict(info.tail_stream_cut.positions)},
        "epochs": [{"epoch": e["epoch"], "creation_time": e["creation_time"], "segments": list(e["segment_ids"])}
                   for e in epochs],
        "segments": [{k: s[k] for k in ("segment_id", "key_start", "key_end", "sealed_epoch", "sealed_size")
                      if k in s} for s in segments],
        "subscribers": [{"subscriber": s.get("subscriber"), "generation": s.get("generation")} for s in subscribers],
        "reader_groups": [g["reader_group"] for g in groups if name in str(g.get("configuration", ""))],
        "key_value_tables": [k["key_value_table"] for k in kvts],
    }


def cmd_describe(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    started = time.perf_counter()
    d = describe(m, scope, stream)
    c = d["configuration"]
    text = "\n".join([
        f"stream {d['stream']}: {d['state']}, epoch {d['current_epoch']}, {d['size_bytes']:,} bytes",
        f"  scaling: {c.get('scaling_policy')}",
        f"  retention: {c.get('retention_policy')}",
        f"  head: {d['head']['positions']}",
        f"  tail: {d['tail']['positions']}",
        "epochs:", *(f"  {e['epoch']} at {_plain(e['creation_time'])}: {e['segments']}" for e in d["epochs"]),
        "segments:", table(d["segments"]),
        f"subscribers: {', '.join(s['subscriber'] for s in d['subscribers']) or '(none)'}",
        f"reader groups: {', '.join(d['reader_groups']) or '(none)'}",
        f"key-value tables in {scope}: {', '.join(d['key_value_tables']) or '(none)'}",
    ])
    emit(args, d, text)
    logging.getLogger("pravega_spark").info("describe %s in %.2f s", d["stream"], time.perf_counter() - started)
    return OK


def cmd_scale(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    try:
        sealed = [int(x) for x in args.seal.split(",")]
        ranges = [tuple(float(v) for v in r.split("-")) for r in args.ranges.split(",")]
    except ValueError:
        raise UsageError("--seal takes segment ids (0,1) and --ranges LOW-HIGH pairs (0-0.25,0.25-0.5)") from None
    if any(len(r) != 2 for r in ranges):
        raise UsageError("--ranges takes LOW-HIGH pairs, e.g. 0-0.25,0.25-0.5")
    epoch = m.scale_stream(scope, stream, sealed, ranges)
    emit(args, {"stream": args.stream, "epoch": epoch}, f"scaled {args.stream}: now epoch {epoch}")
    return OK


def cmd_truncate(m, args) -> int:
    from .stream.stream_cut import StreamCut

    scope, stream = stream_arg(args.stream)
    if (args.cut is None) == (args.at is None):
        raise UsageError("truncate needs exactly one of --cut and --at")
    cut = StreamCut.from_text(args.cut) if args.cut else m.stream_cut_at(scope, stream, time_arg(args.at))
    cut = m.validate_stream_cut(scope, stream, cut)
    if not args.yes:
        raise UsageError(f"truncate {args.stream} at {cut.as_text()} deletes data: add --yes to do it")
    m.truncate_stream(scope, stream, cut)
    emit(args, {"stream": args.stream, "truncated_at": cut.as_text()}, f"truncated {args.stream} at {cut!r}")
    return OK


def cmd_seal(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    m.seal_stream(scope, stream)
    emit(args, {"stream": args.stream, "state": "SEALED"}, f"sealed {args.stream}")
    return OK


def cmd_delete(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    if not m.check_stream_exists(scope, stream):
        from .errors import StreamNotFoundError

        raise StreamNotFoundError(f"stream {args.stream} does not exist")
    if not args.yes:
        raise UsageError(f"delete {args.stream} removes the stream and its data: add --yes to do it")
    m.seal_stream(scope, stream)
    m.delete_stream(scope, stream)
    emit(args, {"stream": args.stream, "deleted": True}, f"deleted {args.stream}")
    return OK


def cmd_cuts(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    cuts = {"head": m.head_stream_cut(scope, stream), "tail": m.tail_stream_cut(scope, stream)}
    if args.at:
        cuts["at"] = m.stream_cut_at(scope, stream, time_arg(args.at))
    doc = {k: {"text": c.as_text(), "positions": dict(c.positions)} for k, c in cuts.items()}
    emit(args, doc, "\n".join(f"{k}: {c!r}\n  {c.as_text()}" for k, c in cuts.items()))
    return OK


def cmd_groups(m, args) -> int:
    rows = []
    for g in m.list_reader_groups(args.scope).collect():
        group = m.reader_group(args.scope, g["reader_group"])
        for r in group.segment_lag():
            rows.append({"group": g["reader_group"], **r})
    emit(args, {"segments": rows}, table(rows, ["group", "reader", "stream", "segment", "position", "unread"]))
    return OK


def cmd_validate(m, args) -> int:
    scope, stream = optional_stream(args)
    names = [(scope, stream)] if stream else [
        (s, r.stream) for s in ([scope] if scope else [x.scope for x in m.list_scopes().collect()])
        for r in m.list_streams(s).collect()]
    results = []
    for s, t in names:
        result = m.validate_stream(s, t)
        results.append({"stream": f"{s}/{t}", "success": result.success,
                        "failed": [r.expectation for r in result.failures]})
    emit(args, {"validations": results},
         "\n".join(f"{'OK' if r['success'] else 'FAILED'} {r['stream']}"
                   + (f": {', '.join(r['failed'])}" if r["failed"] else "") for r in results) or "(no streams)")
    return OK if all(r["success"] for r in results) else FAILED


def cmd_retention(m, args) -> int:
    scope, stream = optional_stream(args)
    outcomes = m.run_retention(scope, stream)
    rows = [{"stream": f"{o.scope}/{o.stream}", "bytes_truncated": o.bytes_truncated,
             "segments_deleted": len(o.segments_deleted), "recorded": o.recorded is not None} for o in outcomes]
    emit(args, {"retention": rows}, table(rows))
    return OK


def cmd_compact(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    result = m.compact(scope, stream)
    emit(args, {"stream": args.stream, "result": repr(result)}, f"compacted {args.stream}: {result!r}")
    return OK


def cmd_vacuum(m, args) -> int:
    scope, stream = optional_stream(args)
    tables = m.vacuum(scope, stream)
    emit(args, {"vacuumed": tables}, f"vacuumed {len(tables)} tables")
    return OK


def cmd_plot(m, args) -> int:
    scope, stream = stream_arg(args.stream)
    m.stream_info(scope, stream)  # a missing stream is bad input, before any file is written
    os.makedirs(args.out, exist_ok=True)
    files = [os.path.join(args.out, f"{scope}.{stream}.{kind}.png") for kind in ("epochs", "retention")]
    m.plot_epochs(scope, stream, files[0])
    m.plot_retention(scope, stream, files[1])
    emit(args, {"files": files}, "\n".join(f"wrote {f}" for f in files))
    return OK


COMMANDS = {"scopes": cmd_scopes, "streams": cmd_streams, "describe": cmd_describe, "scale": cmd_scale,
            "truncate": cmd_truncate, "seal": cmd_seal, "delete": cmd_delete, "cuts": cmd_cuts,
            "groups": cmd_groups, "validate": cmd_validate, "retention": cmd_retention, "compact": cmd_compact,
            "vacuum": cmd_vacuum, "plot": cmd_plot}


# ---- the session -------------------------------------------------------------------------------------
def quiet_session():
    """A Spark session whose JVM writes nothing to this terminal (its stderr is /dev/null): its
    start-up notes are not for an operator, and its errors reach us as exceptions."""
    import pravega_spark as ps

    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        return ps.spark_session(**SESSION_CONF)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def cmd_upgrade_store(spark, args) -> int:
    import pravega_spark as ps

    if not args.yes:
        print(f"would upgrade the store at {args.root} to format 3 in place; stop every process using it, "
              "then run again with --yes")
        return OK
    report = ps.upgrade_store(spark, args.root, **({"shards": args.shards} if args.shards else {}),
                              progress=lambda line: print(line, flush=True))
    print(repr(report))
    return OK


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.verbose:
        logging.getLogger("pravega_spark").setLevel(logging.INFO)
    for noisy in ("py4j", "great_expectations", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.verbose else logging.ERROR)
    if not args.root:
        print("pravega-spark: error: no store root: give --root or set PRAVEGA_SPARK_ROOT", file=sys.stderr)
        return BAD_INPUT
    from .errors import PravegaSparkError

    try:  # names and times first: bad input is refused before Spark starts
        for name in ("stream",):
            if getattr(args, name, None):
                stream_arg(getattr(args, name))
        if getattr(args, "at", None):
            time_arg(args.at)
    except (PravegaSparkError, UsageError) as exc:
        kind = "" if isinstance(exc, UsageError) else f"{type(exc).__name__}: "
        print(f"pravega-spark: error: {kind}{exc}", file=sys.stderr)
        return BAD_INPUT
    try:
        import pravega_spark as ps

        spark = ps.spark_session(**SESSION_CONF) if args.verbose else quiet_session()
        if args.command == "upgrade-store":  # the one command that opens a store of another format
            return cmd_upgrade_store(spark, args)
        manager = ps.StreamManager(spark, args.root)
        return COMMANDS[args.command](manager, args)
    except (PravegaSparkError, UsageError) as exc:
        kind = "" if isinstance(exc, UsageError) else f"{type(exc).__name__}: "
        print(f"pravega-spark: error: {kind}{str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return BAD_INPUT
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except Exception as exc:  # noqa: BLE001 - one line, never a JVM stack trace (--verbose shows it)
        if args.verbose:
            raise
        print(f"pravega-spark: error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
              "(--verbose shows more)", file=sys.stderr)
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
