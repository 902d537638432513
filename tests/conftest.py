"""Shared fixtures: one real local SparkSession with Delta for the whole run, stores under tmp_path."""

from __future__ import annotations

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
}


@pytest.fixture(scope="session")
def spark():
    session = ps.spark_session(**TEST_CONF)
    yield session
    session.stop()


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def manager(spark, root) -> ps.StreamManager:
    return ps.StreamManager(spark, root)


@pytest.fixture
def stream2(manager) -> tuple[str, str]:
    """A scope 'iot' with a 2-segment stream 'sensors'."""
    manager.create_scope("iot")
    manager.create_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
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
