"""Reader-group liveness job: take readers that went silent offline, so others take their segments.

    python jobs/reader_groups.py --root DIR [--scope S [--group G]] [--silence-seconds N] [--now ISO]
    spark-submit ... jobs/reader_groups.py --root s3a://lake/pravega --silence-seconds 300

A reader whose process dies without ``close()`` keeps its segments until someone takes it
offline. The group's other readers do it when they refresh (the group's ``reader_silence_limit``,
60 s by default); this job does it for groups whose readers all stopped, or whose limit is None
(Pravega's rule: until ``reader_offline``). Run it on a schedule (every few minutes). Each reader
silent (no join, commit or position refresh) for ``--silence-seconds``, else the group's
``reader_silence_limit``, else ``silence_seconds`` of ``conf/reader_groups.json`` (600), goes
offline at the offsets recorded for it: its last refresh, acquisition or checkpoint, or, for a
group with a sink (``ReaderGroup.delta_sink``), the offsets the sink holds (exactly-once). A live
reader taken offline gets ``ReaderNotInReaderGroupError`` and must join again.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pravega_spark as ps
from jobs._common import load_conf, parse_now, setup_logging


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="store root (any Hadoop path)")
    parser.add_argument("--conf", default=None, help="JSON config (default conf/reader_groups.json)")
    parser.add_argument("--scope", default=None, help="only this scope's groups (default: every scope)")
    parser.add_argument("--group", default=None, help="only this group (needs --scope)")
    parser.add_argument("--silence-seconds", type=float, default=None, help="default: each group's reader_silence_limit, else the config's (600)")
    parser.add_argument("--now", default=None, help="ISO time the run takes as now (default: the clock)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.group and not args.scope:
        parser.error("--group needs --scope")
    return args


def group_names(manager: ps.StreamManager, scope: str | None, group: str | None) -> list[tuple[str, str]]:
    if group is not None:
        return [(scope, group)]
    scopes = [scope] if scope else sorted(r.scope for r in manager.list_scopes().collect())
    return [(s, r.reader_group) for s in scopes
            for r in manager.list_reader_groups(s).orderBy("reader_group").collect()]


def main(argv=None) -> int:
    args = parse_args(argv)
    log = setup_logging(args.verbose)
    conf = load_conf("reader_groups", args.conf)
    fallback = timedelta(seconds=conf.get("silence_seconds", 600))
    manager = ps.StreamManager(ps.spark_session(), args.root)
    now = parse_now(args.now)
    offline = 0
    groups = group_names(manager, args.scope, args.group)
    for scope, name in groups:
        group = manager.reader_group(scope, name)
        silence = (timedelta(seconds=args.silence_seconds) if args.silence_seconds is not None
                   else group.config.reader_silence_limit or fallback)
        gone = group.offline_silent_readers(silence, now)
        offline += len(gone)
        log.info("%s/%s: %s", scope, name, f"readers {gone} taken offline" if gone else "every reader is live")
    print(f"reader groups: {len(groups)} visited, {offline} silent readers taken offline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
