"""A Delta-enabled SparkSession: the active one if any, else a local one with Delta's jars."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from pathlib import Path

from pyspark.sql import SparkSession

log = logging.getLogger("pravega_spark")

DELTA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"

# Driver memory (issue #49; README "Sizing the driver"). Delta keeps up to 10,000 tables' logs,
# each 60 minutes after its last use, and a cached log costs ~1.8 MiB of heap however small its
# table (its state's query plans); a stream operation uses 3 logs (the catalogue, the stream's
# segments and events). 8 logs for 10 minutes bound that to ~15 MiB; a log loaded again costs
# 0.3-0.6 s on a read, 40-70 ms on a write. Spark's SQL tab keeps 1,000 queries (~50 KiB each), and
# its jobs and stages pages 1,000 each (kept with the UI off too); the library runs several per
# operation: 100 of each are kept. All are read once per JVM, when it
# starts: sessions the library builds set them (under spark-submit, those it was not given)
MEMORY_DEFAULTS = {
    "spark.databricks.delta.delta.log.cacheSize": "8",
    "spark.databricks.delta.delta.log.cacheRetentionMinutes": "10",
    "spark.sql.ui.retainedExecutions": "100",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
}

# Settings that make a small local session behave: few shuffle partitions, Delta's snapshot
# reconstruction on few partitions (its default of 50 costs seconds per table access locally).
LOCAL_DEFAULTS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    # VACUUM lists a table with this many tasks (10,000 by default: about 25 s per small table on
    # two cores); a store's tables want a few. Set here, where the session is built: the public-API
    # backend never sets a session setting
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    **MEMORY_DEFAULTS,
    "spark.driver.extraJavaOptions": "-Dderby.system.home=/tmp/derby "
                                     f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}",
}


def delta_artifact() -> str:
    """Maven coordinates of the Delta build matching the installed pyspark (e.g. 4.1 -> _4.1_2.13)."""
    import pyspark

    major_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{major_minor}_{SCALA_VERSION}:{DELTA_VERSION}"


def maven_repository() -> Path:
    """The local Maven repository that ``scripts/setup.sh`` fills: ``$M2_REPOSITORY``, else
    ``~/.m2/repository`` under ``$HOME`` (set-up passes it to mvn as ``-Dmaven.repo.local``, so the
    JVM's ``user.home`` does not matter)."""
    return Path(os.environ.get("M2_REPOSITORY") or Path(os.environ.get("HOME") or Path.home()) / ".m2" / "repository")


def local_delta_jars(m2_repository: str | os.PathLike[str] | None = None) -> list[str] | None:
    """Paths of Delta's jars in the local Maven repository, or None when they are not there."""
    repo = Path(m2_repository or maven_repository())
    group, artifact, version = delta_artifact().split(":")
    jars = [
        repo / "io" / "delta" / artifact / version / f"{artifact}-{version}.jar",
        repo / "io" / "delta" / "delta-storage" / version / f"delta-storage-{version}.jar",
    ]
    return [str(j) for j in jars] if all(j.is_file() for j in jars) else None


# Hadoop's S3A connector for pyspark's Hadoop 3.4.2, with the AWS SDK bundle of that release (a
# newer SDK breaks third-party stores): on the driver's and executors' class path when
# ``scripts/setup.sh s3`` fetched them, so that ``s3a://`` roots work with no further setting. A class path
# entry costs nothing until a class is loaded, and executors read the jars in place (``spark.jars``
# would copy the 640 MB bundle into every executor).
S3A_JARS = (
    ("org.apache.hadoop", "hadoop-aws", "3.4.2"),
    ("software.amazon.awssdk", "bundle", "2.29.52"),
    ("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.2.1"),
)
CLASS_PATH_CONF = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")
# Our Delta log stores (``java/``; their jar ships in the package): put-if-absent commits for
# object stores; for the local file system, Delta's own store with a listing that reads only the
# log files it returns (Delta's lists the status of every log file, however old)
LOG_STORE_CLASS = "pravegaspark.delta.ConditionalPutLogStore"
LOCAL_LOG_STORE_CLASS = "pravegaspark.delta.LocalListingLogStore"
LOG_STORE_SCHEMES = ("s3a", "s3")


def s3a_jars(m2_repository: str | os.PathLike[str] | None = None) -> list[str] | None:
    """Paths of the S3A connector's jars in the local Maven repository, or None when missing."""
    repo = Path(m2_repository or maven_repository())
    jars = [repo.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")
            for group, artifact, version in S3A_JARS]
    return [str(j) for j in jars] if all(j.is_file() for j in jars) else None


def log_store_jar() -> str | None:
    """The jar of our log stores (``LOG_STORE_CLASS``, ``LOCAL_LOG_STORE_CLASS``), shipped in
    the package (None in a checkout whose jar was removed)."""
    jar = Path(__file__).parent / "_delta" / "jars" / "pravega-spark-logstore.jar"
    return str(jar) if jar.is_file() else None


def log_store_conf() -> dict[str, str]:
    """The settings that make Delta commit to ``s3a://``/``s3://`` logs with put-if-absent, and
    list local logs with ``LocalListingLogStore``."""
    conf = {f"spark.delta.logStore.{scheme}.impl": LOG_STORE_CLASS for scheme in LOG_STORE_SCHEMES}
    conf["spark.delta.logStore.file.impl"] = LOCAL_LOG_STORE_CLASS
    return conf


LOOPBACK = "127.0.0.1"
LOOPBACK_CONF = ("spark.driver.host", "spark.driver.bindAddress")


def defaults_file() -> dict[str, str]:
    """The settings of ``spark-defaults.conf`` in ``$SPARK_CONF_DIR`` (else ``$SPARK_HOME/conf``),
    which a new session reads by itself: ``spark_session`` never sets one of them."""
    folder = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None)
    path = Path(folder) / "spark-defaults.conf" if folder else None
    if path is None or not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        found = re.match(r"([^\s=:#!]+)\s*[=:\s]\s*(.*)", line)  # Java properties: key, separator, value
        if found:
            out[found.group(1)] = found.group(2).strip()
    return out


def spark_session(**spark_conf: str) -> SparkSession:
    """Return a Delta-enabled SparkSession.

    Mirrors how users already run Spark: on Databricks (or wherever a session is active) the active
    session is returned unchanged (its Delta is used, nothing is fetched). Under ``spark-submit``
    the session is built from spark-submit's settings, adding only ``spark_conf`` and the
    ``MEMORY_DEFAULTS`` it was not given (Delta's log cache, Spark's SQL tab: README "Sizing the
    driver"). With ``SPARK_REMOTE`` set (say
    ``sc://127.0.0.1:15002``, as ``scripts/connect_server.sh start`` prints), a Spark Connect session
    to that server is returned: the library then works with public SQL only. Otherwise a local session is
    built with Delta's extension and catalog, and Delta's jars from the local Maven repository
    (``make setup`` puts them there); if they are missing, ``spark.jars.packages`` lets Spark fetch
    them from Maven Central. A setting given in ``spark-defaults.conf`` (``SPARK_CONF_DIR``) or
    ``spark_conf`` is never replaced by a default of ours; on a local master the driver binds to
    127.0.0.1 unless one of them says otherwise.

    Args:
        **spark_conf: extra settings for a new local session, with dots written as given, e.g.
            ``spark_session(**{"spark.sql.shuffle.partitions": "8"})``. Ignored when a session
            is already active.

    Example:
        >>> spark = spark_session()  # doctest: +SKIP
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if os.environ.get("SPARK_REMOTE"):
        # pyspark's convention: a Spark Connect session to that server. Its master, jars and
        # static settings are the server's; the caller's runtime settings are set on the session
        # (one the server refuses, such as a master or a driver's memory, is skipped)
        session = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
        for key, value in spark_conf.items():
            try:
                session.conf.set(key, value)
            except Exception as exc:  # noqa: BLE001 - a static or refused setting
                log.debug("spark_session: %s not set on the Connect session (%s)", key, str(exc).splitlines()[0])
        return session
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # launched by spark-submit (or the pyspark shell): its master, jars and settings apply;
        # the caller's own settings are added, and the memory defaults spark-submit was not given
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the JVM spark-submit started: its SparkConf holds --conf
        submitted = SparkConf()
        conf = {k: v for k, v in MEMORY_DEFAULTS.items() if not submitted.contains(k)}
        conf.update(spark_conf)
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    # Python workers run the driver's interpreter (same pyspark), not whatever python3 is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    given = defaults_file()
    builder = SparkSession.builder.appName(spark_conf.pop("spark.app.name", "pravega-spark"))
    master = spark_conf.get("spark.master") or given.get("spark.master") or os.environ.get("MASTER")
    if master is None:
        master = "local[2]"
        builder = builder.master(master)
    conf = {k: v for k, v in LOCAL_DEFAULTS.items() if k not in given}
    if master.startswith("local"):  # a local driver (and a local-cluster's executors) on loopback only
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        conf.update({k: LOOPBACK for k in LOOPBACK_CONF if k not in given})
    if master.startswith("local-cluster"):
        # its Workers build executors from $SPARK_HOME/jars: the pip package's own directory
        import pyspark

        os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    conf.update(spark_conf)
    conf.update(_jar_conf({**given, **conf}))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("PRAVEGA_SPARK_SPARK_LOG_LEVEL", "ERROR"))
    return session


def _jar_conf(known: dict[str, str]) -> dict[str, str]:
    """The jar settings of a new session, for those not ``known`` (given by the caller or
    ``spark-defaults.conf``): Delta's jars from the local Maven repository (else
    ``spark.jars.packages``, fetched by Spark), our log store's jar and its per-scheme setting
    (unless a log store is named), and the S3A connector on the class path."""
    conf: dict[str, str] = {}
    store_jar = log_store_jar()
    if "spark.jars" not in known:
        delta = local_delta_jars()
        if delta is None and "spark.jars.packages" not in known:
            log.warning("Delta jars not found in %s (run `make setup`); asking Spark to fetch %s",
                        maven_repository(), delta_artifact())
            conf["spark.jars.packages"] = delta_artifact()
        jars = (delta or []) + ([store_jar] if store_jar else [])
        if jars:
            conf["spark.jars"] = ",".join(jars)
    if store_jar and store_jar in conf.get("spark.jars", "") and "spark.delta.logStore.class" not in known:
        conf.update({k: v for k, v in log_store_conf().items() if k not in known})
    aws = s3a_jars()
    if aws:
        conf.update({k: ":".join(aws) for k in CLASS_PATH_CONF if k not in known})
    return conf


def connect_server_conf(port: int, log_config: str | None = None) -> dict[str, str]:
    """The settings of a local Spark Connect server with Delta (``scripts/connect_server.sh``):
    Delta's extension and catalog, its jars and our log store, the local defaults, and every
    listener (gRPC, driver, block manager) on 127.0.0.1; ``log_config``: a log4j2 file."""
    conf = dict(LOCAL_DEFAULTS)
    if log_config:
        conf["spark.driver.extraJavaOptions"] += f" -Dlog4j2.configurationFile={log_config}"
    conf.update({k: LOOPBACK for k in LOOPBACK_CONF})
    conf.update({
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.app.name": "pravega-spark-connect",
    })
    conf.update(_jar_conf(conf))
    return conf


_SHIPPED: set[str] = set()  # application ids of the SparkContexts already checked


def on_databricks() -> bool:
    """Whether this process runs on a Databricks cluster (libraries are installed there)."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def ship_package(spark: SparkSession) -> bool:
    """Make ``pravega_spark`` importable in the executors' Python workers, once per SparkContext.

    The write path's Arrow tasks and the large events' UDFs run there. A local master's workers
    run this machine's interpreter (``PYSPARK_PYTHON``) and need nothing. On any other master one
    small job (a task per slot; an executor that registers later is not asked) asks the
    executors whether they can import the package; if some cannot, a zip of the
    package is added with ``SparkContext.addPyFile`` (Spark ships it to every executor, present
    and future). Never done on Databricks, where cluster libraries (or ``%pip``) are the norm.

    Returns:
        True when the package was shipped by this call.
    """
    if not hasattr(spark, "_jsc"):  # a Spark Connect session: the server's environment has the library
        return False
    sc = spark.sparkContext
    master = sc.master
    if on_databricks() or master == "local" or master.startswith("local[") or sc.applicationId in _SHIPPED:
        return False
    import importlib.util

    slots = max(1, sc.defaultParallelism)
    # the mapped functions are the standard library's (pickled by name): a function of this
    # package could not be unpickled where the package is missing
    found = sc.parallelize(["pravega_spark"] * slots, slots).map(importlib.util.find_spec).map(bool).collect()
    _SHIPPED.add(sc.applicationId)
    if all(found):
        return False
    sc.addPyFile(package_zip())
    log.info("pravega_spark: %d of %d executor slots could not import the package; shipped it with addPyFile",
             found.count(False), len(found))
    return True


_ZIP: list[str] = []  # this process's zip of the package, once made
_ZIP_LOCK = threading.Lock()


def package_zip() -> str:
    """A zip of the installed ``pravega_spark`` package (its Python files and jars), made once per
    process in a new temporary folder (never one left by an earlier process)."""
    import tempfile
    import zipfile

    with _ZIP_LOCK:
        if not _ZIP:
            package = Path(__file__).parent
            target = Path(tempfile.mkdtemp(prefix="pravega_spark-")) / "pravega_spark.zip"
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(package.rglob("*")):
                    if path.is_file() and "__pycache__" not in path.parts:
                        archive.write(path, path.relative_to(package.parent))
            _ZIP.append(str(target))
        return _ZIP[0]


def active_session():
    """The session a pickled handle is rebuilt in (a ``foreachBatch`` function on a Spark Connect
    server, an executor-free driver job): the thread's active classic session, else the active
    Spark Connect session.

    Raises:
        IllegalStateError: there is none.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        active = ConnectSession.getActiveSession() or ConnectSession._get_default_session()
    except Exception:  # noqa: BLE001 - no Connect client installed, or none active
        active = None
    if active is None:
        from .errors import IllegalStateError

        raise IllegalStateError("a pravega_spark handle was unpickled where no SparkSession is active: create one "
                                "first (ps.spark_session())")
    return active
