"""On a multi-JVM cluster (``local-cluster``: executors in their own JVMs, with their own Python
workers): the session really has remote executors. (The demo job on a ``local-cluster`` master
taken from ``spark-defaults.conf`` alone, with executors whose Python cannot import
``pravega_spark`` getting it shipped, runs in the S3 tier, with its root on S3:
``tests/s3/test_object_store.py::test_demo_pipeline_on_a_local_cluster_with_its_root_on_s3``.)"""

from __future__ import annotations

import os

import pytest

from tests.conftest import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_the_tier_session_has_two_executor_jvms_bound_to_loopback(spark):
    sc = spark.sparkContext
    assert sc.master.startswith("local-cluster[2,")
    # the driver's block manager and, once they registered, the two executors'
    executors = eventually(lambda: (lambda s: s if s.size() == 3 else None)(sc._jsc.sc().getExecutorMemoryStatus()))
    hosts = [str(executors.keys().toList().apply(i)) for i in range(executors.size())]
    assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts), hosts
    pids = set(sc.parallelize(range(8), 8).map(lambda _: os.getppid()).collect())
    assert len(pids) == 2 and os.getpid() not in pids  # Python workers of two other processes
