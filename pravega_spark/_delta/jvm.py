"""JVM classes and constants looked up once per gateway.

Resolving ``jvm.org.apache.spark.sql.delta.DeltaLog`` through py4j costs one round trip per name
segment (each asks the JVM whether the prefix is a class); a class looked up once is one object
whose static methods and constructors cost one call each."""

from __future__ import annotations

_CLASSES: dict[tuple[int, str], tuple[object, object]] = {}


def java_class(gateway, name: str):
    """The JVM class (or Scala object) ``name`` of ``gateway`` (a ``JVMView``)."""
    def look_up():
        found = gateway
        for part in name.split("."):
            found = getattr(found, part)
        return found

    return once(gateway, name, look_up)


def once(gateway, name: str, make):
    """``make()``'s value, made once per gateway under ``name``."""
    key = (id(gateway), name)
    hit = _CLASSES.get(key)
    if hit is not None and hit[0] is gateway:
        return hit[1]
    value = make()
    _CLASSES[key] = (gateway, value)
    return value


def none(gateway):
    """Scala's ``None``."""
    return once(gateway, "<None>", lambda: java_class(gateway, "scala.Option").empty())


def mapper(gateway):
    """Delta's JSON mapper (the one its log is written with)."""
    return once(gateway, "<mapper>", lambda: java_class(gateway, "org.apache.spark.sql.delta.util.JsonUtils").mapper())


def to_seq(gateway, items):
    """A Scala ``Seq`` of a Python list of JVM objects (or of a Java ``List``)."""
    return java_class(gateway, "org.apache.spark.api.python.PythonUtils").toSeq(items)


def delta_log(spark, path: str):
    """Delta's ``DeltaLog`` of the table at ``path`` (cached by Delta per path)."""
    gateway = spark.sparkContext._jvm
    return java_class(gateway, "org.apache.spark.sql.delta.DeltaLog").forTable(spark._jsparkSession, path)


def evict_delta_logs(spark, paths) -> None:
    """Drop the tables at ``paths`` from Delta's log cache (``DeltaLog.invalidateCache``, which
    also uncaches each one's latest snapshot): Delta never evicts a table it saw dropped or
    deleted, so its log and snapshot would stay in the driver's heap for the cache's retention
    (60 minutes by default). A path Delta never loaded costs one lookup."""
    gateway = spark.sparkContext._jvm
    delta_log_class = java_class(gateway, "org.apache.spark.sql.delta.DeltaLog")
    for path in paths:
        delta_log_class.invalidateCache(spark._jsparkSession, hadoop_path(gateway, path))


def _delta_log_module(spark):
    """Scala's ``DeltaLog`` object itself (its ``private[delta]`` members have no static forwarder)."""
    gateway = spark.sparkContext._jvm
    return getattr(java_class(gateway, "org.apache.spark.sql.delta.DeltaLog$"), "MODULE$")


def cached_delta_logs(spark) -> int:
    """How many tables Delta's log cache holds now (this JVM's, all sessions)."""
    return int(_delta_log_module(spark).cacheSize())


def cached_delta_log_paths(spark) -> list[str]:
    """The ``_delta_log`` paths Delta's log cache holds now (for benches and tests)."""
    cache = _delta_log_module(spark).getOrCreateCache(spark._jsparkSession.sessionState().conf())
    return [str(key.path().toString()) for key in cache.asMap().keySet()]


def clear_delta_logs(spark) -> None:
    """Empty Delta's log cache (``DeltaLog.clearCache``; for benches and tests)."""
    java_class(spark.sparkContext._jvm, "org.apache.spark.sql.delta.DeltaLog").clearCache()


def hadoop_path(gateway, *parts):
    """Hadoop's ``Path(*parts)``."""
    return java_class(gateway, "org.apache.hadoop.fs.Path")(*parts)


# The OSS Delta classes the classic backend calls (``log``, ``actions``, ``transaction``): on
# Databricks Runtime none of them exist (its Delta lives under ``com.databricks.sql.transaction.tahoe``).
# Tests name a class that cannot load here to see the fallback.
PROBED_CLASSES = (
    "org.apache.spark.sql.delta.DeltaLog",
    "org.apache.spark.sql.delta.actions.Action",
    "org.apache.spark.sql.delta.DeltaOperations",
    "org.apache.spark.sql.delta.util.JsonUtils",
)
# the Scala version whose collections ``actions`` builds (``ArraySeq``: 2.13)
SCALA_BINARY = "2.13"


def classic_unavailable(spark) -> str | None:
    """Why the classic backend cannot serve ``spark``, or None when it can: the session has a
    JVM handle, every class of ``PROBED_CLASSES`` loads (a py4j name that is not a class comes
    back as a ``JavaPackage`` and fails only when called, so each is loaded by name), and the
    JVM's Scala is ``SCALA_BINARY``. A few py4j calls, made once per session by ``backend_for``."""
    gateway = getattr(spark, "_jvm", None)
    if gateway is None or getattr(spark, "_jsparkSession", None) is None:
        return "the session has no JVM handle"
    from py4j.protocol import Py4JError

    try:
        loader = gateway.py4j.reflection.ReflectionUtil
        for name in PROBED_CLASSES:
            loader.classForName(name)
        scala = str(gateway.scala.util.Properties.versionNumberString())
    except Py4JError as exc:
        first = str(exc).strip().splitlines()
        missing = next((line for line in first if "ClassNotFound" in line or "NoClassDefFound" in line),
                       first[0] if first else type(exc).__name__)
        return f"OSS Delta's classes do not load in the session's JVM ({missing.strip()[:160]})"
    if not (scala == SCALA_BINARY or scala.startswith(SCALA_BINARY + ".")):
        return f"the JVM runs Scala {scala}, and the classic backend builds Scala {SCALA_BINARY} collections"
    return None
