"""The wheel works on its own: built with ``pip wheel``, it holds the log store's jar; installed (not
editable) into a fresh virtual environment outside the repository, it runs the README's quick start,
``pravega-spark --help`` and a ``describe`` of the store the quick start wrote.

The new environment gets the dependencies (pyspark, delta-spark, pandas, pyarrow, ...) from the
project's environment through a ``.pth`` file naming its site-packages: a plain path line only
appends that folder to ``sys.path`` (the ``.pth`` files in it, the editable install's finder among
them, are not run), so ``pravega_spark`` is the wheel's. Delta's jars come from the local Maven
repository as for any session (the environment is passed through).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
JAR = "pravega_spark/_delta/jars/pravega-spark-logstore.jar"


def run(args: list[str], label: str, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    print(f"[wheel test] {label}: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def source_copy(target: Path) -> Path:
    """The repository's files as a clone would have them (tracked, and new ones not ignored):
    building there leaves no ``build/`` or ``*.egg-info`` in the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # not a file deleted from the working tree
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    return target


def quick_start() -> str:
    """The first ```python block under the README's ``## Quick start``."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Quick start\n", 1)[1]
    found = re.search(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert found, "no ```python block under ## Quick start"
    return found.group(1)


def test_the_wheel_installs_alone_and_runs_the_quick_start_and_the_cli(tmp_path):
    # the wheel, with the jar
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", str(source_copy(tmp_path / "src")), "--no-deps",
         "--no-build-isolation", "-q", "-w", str(wheels)], "pip wheel")
    (wheel,) = wheels.glob("pravega_spark-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert archive.read(JAR) == (REPO / JAR).read_bytes()
    assert all(n.startswith(("pravega_spark/", "pravega_spark-")) for n in names), names

    # a fresh environment outside the repository: the wheel, and the project's packages on its path
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], "venv")
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        "pip install")
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    "site").stdout.strip())
    (site / "project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cli = venv / "bin" / "pravega-spark"
    assert cli.read_text().splitlines()[0] == f"#!{python}"

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                        "PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "SPARK_CONF_DIR")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    work = tmp_path / "work"  # the working directory: not the repository
    work.mkdir()
    lake = tmp_path / "lake"

    # the README's quick start, on a root of its own; its last line deletes the stream, which the
    # describe below reads, so it stops before that line
    lines = quick_start().rstrip().splitlines()
    assert lines[-1].startswith('manager.delete_stream("iot", "sensors")'), lines[-1]
    script = "\n".join([
        f"root = {str(lake)!r}",
        *lines[:-1],
        "import pravega_spark._session",
        "print('PACKAGE', ps.__file__)",
        "print('LOGSTORE', pravega_spark._session.log_store_jar())",
        "print('JARS', spark.sparkContext.getConf().get('spark.jars'))",
    ])
    out = run([str(python), "-c", script], "quick start", cwd=work, env=env).stdout
    found = dict(line.split(" ", 1) for line in out.splitlines()
                 if line.startswith(("PACKAGE ", "LOGSTORE ", "JARS ")))
    assert Path(found["PACKAGE"]).is_relative_to(site), found["PACKAGE"]
    assert Path(found["LOGSTORE"]) == site / JAR and found["LOGSTORE"] in found["JARS"].split(",")
    assert "after the cut: 1 in all: 4" in out

    # the console script of the new environment
    assert "describe" in run([str(cli), "--help"], "pravega-spark --help", cwd=work, env=env).stdout
    described = run([str(cli), "--root", str(lake), "describe", "iot/sensors"], "pravega-spark describe",
                    cwd=work, env=env).stdout
    assert described.startswith("stream iot/sensors: SEALED, epoch 1"), described
    assert "reader groups: (none)" in described
