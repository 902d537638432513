"""The Spark Connect tier's guard: this test process must never start a JVM.

A Databricks serverless notebook has none; a stray py4j call that a local in-process Connect
server (``remote("local")``) would have let pass must fail here. Checked before the first test
of the tier and after the last.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest


def assert_no_jvm() -> None:
    from pyspark import SparkContext

    assert SparkContext._gateway is None, "a py4j gateway (a JVM) was started in the test process"
    assert SparkContext._active_spark_context is None, "a classic SparkContext exists in the test process"


@pytest.fixture(scope="session", autouse=True)
def no_jvm_in_this_process():
    assert_no_jvm()
    yield
    assert_no_jvm()


@contextmanager
def relations_sent_ahead(spark):
    """The sizes of the local relations this client sends ahead of its queries, for the server to
    cache until the session ends (Spark Connect's ``createDataFrame`` at or above the server's
    ``localRelationCacheThreshold``). A spy: the real upload still happens."""
    client = spark.client
    real, sent = client.cache_artifacts, []

    def counted(blobs):
        sent.append(sum(len(b) for b in blobs))
        return real(blobs)

    client.cache_artifacts = counted
    try:
        yield sent
    finally:
        del client.cache_artifacts
