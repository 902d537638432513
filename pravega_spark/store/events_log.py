"""The events table's commit log as Delta's streaming source sees it: which file actions of a
commit carry events of which segment extent, and which adds the source emits."""

from __future__ import annotations


def emitted_adds(adds: list[dict], removes: list[dict]) -> list[dict]:
    """The adds of one commit that Delta's source emits with ``skipChangeCommits``: none if the
    commit removes files with ``dataChange=true``, else those with ``dataChange=true``; only
    real segments' files (new events, in the order appended)."""
    if any(r.get("dataChange", True) for r in removes):
        return []
    return [a for a in adds if a.get("dataChange", True) and event_span(a) is not None]


def event_span(action: dict) -> tuple[int, int, int] | None:
    """A file action's ``(segment, base_offset, end_offset)``; None for staged data (segment < 0)."""
    values = action.get("partitionValues") or {}
    try:
        segment = int(values["segment_id"])
        span = (segment, int(values["base_offset"]), int(values["end_offset"]))
    except (KeyError, TypeError, ValueError):
        return None
    return span if segment >= 0 else None
