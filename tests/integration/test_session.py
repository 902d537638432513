"""Set-up and session agree on where Delta's jars are, also when ``HOME`` is not the JVM's
``user.home`` (a service account, a container with another HOME)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pravega_spark as ps
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


def test_the_session_commits_to_s3_with_put_if_absent_and_an_unsafe_log_store_is_refused(spark, monkeypatch):
    """``ps.spark_session()`` names our put-if-absent log store for ``s3a``/``s3`` (its jar in
    ``spark.jars``); naming Delta's single-driver store instead makes an S3 root unsafe, refused
    with the setting to add, unless a single writer process is declared."""
    from pravega_spark import _delta
    from pravega_spark._delta import object_store

    assert spark.conf.get("spark.delta.logStore.s3a.impl") == _session.LOG_STORE_CLASS
    assert _session.log_store_jar() in spark.conf.get("spark.jars")
    _delta.backend_for(spark).check_root("file:/tmp/anything")  # local roots: nothing to check
    object_store.check_commits_safe(spark, "s3a://bucket/lake")
    key = "spark.delta.logStore.s3a.impl"
    spark.conf.set(key, "io.delta.storage.S3SingleDriverLogStore")
    try:
        with pytest.raises(ps.UnsafeLogStoreError, match=f"{key}={_session.LOG_STORE_CLASS}"):
            object_store.check_commits_safe(spark, "s3a://bucket/lake")
        object_store.check_commits_safe(spark, "abfss://c@a.dfs.core.windows.net/lake")  # not S3
        monkeypatch.setenv(object_store.SINGLE_WRITER_ENV, "1")
        object_store.check_commits_safe(spark, "s3a://bucket/lake")
        spark.conf.set(key, "io.delta.storage.S3DynamoDBLogStore")  # another put-if-absent store: trusted
        monkeypatch.delenv(object_store.SINGLE_WRITER_ENV)
        object_store.check_commits_safe(spark, "s3a://bucket/lake")
    finally:
        spark.conf.set(key, _session.LOG_STORE_CLASS)


def test_pyarrow_s3_options_follow_the_sessions_s3a_settings_per_bucket_first(spark):
    from pravega_spark import _delta
    from pravega_spark.writers.task_files import task_storage

    conf = spark.sparkContext._jsc.hadoopConfiguration()
    given = {"fs.s3a.endpoint": "http://127.0.0.1:9000", "fs.s3a.endpoint.region": "eu-west-1",
             "fs.s3a.path.style.access": "true", "fs.s3a.access.key": "global-key",
             "fs.s3a.secret.key": "global-secret", "fs.s3a.bucket.special.access.key": "bucket-key",
             "fs.s3a.bucket.special.secret.key": "bucket-secret"}
    try:
        for k, v in given.items():
            conf.set(k, v)
        options = _delta.backend_for(spark).pyarrow_s3_options("s3a://lake/root/t")
        assert options == {"allow_bucket_creation": False, "allow_bucket_deletion": False,
                           "endpoint_override": "127.0.0.1:9000", "scheme": "http", "region": "eu-west-1",
                           "force_virtual_addressing": False, "access_key": "global-key",
                           "secret_key": "global-secret"}
        special = _delta.backend_for(spark).pyarrow_s3_options("s3a://special/t")
        assert (special["access_key"], special["secret_key"]) == ("bucket-key", "bucket-secret")
        assert _delta.backend_for(spark).pyarrow_s3_options("abfss://c@a.dfs.core.windows.net/t") is None
        storage = task_storage("s3a://lake/root/t", options)
        assert storage.base == "lake/root/t" and storage.path("a/b.parquet") == "lake/root/t/a/b.parquet"
        assert "secret" not in repr(storage) and repr(storage) == "TaskStorage(s3://lake/root/t)"
        assert task_storage("abfss://c@a.dfs.core.windows.net/t", None) is None
        assert task_storage("file:/tmp/x%20y/t", None).base == "/tmp/x y/t"
    finally:
        for k in given:
            conf.unset(k)


MEMORY_KEYS = ("spark.databricks.delta.delta.log.cacheSize", "spark.databricks.delta.delta.log.cacheRetentionMinutes",
               "spark.sql.ui.retainedExecutions", "spark.ui.retainedJobs", "spark.ui.retainedStages")


def test_a_session_the_library_builds_bounds_the_drivers_caches(spark):
    """Delta's log cache and Spark's SQL tab are bounded when the session is built (they are
    read once per JVM); the test session is built by ``ps.spark_session``."""
    conf = spark.sparkContext.getConf()
    assert {k: conf.get(k) for k in MEMORY_KEYS} == _session.MEMORY_DEFAULTS


@pytest.mark.slow
def test_under_spark_submit_the_memory_defaults_fill_in_only_what_was_not_given(tmp_path):
    """A job launched by spark-submit gets the library's memory defaults for what spark-submit
    was not given, and keeps what it was given (here a larger log cache)."""
    script = tmp_path / "job.py"
    script.write_text("import pravega_spark as ps\nc = ps.spark_session().sparkContext.getConf()\n"
                      f"print('GOT', *[c.get(k) for k in {MEMORY_KEYS!r}])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    run = subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--master", "local[1]",
                          "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                          "--conf", "spark.ui.enabled=false",
                          "--conf", "spark.databricks.delta.delta.log.cacheSize=64", str(script)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "GOT 64 10 100 100 100" in run.stdout
