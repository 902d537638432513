"""Shared fixtures: one real local SparkSession with Delta for the whole run, stores under tmp_path.

The cluster and object-store tiers (``scripts/test_tiers.sh``) run tests marked ``cluster`` or
``s3`` again, in their own pytest invocations, with:

- ``PRAVEGA_SPARK_TEST_MASTER``: the session's master (``local-cluster[2,1,1536]``: executors in
  their own JVMs, with their own Python workers);
- ``PRAVEGA_SPARK_TEST_ROOT``: where stores go instead of ``tmp_path`` (``s3a://pravega/...`` on
  the local S3 server, whose settings come from ``spark-defaults.conf`` in ``SPARK_CONF_DIR``), and
  ``PRAVEGA_SPARK_TEST_S3_DATA``: the server's data folder (a store is copied there as files).

The Spark Connect tier runs tests marked ``connect`` with ``SPARK_REMOTE`` set to a local Spark
Connect server (``scripts/connect_server.sh``): ``ps.spark_session()`` then returns a Connect
session, and this process starts no JVM (``tests/connect`` asserts it).

Tests only these tiers run live in ``tests/cluster``, ``tests/s3`` and ``tests/connect``.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlparse

import pytest

import pravega_spark as ps

TEST_MASTER = os.environ.get("PRAVEGA_SPARK_TEST_MASTER", "local[2]")
TEST_ROOT = os.environ.get("PRAVEGA_SPARK_TEST_ROOT")
S3_DATA = os.environ.get("PRAVEGA_SPARK_TEST_S3_DATA")
CONNECT = bool(os.environ.get("SPARK_REMOTE"))  # the Connect tier: a session of the remote server
collect_ignore = [tier for tier, on in (("cluster", TEST_MASTER.startswith("local-cluster")), ("s3", TEST_ROOT),
                                        ("connect", CONNECT)) if not on]

TEST_CONF = {
    "spark.master": TEST_MASTER,
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.default.parallelism": "2",
    # a 100 MiB large event assembled by read_events holds ~2x its size in one task
    "spark.driver.memory": "2g",
}
if TEST_MASTER.startswith("local[") and not TEST_ROOT:
    # the local suite runs Spark's expressions interpreted: compiling generated code was most of
    # its CPU (the JIT busy a whole core on 2), and its tests are small; the cluster and object-store
    # tiers keep Spark's code generation, so each query also runs generated there
    TEST_CONF["spark.sql.codegen.wholeStage"] = "false"
    TEST_CONF["spark.sql.codegen.factoryMode"] = "NO_CODEGEN"
if TEST_MASTER.startswith("local-cluster"):
    TEST_CONF["spark.executor.memory"] = "1536m"  # as large as the tier's workers (the 100 MiB event)


def store_path(name: str) -> str:
    """A new store's root: under the tier's ``PRAVEGA_SPARK_TEST_ROOT``, else ``name`` itself."""
    return f"{TEST_ROOT.rstrip('/')}/{uuid.uuid4().hex[:12]}" if TEST_ROOT else name


def local_copy_path(path: str) -> str:
    """The folder holding a store's files: itself, or on the local S3 server its data folder
    (a bucket is a folder; an object a file whose extended attributes hold its ETag)."""
    parsed = urlparse(path)
    if parsed.scheme in ("s3a", "s3"):
        return os.path.join(S3_DATA, parsed.netloc, parsed.path.lstrip("/"))
    return path


def copy_store(source: str, target: str) -> None:
    """Replace the store at ``target`` by a copy of ``source`` (``copytree`` copies extended
    attributes too, so objects copied on the S3 server keep their ETags)."""
    shutil.rmtree(local_copy_path(target), ignore_errors=True)
    shutil.copytree(local_copy_path(source), local_copy_path(target))


@pytest.fixture(scope="session")
def spark():
    session = ps.spark_session() if CONNECT else ps.spark_session(**TEST_CONF)
    yield session
    session.stop()


@pytest.fixture
def root(tmp_path) -> str:
    return store_path(str(tmp_path / "store"))


@pytest.fixture(scope="session")
def stream2_template(spark, tmp_path_factory) -> str:
    """A store holding scope 'iot' with a fresh 2-segment stream 'sensors', made once per run.

    Creating a stream is several Delta commits (about 0.7 s); a test that only needs a fresh
    stream gets a copy of this store instead (Delta tables are plain directories with relative
    paths, so a copy is an independent store).
    """
    root = store_path(str(tmp_path_factory.mktemp("template") / "store"))
    manager = ps.StreamManager(spark, root)
    manager.create_scope("iot")
    manager.create_stream("iot", "sensors", ps.StreamConfiguration(scaling_policy=ps.ScalingPolicy.fixed(2)))
    return root


def backends_here(marked_connect: bool) -> list[str]:
    """The backends a ``both_backends`` test runs on in this tier. Within ``make test`` the body
    runs on both, once each: the Connect tier runs ``sql`` (a Connect session has no other), so
    the local suite runs a test that the Connect tier also runs (marked ``connect``) on
    ``classic`` only, and the other ones on both; the cluster tier (executors in other JVMs: the
    tasks that write files are the classic backend's) runs ``classic``; the S3 tier runs both."""
    if CONNECT:
        return ["sql"]
    if TEST_MASTER.startswith("local-cluster") or (marked_connect and not TEST_ROOT):
        return ["classic"]
    return ["classic", "sql"]


def pytest_generate_tests(metafunc):
    """A test marked ``both_backends`` runs once per Delta backend of its tier
    (``backends_here``); ``both_backends(slow=("sql",))`` marks the ``sql`` run ``slow`` (10 s
    or more: ``make test-fast`` leaves it to ``make test``)."""
    mark = metafunc.definition.get_closest_marker("both_backends")
    if mark:
        slow = mark.kwargs.get("slow", ())  # the backends on which the body takes 10 s or more
        marked_connect = metafunc.definition.get_closest_marker("connect") is not None
        params = [pytest.param(kind, marks=[pytest.mark.slow] if kind in slow else [])
                  for kind in backends_here(marked_connect)]
        metafunc.parametrize("delta_backend", params, indirect=True)


class SessionSettingGuard:
    """Records every session setting set or unset from inside ``pravega_spark`` (not by
    ``ps.spark_session``, which sets what its caller asks for): the public-API backend must set
    none, since Databricks serverless refuses them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def wrap(self, original, verb: str):
        guard = self

        def recorded(conf, key, *args):
            import traceback

            ours = [f for f in traceback.extract_stack()[:-1]
                    if "/pravega_spark/" in f.filename and not f.filename.endswith("_session.py")]
            if ours:
                guard.calls.append(f"{verb} {key} from {ours[-1].filename.split('/pravega_spark/')[-1]}:"
                                   f"{ours[-1].lineno}")
            return original(conf, key, *args)

        return recorded

    def install(self, monkeypatch) -> None:
        from pyspark.sql.conf import RuntimeConfig

        targets = [RuntimeConfig]
        try:
            from pyspark.sql.connect.conf import RuntimeConf
            targets.append(RuntimeConf)
        except ImportError:
            pass
        for cls in targets:
            for verb in ("set", "unset"):
                monkeypatch.setattr(cls, verb, self.wrap(getattr(cls, verb), verb))


@pytest.fixture
def delta_backend(request, monkeypatch):
    """The backend a ``both_backends`` test runs on: ``PRAVEGA_SPARK_BACKEND`` set for it, and on
    ``sql`` the session-setting guard (it fails the test at teardown)."""
    kind = request.param
    if not CONNECT:
        monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", kind)
    guard = SessionSettingGuard()
    if kind == "sql":
        guard.install(monkeypatch)
    yield kind
    assert guard.calls == [], f"pravega_spark set session settings on the public-API backend: {guard.calls}"


@pytest.fixture
def manager(spark, root, request) -> ps.StreamManager:
    """A manager over an empty store at ``root`` (for a test that uses ``stream2``, over a copy of
    ``stream2_template`` made first), on the test's ``delta_backend`` where it has one."""
    if "delta_backend" in request.fixturenames:
        request.getfixturevalue("delta_backend")
    if "stream2" in request.fixturenames:
        copy_store(request.getfixturevalue("stream2_template"), root)
        if not CONNECT:
            spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return ps.StreamManager(spark, root)


@pytest.fixture
def stream2(spark, root, manager, stream2_template) -> tuple[str, str]:
    """Scope 'iot' with a fresh 2-segment stream 'sensors' in ``manager``'s store (a copy of
    ``stream2_template``, made before the manager: the JVM's cached Delta logs were dropped, so
    the copied tables are read afresh)."""
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
