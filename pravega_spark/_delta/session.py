"""The session side of the seam: a session's settings for a store, paths qualified by their
file system, and the few facts about sessions and plans the library needs from the JVM."""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession

from .jvm import hadoop_path
from .local_data import is_connect_session

# Delta lists a table's application versions (SetTransaction) in each commit's checksum file only
# up to this many; ``DeltaTransaction.app_version`` reads them from there (no Spark job). Every session
# that commits to an events table sets it (see ``writer.WRITER_CONF`` and ``StreamManager``).
CRC_APP_VERSIONS_CONF = "spark.databricks.delta.setTransactionsInCrc.maxAllowed"
CRC_APP_VERSIONS = "10000"

# Delta can also list a small table's files in each commit's checksum file. Catalog tables (one
# file per stream row, one per segments table) and young events tables stay under the threshold,
# so their files, tails and rows are found without a Spark job (``DeltaTransaction.all_files``); a
# bigger table falls back to a query over the snapshot.
SESSION_CONF = {
    CRC_APP_VERSIONS_CONF: CRC_APP_VERSIONS,
    "spark.databricks.delta.allFilesInCrc.enabled": "true",
    "spark.databricks.delta.allFilesInCrc.thresholdNumFiles": "1000",
}


def configure_session(spark: SparkSession) -> None:
    """Apply ``SESSION_CONF`` to a session that commits to a store's tables."""
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)


def qualify(spark: SparkSession, path: str) -> str:
    """``path`` made absolute and qualified by its file system (Hadoop's ``makeQualified``):
    ``store/demo`` -> ``file:/home/me/store/demo``; ``dbfs:/``, ``s3a://``, ``abfss://`` paths keep
    their scheme and authority. Delta takes a relative path for a table name, so every table path
    is built on a qualified root."""
    gateway = spark.sparkContext._jvm
    given = hadoop_path(gateway, path)
    fs = given.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not given.isAbsolute() and str(fs.getUri().getScheme()) == "file":
        # relative to this Python process's working directory (the JVM's may differ after a chdir)
        given = hadoop_path(gateway, os.path.abspath(path))
    return str(fs.makeQualified(given).toString()).rstrip("/")


def activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the JVM thread serving this Python thread (a
    listener's callback thread has none, and Delta's log reads need one)."""
    sessions = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession
    sessions.setActiveSession(spark._jsparkSession)
    if not sessions.getDefaultSession().isDefined():
        sessions.setDefaultSession(spark._jsparkSession)



def wait_for_listeners(spark: SparkSession, timeout_seconds: float) -> bool:
    """Wait until the session's listener bus has delivered every event posted so far (Spark posts
    streaming progress to listeners asynchronously); False if ``timeout_seconds`` passed first."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(timeout_seconds * 1000))
        return True
    except Exception:  # noqa: BLE001 - py4j wraps the JVM's TimeoutException
        return False



def session_key(spark: SparkSession) -> int:
    """A key of the session's JVM side (two Python handles of one session share it)."""
    return id(spark._jsparkSession) if hasattr(spark, "_jsparkSession") else id(spark)


def is_stopped(spark: SparkSession) -> bool:
    """Whether the session's SparkContext has stopped."""
    return bool(spark.sparkContext._jsc.sc().isStopped())


def plan_leaves(df: DataFrame) -> list[str]:
    """The class names of the leaves of ``df``'s optimized plan (``LocalRelation``, ...)."""
    leaves = df._jdf.queryExecution().optimizedPlan().collectLeaves()
    return [leaves.apply(i).getClass().getSimpleName() for i in range(leaves.size())]


def estimated_size(df: DataFrame) -> int | None:
    """Spark's own size estimate of ``df``'s optimized plan in bytes (no job), or None."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()  # a Scala BigInt
        return int(size if isinstance(size, int) else str(size.toString()))
    except Exception:  # noqa: BLE001 - no estimate
        return None


def in_session(df: DataFrame, session: SparkSession) -> DataFrame:
    """``df``'s (analyzed) plan as a DataFrame of ``session``, so that a commit, its settings and
    its observed metrics all live in that session."""
    if df.sparkSession is session:
        return df
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    jvm = session.sparkContext._jvm
    jdf = getattr(jvm, "org.apache.spark.sql.classic.Dataset").ofRows(
        session._jsparkSession, df._jdf.queryExecution().analyzed())
    return ClassicDataFrame(jdf, session)



def streaming_query_sink(spark: SparkSession, query_id: str) -> tuple[str, str] | None:
    """The sink class name and the analyzed plan (as text) of an active streaming query of
    ``spark``, or None if it is not active. Called from ``onQueryStarted``, which Spark runs in
    the query's own thread before its first micro-batch."""
    query = spark._jsparkSession.streams().get(query_id)
    if query is None:
        return None
    execution = query.streamingQuery()
    return execution.sink().getClass().getName(), execution.logicalPlan().toString()


def streaming_query_id(spark: SparkSession) -> str | None:
    """The id of the streaming query whose micro-batch this thread runs (a ``foreachBatch``
    function runs in the query's thread), else None; always None over Spark Connect, where the
    function runs in a Python worker of the server (``foreach_batch_here``)."""
    if not foreach_batch_here(spark):
        return None
    return spark.sparkContext.getLocalProperty("sql.streaming.queryId")


def foreach_batch_here(spark: SparkSession) -> bool:
    """Whether a ``foreachBatch`` function of ``spark``'s queries runs in this process (a classic
    session), rather than in a Python worker of a Spark Connect server that this process's
    objects do not reach."""
    return not is_connect_session(spark)


def observed_if_done(observation) -> dict | None:
    """An ``Observation``'s metrics if an action on its DataFrame has finished, else None
    (``Observation.get`` would wait for one forever)."""
    if not hasattr(observation, "_jo"):  # Spark Connect's: filled when the action's response came back
        try:
            return observation.get
        except Exception:  # noqa: BLE001 - no action ran on its DataFrame
            return None
    done = observation._jo is not None and observation._jo.future().isCompleted()
    return observation.get if done else None
