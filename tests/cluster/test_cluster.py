"""On a multi-JVM cluster (``local-cluster``: executors in their own JVMs, with their own Python
workers): the session really has remote executors, jobs take their master from
``spark-defaults.conf`` alone, and executors whose Python cannot import ``pravega_spark`` get it
shipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

HIDDEN_PYTHON = Path(__file__).resolve().parent / "python_without_pravega_spark"


def test_the_tier_session_has_two_executor_jvms_bound_to_loopback(spark):
    sc = spark.sparkContext
    assert sc.master.startswith("local-cluster[2,")
    executors = sc._jsc.sc().getExecutorMemoryStatus()  # the driver's block manager and the executors'
    hosts = [str(executors.keys().toList().apply(i)) for i in range(executors.size())]
    assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts), hosts
    pids = set(sc.parallelize(range(8), 8).map(lambda _: os.getppid()).collect())
    assert len(pids) == 2 and os.getpid() not in pids  # Python workers of two other processes


def _job_env(conf_dir: Path, **extra: str) -> dict:
    """This process's environment without the tier's settings, with ``SPARK_CONF_DIR``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_TEST_", "PYSPARK_"))}
    return dict(env, SPARK_CONF_DIR=str(conf_dir), **extra)


def test_demo_pipeline_takes_a_local_cluster_master_from_spark_defaults(tmp_path):
    """``python jobs/demo_pipeline.py`` with no argument: the master comes from the
    ``spark-defaults.conf`` under ``SPARK_CONF_DIR`` only, and the job runs to ``RESULT: OK``."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.master local-cluster[2,1,1024]\n")
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "demo_pipeline.py")], cwd=tmp_path,
                          env=_job_env(conf_dir), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "RESULT: OK" in done.stdout
    assert "master=local-cluster[2,1,1024]" in done.stderr + done.stdout


SHIP_CHECK = """
import importlib.util, logging, sys
import pravega_spark as ps
logging.basicConfig(level=logging.INFO)
spark = ps.spark_session()
sc = spark.sparkContext
print("EXECUTORS_IMPORT_BEFORE", sc.parallelize(["pravega_spark"] * 2, 2).map(importlib.util.find_spec).map(bool).collect())
m = ps.StreamManager(spark, sys.argv[1])
m.create_scope("s")
m.create_stream("s", "t", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(3)))
rows = spark.range(30000).selectExpr("concat('k', id % 50) as routing_key", "cast(concat('e', id) as binary) as event")
w = m.create_event_writer("s", "t")
print("WRITTEN", w.write_events(rows).event_count)
with w.stream_event(routing_key="big") as big:  # a large event: chunk assembly in executors
    big.write(b"x" * (9 << 20))
    big.commit()
events = m.read_events("s", "t")
print("READ", events.count(), events.where("routing_key = 'big'").selectExpr("length(event)").first()[0])
print("VALID", m.validate_stream("s", "t").success)
"""


def test_executors_that_cannot_import_the_package_get_it_shipped(tmp_path):
    """Executors run an interpreter that cannot import the installed package (its import hook and
    path entries removed at start-up): ``StreamManager`` ships a zip of it, and writes (tasks
    writing files with pyarrow), a large event's assembly and validation run in them."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.master local-cluster[2,1,1024]\n")
    env = _job_env(conf_dir, PYSPARK_PYTHON=str(HIDDEN_PYTHON), DRIVER_PYTHON=sys.executable,
                   PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", SHIP_CHECK, str(tmp_path / "store")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "EXECUTORS_IMPORT_BEFORE [False, False]" in done.stdout
    assert "WRITTEN 30000" in done.stdout and "READ 30001 9437184" in done.stdout and "VALID True" in done.stdout
    assert "shipped it with addPyFile" in done.stderr
