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

from tests.conftest import eventually
from tests.processes import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# on the executors' Python path first: its sitecustomize.py hides the installed pravega_spark
HIDDEN_PACKAGE = Path(__file__).resolve().parent / "no_pravega_spark"


def test_the_tier_session_has_two_executor_jvms_bound_to_loopback(spark):
    sc = spark.sparkContext
    assert sc.master.startswith("local-cluster[2,")
    # the driver's block manager and, once they registered, the two executors'
    executors = eventually(lambda: (lambda s: s if s.size() == 3 else None)(sc._jsc.sc().getExecutorMemoryStatus()))
    hosts = [str(executors.keys().toList().apply(i)) for i in range(executors.size())]
    assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts), hosts
    pids = set(sc.parallelize(range(8), 8).map(lambda _: os.getppid()).collect())
    assert len(pids) == 2 and os.getpid() not in pids  # Python workers of two other processes


def test_demo_pipeline_takes_a_local_cluster_master_from_spark_defaults_and_ships_the_package(tmp_path):
    """``python jobs/demo_pipeline.py`` with no argument and no variable but ``SPARK_CONF_DIR``:
    the master comes from its ``spark-defaults.conf`` alone, and so does the executors' Python
    path, which hides the installed package from them (``no_pravega_spark/sitecustomize.py``
    drops its import hook). ``StreamManager`` finds that the executors cannot import it and ships
    a zip; the demo's writes (tasks writing files with pyarrow), scale and reads then run there to
    ``RESULT: OK``."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.master local-cluster[2,1,1024]\n"
        f"spark.executorEnv.PYTHONPATH {HIDDEN_PACKAGE}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_", "PYSPARK_", "SPARK_"))}
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "demo_pipeline.py")], cwd=tmp_path,
                          env=dict(env, SPARK_CONF_DIR=str(conf_dir)), capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "RESULT: OK" in done.stdout
    assert "Traceback" not in out, out[-5000:]  # a healthy run prints no traceback
    assert "(master=local-cluster[2,1,1024])" in out
    assert "2 of 2 executor slots could not import the package; shipped it with addPyFile" in out
