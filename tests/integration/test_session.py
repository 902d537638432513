"""Set-up and session agree on where Delta's jars are, also when ``HOME`` is not the JVM's
``user.home`` (a service account, a container with another HOME)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pravega_spark import _session

REPO = Path(__file__).resolve().parents[2]


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


def test_a_local_session_binds_to_loopback(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert os.environ.get("SPARK_LOCAL_IP") == "127.0.0.1"


@pytest.mark.slow
def test_settings_of_spark_defaults_conf_are_kept(tmp_path):
    """A master and settings given in ``$SPARK_CONF_DIR/spark-defaults.conf`` win over our local
    defaults (``ps.spark_session`` never overrides what the user's Spark set-up gives)."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# the user's cluster defaults\nspark.master local[1]\nspark.sql.shuffle.partitions=7\n"
        "spark.ui.enabled false\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "SPARK_LOCAL_IP")}
    env["SPARK_CONF_DIR"] = str(tmp_path)
    code = ("import pravega_spark as ps\nspark = ps.spark_session()\nc = spark.sparkContext.getConf()\n"
            "print('GOT', spark.sparkContext.master, spark.conf.get('spark.sql.shuffle.partitions'), "
            "c.get('spark.driver.host'), c.get('spark.driver.bindAddress'))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "GOT local[1] 7 127.0.0.1 127.0.0.1" in run.stdout
    assert "192.0.2" not in run.stderr and "resolves to a loopback address" not in run.stderr
