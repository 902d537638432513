"""Worker processes for the concurrency and crash tests (real OS processes, own JVMs).

    python -m tests.workers append --root R --scope S --stream T --writer W --batches B --per-batch N --keys K
    python -m tests.workers scale  --root R --scope S --stream T --scales M
    python -m tests.workers truncate --root R --scope S --stream T --truncations M --pause P
    python -m tests.workers crash  --root R --scope S --stream T --failpoint NAME --op scale|append|seal|create|delete|truncate

A crash run sets PRAVEGA_SPARK_FAILPOINT so the library SIGKILLs the process at that point.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pravega_spark as ps

CONF = {"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false",
        "spark.driver.memory": "768m"}


def payload(writer: str, batch: int, index: int) -> str:
    return f"{writer}:{batch:04d}:{index:06d}"


def batch_rows(writer: str, batch: int, per_batch: int, keys: int):
    return [(f"key-{i % keys}", payload(writer, batch, i)) for i in range(per_batch)]


def run_append(m: ps.StreamManager, a) -> None:
    writer = m.create_event_writer(a.scope, a.stream, writer_id=a.writer)
    for b in range(a.batches):
        df = m.spark.createDataFrame(batch_rows(a.writer, b, a.per_batch, a.keys), "routing_key string, event string")
        result = writer.write_events(df)
        print(f"WROTE {a.writer} {b} {result.event_count} {result.version}", flush=True)


def run_scale(m: ps.StreamManager, a) -> None:
    time.sleep(a.delay)
    for i in range(a.scales):
        segs = sorted(m.segments(a.scope, a.stream, epoch=m.stream_info(a.scope, a.stream).current_epoch).collect(),
                      key=lambda s: s.key_start)
        if i % 2 == 0:  # split the widest segment in two
            s = max(segs, key=lambda s: s.key_end - s.key_start)
            mid = (s.key_start + s.key_end) / 2
            epoch = m.scale_stream(a.scope, a.stream, [s.segment_id], [(s.key_start, mid), (mid, s.key_end)])
        else:  # merge the first two neighbours
            x, y = segs[0], segs[1]
            epoch = m.scale_stream(a.scope, a.stream, [x.segment_id, y.segment_id], [(x.key_start, y.key_end)])
        print(f"SCALED {epoch}", flush=True)
        time.sleep(a.pause)


def run_truncate(m: ps.StreamManager, a) -> None:
    """Take the tail, let the writers go on for a while, then truncate at that earlier tail."""
    time.sleep(a.delay)
    for _ in range(a.truncations):
        cut = m.tail_stream_cut(a.scope, a.stream)
        time.sleep(a.pause)
        m.truncate_stream(a.scope, a.stream, cut)
        print(f"TRUNCATED {cut.as_text()}", flush=True)


def run_crash(m: ps.StreamManager, a) -> None:
    os.environ["PRAVEGA_SPARK_FAILPOINT"] = a.failpoint
    if a.op == "scale":
        m.scale_stream(a.scope, a.stream, [0], [(0.0, 0.25), (0.25, 0.5)])
    elif a.op == "seal":
        m.seal_stream(a.scope, a.stream)
    elif a.op == "create":
        m.create_stream(a.scope, a.stream, ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    elif a.op == "delete":
        m.delete_stream(a.scope, a.stream)
    elif a.op == "truncate":
        m.truncate_stream(a.scope, a.stream, ps.StreamCut.from_text(a.cut))
    elif a.op == "append":
        writer = m.create_event_writer(a.scope, a.stream, writer_id="crasher")
        df = m.spark.createDataFrame(batch_rows("crasher", 0, a.per_batch, a.keys), "routing_key string, event string")
        print("COMMITTING", flush=True)
        writer.write_events(df)
    print("NOT KILLED", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["append", "scale", "truncate", "crash"])
    p.add_argument("--root", required=True)
    p.add_argument("--scope", default="iot")
    p.add_argument("--stream", default="sensors")
    p.add_argument("--writer", default="w")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--per-batch", type=int, default=50)
    p.add_argument("--keys", type=int, default=8)
    p.add_argument("--scales", type=int, default=2)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--pause", type=float, default=1.0)
    p.add_argument("--truncations", type=int, default=2)
    p.add_argument("--cut", default="")
    p.add_argument("--failpoint", default="")
    p.add_argument("--op", default="scale")
    a = p.parse_args(argv)
    m = ps.StreamManager(ps.spark_session(**CONF), a.root)
    {"append": run_append, "scale": run_scale, "truncate": run_truncate, "crash": run_crash}[a.command](m, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
