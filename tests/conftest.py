"""Shared fixtures: one real local SparkSession with Delta for the whole run, stores under tmp_path."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

import pytest

import pravega_spark as ps

TEST_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.default.parallelism": "2",
    # a 100 MiB large event assembled by read_events holds ~2x its size in one task
    "spark.driver.memory": "2g",
}


@pytest.fixture(scope="session")
def spark():
    session = ps.spark_session(**TEST_CONF)
    yield session
    session.stop()


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "store")


@pytest.fixture(scope="session")
def stream2_template(spark, tmp_path_factory) -> str:
    """A store holding scope 'iot' with a fresh 2-segment stream 'sensors', made once per run.

    Creating a stream is several Delta commits (about 0.7 s); a test that only needs a fresh
    stream gets a copy of this store instead (Delta tables are plain directories with relative
    paths, so a copy is an independent store).
    """
    root = str(tmp_path_factory.mktemp("template") / "store")
    manager = ps.StreamManager(spark, root)
    manager.create_scope("iot")
    manager.create_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    return root


@pytest.fixture
def manager(spark, root) -> ps.StreamManager:
    """A manager over an empty store at ``root``."""
    return ps.StreamManager(spark, root)


@pytest.fixture
def stream2(spark, root, manager, stream2_template) -> tuple[str, str]:
    """Scope 'iot' with a fresh 2-segment stream 'sensors' in ``manager``'s store: the store is
    replaced by a copy of ``stream2_template``, and the JVM's cached Delta logs are dropped so
    that the replaced tables are read again (the manager itself caches nothing read before)."""
    shutil.rmtree(root)
    shutil.copytree(stream2_template, root)
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return "iot", "sensors"


def eventually(check: Callable[[], object], timeout: float = 60.0, interval: float = 0.2):
    """Poll ``check`` until it returns a truthy value (bounded), then return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
