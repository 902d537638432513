"""Delta's actions across the JVM boundary, in batches: JVM ``AddFile``s to :class:`FileEntry`
values and plain values back to JVM actions, each batch one call through Delta's own JSON mapper
(the one its log is written with), not one py4j call per file and field."""

from __future__ import annotations

import json
from collections.abc import Sequence

from . import jvm
from .files import AppVersion, FileEntry, Removal

_KINDS = {FileEntry: "AddFile", Removal: "RemoveFile", AppVersion: "SetTransaction"}


def entries(gateway, files) -> list[FileEntry]:
    """The files of a JVM collection of ``AddFile`` (a Scala ``Seq`` or a Java ``List``)."""
    return [FileEntry.from_log(e) for e in json.loads(jvm.mapper(gateway).writeValueAsString(files))]


def _array_class(gateway, name: str):
    """The JVM class of an array of Delta's action ``name`` (Delta's classes are loaded by
    Spark's class loader, not the system one)."""
    def look_up():
        loader = jvm.java_class(gateway, "java.lang.Thread").currentThread().getContextClassLoader()
        return jvm.java_class(gateway, "java.lang.Class").forName(
            f"[Lorg.apache.spark.sql.delta.actions.{name};", True, loader)

    return jvm.once(gateway, f"[{name}", look_up)


def to_seq(gateway, items: Sequence):
    """A Scala ``Seq`` of JVM actions for plain values (``FileEntry``, ``Removal``,
    ``AppVersion``), in order: one call per run of values of one kind."""
    mapper = jvm.mapper(gateway)
    runs: list[tuple[str, list]] = []
    for item in items:
        kind = _KINDS[type(item)]
        if not runs or runs[-1][0] != kind:
            runs.append((kind, []))
        runs[-1][1].append(item.to_log())
    if not runs:
        return jvm.to_seq(gateway, [])
    wrap = jvm.java_class(gateway, "scala.collection.immutable.ArraySeq").unsafeWrapArray
    seq = None
    for kind, bodies in runs:
        part = wrap(mapper.readValue(json.dumps(bodies), _array_class(gateway, kind)))
        seq = part if seq is None else seq.appendedAll(part)
    return seq
