"""Which Delta backend serves a session, rule by rule (``_delta.backend_kind``): classic only
where OSS Delta's classes load in a JVM with the Scala ``_delta`` builds for, never on Databricks
Runtime; the public-API (``sql``) backend everywhere else, with one INFO line naming why; and
``PRAVEGA_SPARK_BACKEND`` choosing instead. Each case uses a session of its own
(``newSession``), since ``backend_for`` chooses once per session."""

from __future__ import annotations

import logging

import pytest

import pravega_spark as ps
from pravega_spark import _delta
from pravega_spark._delta import jvm


@pytest.fixture
def fresh(spark, monkeypatch):
    monkeypatch.delenv("PRAVEGA_SPARK_BACKEND", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    return spark.newSession()


def test_a_jvm_session_with_oss_delta_gets_the_classic_backend(fresh):
    kind, why = _delta.backend_kind(fresh)
    assert kind == "classic" and "OSS Delta (Scala 2.13) loads" in why
    assert type(_delta.backend_for(fresh)).__name__ == "ClassicBackend"


def test_a_session_whose_oss_delta_classes_do_not_load_gets_the_sql_backend(fresh, monkeypatch, caplog, root):
    monkeypatch.setattr(jvm, "PROBED_CLASSES", (*jvm.PROBED_CLASSES, "org.apache.spark.sql.delta.NoSuchDeltaLog"))
    kind, why = _delta.backend_kind(fresh)
    assert kind == "sql" and "OSS Delta's classes do not load" in why and "NoSuchDeltaLog" in why
    with caplog.at_level(logging.INFO, logger="pravega_spark"):
        backend = _delta.backend_for(fresh)
    assert repr(backend) == "SqlBackend()"
    lines = [r.getMessage() for r in caplog.records if "public-API Delta backend" in r.getMessage()]
    assert len(lines) == 1 and "NoSuchDeltaLog" in lines[0] and "\n" not in lines[0]
    again = _delta.backend_for(fresh)  # chosen once per session: no second probe, no second line
    assert repr(again) == "SqlBackend()" and again.spark is fresh
    assert len([r for r in caplog.records if "public-API Delta backend" in r.getMessage()]) == 1
    manager = ps.StreamManager(fresh, root)  # and the store works through it
    manager.create_scope("s")
    assert manager.create_stream("s", "x", ps.StreamConfiguration()) is True
    assert repr(manager._store.backend) == "SqlBackend()"


def test_another_scala_gets_the_sql_backend(fresh, monkeypatch):
    monkeypatch.setattr(jvm, "SCALA_BINARY", "2.12")
    kind, why = _delta.backend_kind(fresh)
    assert kind == "sql" and "Scala 2.13" in why and "2.12" in why


def test_databricks_runtime_never_gets_the_classic_backend(fresh, monkeypatch):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    kind, why = _delta.backend_kind(fresh)
    assert kind == "sql" and "Databricks Runtime 17.3" in why
    monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", "classic")
    with pytest.raises(ps.InvalidConfigError, match="PRAVEGA_SPARK_BACKEND=classic, but Databricks Runtime 17.3"):
        _delta.backend_kind(fresh)


def test_the_environment_chooses_and_a_bad_value_is_one_clear_error(fresh, monkeypatch):
    monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", "sql")
    assert _delta.backend_kind(fresh) == ("sql", "PRAVEGA_SPARK_BACKEND=sql")
    monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", "connect")  # the former name
    assert _delta.backend_kind(fresh)[0] == "sql"
    monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", "Classic")
    assert _delta.backend_kind(fresh)[0] == "classic"
    monkeypatch.setenv("PRAVEGA_SPARK_BACKEND", "jvm")
    with pytest.raises(ps.InvalidConfigError, match="must be 'classic' or 'sql', got 'jvm'") as caught:
        _delta.backend_kind(fresh)
    assert "\n" not in str(caught.value)


def test_the_session_setting_guard_sees_a_setting_pravega_spark_sets(spark, monkeypatch):
    """The guard of ``both_backends`` tests on the public-API backend: a setting set from inside
    ``pravega_spark`` (here the classic backend's, which may set them) is recorded; one set by
    the test itself is not."""
    from tests.conftest import SessionSettingGuard

    guard = SessionSettingGuard()
    guard.install(monkeypatch)
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "3")
    assert guard.calls == []
    _delta.ClassicBackend(session).configure_session()
    assert guard.calls and all(c.startswith("set spark.") and "_delta/" in c for c in guard.calls)
