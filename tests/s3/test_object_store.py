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


@pytest.mark.process
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
    assert not _delta.backend_for(spark).is_table(f"{root}/_pravega/scopes")
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
    """The demo job with the S3 server's settings, a ``local-cluster`` master and the executors'
    Python path, all from one ``spark-defaults.conf`` (the cluster tier's case too: the job takes
    its master from there alone): executors in other JVMs, whose Python cannot import the
    installed package (``tests/cluster/no_pravega_spark/sitecustomize.py`` hides it), get it
    shipped by ``StreamManager``, write the root on S3 (their tasks through pyarrow's S3 file
    system), and the job ends ``RESULT: OK`` with no traceback."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    given = (Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf").read_text()
    (conf_dir / "spark-defaults.conf").write_text(
        given + "spark.master local-cluster[2,1,1024]\n"
        f"spark.executorEnv.PYTHONPATH {REPO / 'tests' / 'cluster' / 'no_pravega_spark'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRAVEGA_SPARK_", "PYSPARK_"))}
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "demo_pipeline.py"), "--root", root], cwd=tmp_path,
                          env=dict(env, SPARK_CONF_DIR=str(conf_dir)), capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "RESULT: OK" in done.stdout
    assert "Traceback" not in out, out[-5000:]  # a healthy run prints no traceback
    assert f"store {root} (master=local-cluster[2,1,1024])" in out
    assert "2 of 2 executor slots could not import the package; shipped it with addPyFile" in out


def _log_store(spark):
    return spark.sparkContext._jvm.pravegaspark.delta.ConditionalPutLogStore


def test_a_log_listing_with_a_gap_is_listed_again_and_a_gap_that_stays_is_reported_not_retried(
        spark, root, manager, stream2):
    """The log store lists a ``_delta_log`` again when the ``N.json`` versions it got have a gap
    (as S3Proxy 4.0.0's cut-short LISTs gave): a gap in one listing costs a second listing, not
    an error. The gap comes from the log store's test hook, which leaves one version out of the
    next listings of the events table's log, as a cut-short LIST would; with the store's
    re-listing switched off, the same gap is Delta's DELTA_VERSIONS_NOT_CONTIGUOUS, and a gap
    that stays through every re-listing is reported, not retried as a conflict."""
    store = _log_store(spark)
    jvm = spark.sparkContext._jvm
    writer = manager.create_event_writer("iot", "sensors", "w")
    for b in range(3):
        writer.write_events(spark.createDataFrame([(f"k{i}", f"{b}:{i}") for i in range(5)],
                                                  "routing_key string, event string"))
    events = manager._store.events_path("iot", "sensors")
    latest = _delta.backend_for(spark).version(events)
    assert latest >= 3
    gap = latest - 1  # a middle version: the listing still starts at 0 and ends at the latest
    log_dir = f"{events}/_delta_log"

    def afresh(read):
        jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the next read lists the log
        return read()

    try:
        relists = store.relists()
        store.dropFromListings(log_dir, gap, 1)
        assert afresh(lambda: manager.read_events("iot", "sensors").count()) == 15
        assert store.relists() == relists + 1  # one listing had the gap, the next one did not

        spark.conf.set("pravegaspark.delta.logStore.listRetries", "0")
        store.dropFromListings(log_dir, gap, 1)
        with pytest.raises(Exception, match="DELTA_VERSIONS_NOT_CONTIGUOUS"):
            afresh(lambda: _delta.backend_for(spark).version(events))  # the hook's gap, as Delta sees it unless listed again
        spark.conf.unset("pravegaspark.delta.logStore.listRetries")

        store.dropFromListings(log_dir, gap, 100)  # a gap that stays: the log looks damaged
        relists = store.relists()
        calls = []

        def step():
            calls.append(1)
            return afresh(lambda: _delta.backend_for(spark).version(events))

        with pytest.raises(Exception, match="DELTA_VERSIONS_NOT_CONTIGUOUS"):
            _delta.retrying(step, "read", _delta.RetryPolicy(attempts=5, initial_backoff=0.0, max_backoff=0.0))
        assert len(calls) == 1  # not retried as a conflict
        assert store.relists() >= relists + 3  # listed again 3 times, then returned as listed
    finally:
        store.dropFromListings(log_dir, 0, 0)
        spark.conf.unset("pravegaspark.delta.logStore.listRetries")
    assert afresh(lambda: _delta.backend_for(spark).version(events)) == latest


def test_a_commit_whose_response_was_lost_and_whose_put_was_sent_again_is_committed_once(spark, stream2_template):
    """A conditional PUT of ``_delta_log/N.json`` reaches the server, which stores it, but its
    response is lost (a loopback proxy in front of the S3 server closes the connection instead
    of answering); the client sends the PUT again and gets 412 for the object its own first
    attempt wrote. The log store sees that the object holds exactly its commit and reports
    success, so the append is one commit, at version N. Reported as a lost race (the log store
    before #43), Delta committed the same actions again at N+1: a duplicate commit, and a retry
    of the append by the library would have written every event twice."""
    from tests.conftest import S3_DATA, copy_store
    from tests.s3.fault_proxy import DropOneCommitResponse

    upstream = urlparse(spark.conf.get("spark.hadoop.fs.s3a.endpoint"))
    proxy = DropOneCommitResponse((upstream.hostname, upstream.port))
    bucket = f"lost-response-{os.urandom(4).hex()}"  # a bucket of its own: its S3A client talks to the proxy
    os.makedirs(os.path.join(S3_DATA, bucket))  # a bucket is a folder of the server's file-system backend
    endpoint_key = f"fs.s3a.bucket.{bucket}.endpoint"
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop_conf.set(endpoint_key, proxy.endpoint)
    spark.conf.set(endpoint_key, proxy.endpoint)
    store = _log_store(spark)
    try:
        root = f"s3a://{bucket}/store"
        copy_store(stream2_template, root)
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
        manager = ps.StreamManager(spark, root)
        events = manager._store.events_path("iot", "sensors")
        before = _delta.backend_for(spark).version(events)
        proxy.arm(rf"/{bucket}/store/iot/sensors/_delta_log/\d{{20}}\.json$")
        result = manager.create_event_writer("iot", "sensors", "w").write_events(spark.createDataFrame(
            [(f"k{i % 4}", f"e{i}") for i in range(40)], "routing_key string, event string"))
        commit = f"/{bucket}/store/iot/sensors/_delta_log/{before + 1:020d}.json"
        attempts = [(p.status, p.dropped) for p in proxy.puts if p.path == commit]
        assert attempts == [(200, True), (412, False)], proxy.puts  # stored, answer lost, sent again
        assert manager.read_events("iot", "sensors").count() == 40
        assert (result.version, _delta.backend_for(spark).version(events)) == (before + 1, before + 1)  # no 2nd commit at N+1
        assert manager.validate_stream("iot", "sensors").success
        assert store.ownCommitsRefused() >= 1  # the log store told its own object from a rival's
    finally:
        hadoop_conf.unset(endpoint_key)
        spark.conf.unset(endpoint_key)
        proxy.stop()
