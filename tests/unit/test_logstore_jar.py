"""The put-if-absent log store's jar ships built (in git and in the wheel) next to the sha256sum
lines of the ``java/`` sources it was built from: a change to ``java/`` fails here until
``scripts/setup.sh`` has built the jar again and rewritten those lines."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JARS = REPO / "pravega_spark" / "_delta" / "jars"
JAR = JARS / "pravega-spark-logstore.jar"
RECORDED = JARS / "pravega-spark-logstore.sources.sha256"


def java_sources() -> list[str]:
    """``java/**/*.java`` relative to the repository, in byte order (scripts/setup.sh: LC_ALL=C sort)."""
    return sorted((p.relative_to(REPO).as_posix() for p in (REPO / "java").rglob("*.java")),
                  key=lambda name: name.encode())


def sha256sum_lines(paths: list[str]) -> str:
    """What ``sha256sum`` prints for ``paths``, run from the repository root."""
    return "".join(f"{hashlib.sha256((REPO / p).read_bytes()).hexdigest()}  {p}\n" for p in paths)


def test_the_jar_was_built_from_java_as_it_is():
    sources = java_sources()
    assert sources, "no java/**/*.java"
    assert RECORDED.is_file(), f"{RECORDED.relative_to(REPO)} is missing: run scripts/setup.sh"
    assert RECORDED.read_text() == sha256sum_lines(sources), (
        "java/ changed since pravega-spark-logstore.jar was built: run scripts/setup.sh (it builds the jar "
        "again and records its sources), then commit the jar and the .sources.sha256 file with java/")


def test_the_jar_holds_a_class_for_each_java_source():
    with zipfile.ZipFile(JAR) as jar:
        names = set(jar.namelist())
    for source in java_sources():
        assert source.removeprefix("java/").removesuffix(".java") + ".class" in names, source
