"""Set-up and session agree on where Delta's jars are, also when ``HOME`` is not the JVM's
``user.home`` (a service account, a container with another HOME)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pravega_spark import _session

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_setup_and_session_use_homes_maven_repository_when_user_home_differs(tmp_path):
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "repository").symlink_to(_session.maven_repository())
    env = {k: v for k, v in os.environ.items() if k not in ("M2_REPOSITORY", "PYSPARK_GATEWAY_PORT")}
    env.update(HOME=str(home), JAVA_TOOL_OPTIONS=f"-Duser.home={tmp_path / 'elsewhere'}")
    setup = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True)
    assert setup.returncode == 0, setup.stderr
    assert f"Delta jars present in {home}/.m2/repository" in setup.stdout
    code = ("import pravega_spark as ps\n"
            "spark = ps.spark_session(**{'spark.ui.enabled': 'false'})\n"
            "print('JARS', spark.conf.get('spark.jars', ''), spark.conf.get('spark.jars.packages', 'none'))\n"
            f"spark.range(3).write.format('delta').save('{tmp_path / 't'}')\n"
            f"print('ROWS', spark.read.format('delta').load('{tmp_path / 't'}').count())\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    jars = next(line for line in run.stdout.splitlines() if line.startswith("JARS"))
    assert f"{home}/.m2/repository/io/delta/" in jars and jars.endswith(" none")
    assert "ROWS 3" in run.stdout
