"""Stores on a real S3 server (S3Proxy on 127.0.0.1, started by ``scripts/test_tiers.sh s3``):
put-if-absent log commits raced by real processes, the refusal of an unsafe log store, and one
clear line for a wrong endpoint, wrong keys or a missing bucket."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

import pravega_spark as ps
from pravega_spark import _delta
from tests.processes import REPO, spawn

pytestmark = pytest.mark.s3


def test_processes_racing_for_one_log_version_one_wins_and_the_loser_retries(spark, root, manager, stream2):
    """Two processes write the same ``_delta_log`` version at once, several rounds: exactly one
    wins each round, the other gets the conflict Delta retries on (FileAlreadyExistsException),
    and the file holds the winner's text. Then both append at once to one segment: both events
    land once each, and the loser's lost commit shows as a retry."""
    rounds = 4
    with tempfile.TemporaryDirectory() as barrier:
        procs = [spawn("log-race", "--root", root, "--writer", w, "--rounds", str(rounds), "--parties", "2",
                       "--barrier", barrier) for w in ("a", "b")]
        outputs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, f"worker failed:\n{out}\n{err[-3000:]}"
    lines = [(w, line.split()) for w, (out, _) in zip("ab", outputs, strict=True) for line in out.splitlines()]
    jvm = spark.sparkContext._jvm
    for r in range(rounds):
        outcomes = {w: parts[2:] for w, parts in lines if parts[:2] == ["LOG", str(r)]}
        winners = [w for w, o in outcomes.items() if o == ["WON"]]
        assert len(winners) == 1, outcomes
        [loser] = set("ab") - set(winners)
        assert outcomes[loser] == ["LOST", "java.nio.file.FileAlreadyExistsException"], outcomes
        path = jvm.org.apache.hadoop.fs.Path(f"{root}/log-race/{r}/_delta_log/00000000000000000000.json")
        stream = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).open(path)
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        stream.close()
        assert text.strip() == f'{{"writer":"{winners[0]}"}}'
    retries = sum(int(parts[2]) for _, parts in lines if parts[0] == "WRITE")
    assert retries >= 1  # at least one round's appends met on the same log version
    events = Counter(r.event.decode() for r in manager.read_events("iot", "sensors").collect())
    assert events == Counter(f"{w}:{r}" for w in "ab" for r in range(rounds))
    assert manager.validate_stream("iot", "sensors").success


def test_a_store_on_s3_without_a_put_if_absent_log_store_is_refused(spark, root):
    """With Delta's default S3 log store named, ``StreamManager`` refuses the root with one line
    naming the setting to add, and writes nothing."""
    key = "spark.delta.logStore.s3a.impl"
    configured = spark.conf.get(key)
    assert configured == "pravegaspark.delta.ConditionalPutLogStore"  # what ps.spark_session() set
    spark.conf.set(key, "io.delta.storage.S3SingleDriverLogStore")
    try:
        with pytest.raises(ps.UnsafeLogStoreError) as refused:
            ps.StreamManager(spark, root)
    finally:
        spark.conf.set(key, configured)
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert "spark.delta.logStore.s3a.impl=pravegaspark.delta.ConditionalPutLogStore" in message
    assert not _delta.is_table(spark, f"{root}/_pravega/scopes")
    ps.StreamManager(spark, root).create_scope("ok")  # and with it back, the same root works


@pytest.mark.parametrize("setting, value, expected", [
    ("endpoint", "http://127.0.0.1:1", "cannot connect to the endpoint"),
    ("secret.key", "not-the-secret", "access denied"),
    (None, None, "the bucket does not exist"),
])
def test_a_wrong_endpoint_wrong_keys_or_a_missing_bucket_fail_at_the_manager_with_one_line(
        spark, root, setting, value, expected):
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    bucket = urlparse(root).netloc
    bucket_key = f"fs.s3a.bucket.{bucket}.{setting}"
    if setting:
        conf.set(bucket_key, value)
    target = root if setting else root.replace(f"s3a://{bucket}/", "s3a://no-such-bucket/")
    try:
        with pytest.raises(ps.StorageAccessError) as failed:
            ps.StreamManager(spark, target)
    finally:
        if setting:
            conf.unset(bucket_key)
    message = str(failed.value)
    assert len(message.splitlines()) == 1 and expected in message and target in message
    assert isinstance(failed.value, ps.PravegaSparkError)


@pytest.mark.slow
def test_demo_pipeline_on_a_local_cluster_with_its_root_on_s3(tmp_path, root):
    """The demo job with the S3 server's settings and a ``local-cluster`` master, all from one
    ``spark-defaults.conf``: executors in other JVMs write the root on S3 (their tasks through
    pyarrow's S3 file system), and the job ends ``RESULT: OK``."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    given = (Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf").read_text()
    (conf_dir / "spark-defaults.conf").write_text(given + "spark.master local-cluster[2,1,1024]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_TEST_", "PYSPARK_"))}
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "demo_pipeline.py"), "--root", root], cwd=tmp_path,
                          env=dict(env, SPARK_CONF_DIR=str(conf_dir)), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "RESULT: OK" in done.stdout
    assert f"store {root} (master=local-cluster[2,1,1024])" in done.stderr + done.stdout
