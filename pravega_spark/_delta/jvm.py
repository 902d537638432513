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


def hadoop_path(gateway, *parts):
    """Hadoop's ``Path(*parts)``."""
    return java_class(gateway, "org.apache.hadoop.fs.Path")(*parts)
