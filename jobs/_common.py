"""Shared bits of the spark-submit entry points: logging set-up and conf/ loading."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def setup_logging(verbose: bool = False) -> logging.Logger:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "py4j.clientserver"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return logging.getLogger("pravega_spark.jobs")


def load_conf(name: str, path: str | None = None) -> dict:
    """Load ``conf/<name>.json`` (or ``path``)."""
    return json.loads(Path(path or CONF_DIR / f"{name}.json").read_text())


def parse_now(text: str | None) -> datetime | None:
    """``--now``: an ISO time (naive = UTC), or None for the wall clock."""
    if text is None:
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def stream_names(manager, scope: str | None, stream: str | None) -> list[tuple[str, str]]:
    """``--scope``/``--stream``: that stream, a scope's streams, or every stream of the store."""
    if stream is not None:
        return [(scope, stream)]
    scopes = [scope] if scope else sorted(r.scope for r in manager.list_scopes().collect())
    return [(s, r.stream) for s in scopes for r in manager.list_streams(s).orderBy("stream").collect()]


class Progress:
    """A job's walk over a store's streams: one line per stream with its outcome (stdout), and on
    a terminal a progress bar under them (stderr); ``summary`` ends the walk with one line.

    Example:
        >>> p = Progress("compact", 2, tty=False)
        >>> p.step("demo/a", "3 files merged")
        [1/2] demo/a: 3 files merged
    """

    WIDTH = 30

    def __init__(self, what: str, total: int, tty: bool | None = None) -> None:
        import sys

        self.what, self.total, self.done, self.failures = what, total, 0, 0
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._draw()

    def _draw(self) -> None:
        if self.tty and self.total:
            import sys

            filled = self.WIDTH * self.done // self.total
            sys.stderr.write(f"\r\033[K{self.what} [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                             f"{self.done}/{self.total}")
            sys.stderr.flush()

    def step(self, name: str, outcome: str, failed: bool = False) -> None:
        """Record one stream's outcome (a failure counts in the summary)."""
        import sys

        self.done += 1
        self.failures += failed
        if self.tty:
            sys.stderr.write("\r\033[K")
        print(f"[{self.done}/{self.total}] {name}: {outcome}", flush=True)
        self._draw()

    def summary(self, line: str) -> None:
        """The walk's last line: ``line`` plus the streams done and the failures."""
        import sys

        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        print(f"{line}; {self.done} of {self.total} streams done, {self.failures} failures", flush=True)


def store_walk_parser(doc: str):
    """The arguments of a job walking a store's streams: ``--root``, ``--scope``, ``--stream``
    (needs ``--scope``) and ``-v``; add the job's own, then ``parse_store_walk``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--root", required=True, help="store root (any Hadoop path)")
    parser.add_argument("--scope", default=None, help="only this scope")
    parser.add_argument("--stream", default=None, help="only this stream (needs --scope)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def parse_store_walk(parser, argv):
    args = parser.parse_args(argv)
    if args.stream and not args.scope:
        parser.error("--stream needs --scope")
    return args
