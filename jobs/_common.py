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
