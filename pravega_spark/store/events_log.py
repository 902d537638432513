"""The events table's commit log as Delta's streaming source sees it: which file actions of a
commit carry events of which segment extent, and which adds the source emits."""

from __future__ import annotations

from collections.abc import Sequence

from ..stream.cut_algorithms import covers


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


def skipped_events(changes: Sequence[tuple[int, list[dict], list[dict]]]) -> list[tuple[int, int, int, int]]:
    """``(version, segment, base, end)`` of every data file that Delta's source skips
    (``skipChangeCommits``) although it holds events no file removed in its commit held: the
    events a query would never see.

    The source skips every add of a commit that removes files with ``dataChange=true``, and each
    add with ``dataChange=false``. Such an add is harmless when its offsets ``[base_offset,
    end_offset)`` lie inside the ranges its commit removed from the same segment (compaction, a
    truncation's straddling file rewritten, an ``OPTIMIZE``): the source delivered those rows from
    the removed files. ``changes``: ``(version, adds, removes)`` as in the log (``DeltaBackend.file_changes``).
    """
    gaps = []
    for version, adds, removes in changes:
        removed: dict[int, list[tuple[int, int]]] = {}
        for r in removes:
            if (span := event_span(r)) is not None:
                removed.setdefault(span[0], []).append(span[1:])
        emitted = {id(a) for a in emitted_adds(adds, removes)}
        for a in adds:
            span = event_span(a)
            if span is None or id(a) in emitted:
                continue
            segment, base, end = span
            if not covers(removed.get(segment, []), base, end):
                gaps.append((version, segment, base, end))
    return gaps
