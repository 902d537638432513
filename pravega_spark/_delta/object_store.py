"""Stores on object stores (``s3a://``, ``abfss://``...): checking a root before use, the log store
that makes commits safe there, and the settings Python tasks need to write files to S3.

Delta's default S3 log store checks that ``_delta_log/N.json`` is absent and then writes it: two
steps that exclude other committers only inside one JVM, so two writer processes committing the
same version can both "succeed", the later file replacing the earlier. Every fence of this library
assumes put-if-absent, so an ``s3a://`` root is used only with a log store that provides it: ours
(``pravegaspark.delta.ConditionalPutLogStore``: S3's conditional PUT, ``If-None-Match: *``), which
``ps.spark_session()`` configures by itself, or another one the session names (e.g. Delta's
``S3DynamoDBLogStore``), or Databricks' own commit service.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from .._session import LOG_STORE_CLASS
from ..errors import StorageAccessError, UnsafeLogStoreError
from .jvm import hadoop_path

S3_SCHEMES = ("s3a", "s3", "s3n")
SINGLE_DRIVER = "S3SingleDriverLogStore"
# set to 1 by a user who guarantees a single writer process per store (documented in the README)
SINGLE_WRITER_ENV = "PRAVEGA_SPARK_SINGLE_WRITER_PROCESS"
# the probe of a root fails fast: one attempt, short timeouts (S3A's defaults retry a wrong
# endpoint for minutes)
_PROBE_CONF = {
    "fs.s3a.attempts.maximum": "1", "fs.s3a.retry.limit": "0", "fs.s3a.retry.throttle.limit": "0",
    "fs.s3a.connection.establish.timeout": "5s", "fs.s3a.connection.timeout": "10s",
}


def session_hadoop_conf(spark: SparkSession):
    """The Hadoop configuration Delta uses for this session: the context's, plus the session's
    own ``spark.conf.set("fs.s3a...", ...)`` settings."""
    return spark._jsparkSession.sessionState().newHadoopConf()


def check_root(spark: SparkSession, root: str) -> None:
    """``probe_root`` then ``check_commits_safe``: what a store's root needs before any write."""
    probe_root(spark, root)
    check_commits_safe(spark, root)


def scheme_of(path: str) -> str:
    return urlparse(path).scheme.lower()


def log_store_of(spark: SparkSession, scheme: str) -> str | None:
    """The Delta log store class the session names for ``scheme`` (None: Delta's default)."""
    for key in (f"spark.delta.logStore.{scheme}.impl", "spark.delta.logStore.class"):
        value = spark.conf.get(key, None) or spark.sparkContext.getConf().get(key, None)
        if value:
            return value
    return None


def check_commits_safe(spark: SparkSession, root: str) -> None:
    """Refuse an S3 root whose commits could be lost to a concurrent writer process.

    Raises:
        UnsafeLogStoreError: the root is on S3 and the session commits with Delta's default
            single-driver log store (and this is not Databricks, whose commit service is safe).
    """
    scheme = scheme_of(root)
    if scheme not in S3_SCHEMES or "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return
    store = log_store_of(spark, scheme)
    if store and not store.endswith(SINGLE_DRIVER):
        return
    if os.environ.get(SINGLE_WRITER_ENV) == "1":
        return
    raise UnsafeLogStoreError(
        f"{root}: Delta's default S3 log store can lose a commit when two processes write the store at "
        f"once; start the session with spark.delta.logStore.{scheme}.impl={LOG_STORE_CLASS} (ps.spark_session() "
        f"sets it: its jar ships in the package), or another put-if-absent log store, or set "
        f"{SINGLE_WRITER_ENV}=1 if only one process ever writes this store")


def probe_root(spark: SparkSession, root: str) -> None:
    """Check that the storage of a non-local root answers, with one fast attempt.

    Raises:
        StorageAccessError: the store is unreachable (wrong endpoint), refuses the credentials,
            or has no such bucket or container; one line naming the cause.
    """
    scheme = scheme_of(root)
    if scheme in ("", "file"):
        return
    jvm = spark.sparkContext._jvm
    conf = session_hadoop_conf(spark)  # a new copy: the changes below stay in the probe
    for key, value in _PROBE_CONF.items():
        conf.set(key, value)
    conf.set(f"fs.{scheme}.impl.disable.cache", "true")  # a probe-only instance, closed after
    path = hadoop_path(jvm, root)
    fs = None
    try:
        fs = path.getFileSystem(conf)
        fs.exists(path)
    except Exception as exc:  # noqa: BLE001 - any failure of the probe is reported as one line
        raise StorageAccessError(f"cannot use the store at {root}: {_cause(exc)}") from None
    finally:
        if fs is not None:
            fs.close()


def _cause(exc: BaseException) -> str:
    """One line for a storage failure: what kind, from the Java exception's text."""
    text = str(exc)
    kinds = (("NoSuchBucket", "the bucket does not exist"),
             ("UnknownStoreException", "the bucket does not exist"),
             ("AccessDeniedException", "access denied (check the access key and secret key)"),
             ("InvalidAccessKeyId", "access denied (unknown access key)"),
             ("SignatureDoesNotMatch", "access denied (wrong secret key)"),
             ("ConnectException", "cannot connect to the endpoint (check fs.s3a.endpoint)"),
             ("UnknownHostException", "unknown endpoint host (check fs.s3a.endpoint)"),
             ("ClassNotFoundException", "its file system's classes are not on the class path "
                                        "(for s3a://, hadoop-aws and the AWS SDK bundle: `scripts/setup.sh s3`)"),
             ("UnsupportedFileSystemException", "no file system is configured for this scheme"))
    for marker, meaning in kinds:
        if marker in text:
            return meaning
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[1] if len(lines) > 1 else lines[0] if lines else type(exc).__name__)[:200]


def _s3_setting(conf, bucket: str, key: str) -> str | None:
    """An S3A setting, per bucket first (``fs.s3a.bucket.<bucket>.<key>``), like S3A itself."""
    value = conf.get(f"fs.s3a.bucket.{bucket}.{key}") or conf.get(f"fs.s3a.{key}")
    return str(value) if value is not None else None


def pyarrow_s3_options(spark: SparkSession, path: str) -> dict | None:
    """Keyword arguments for ``pyarrow.fs.S3FileSystem`` that reach the bucket of ``path`` as the
    session's S3A does: endpoint, region, path style, TLS and, when the session gives them, its
    access and secret keys (else pyarrow's default AWS credential chain: environment variables,
    ``~/.aws``, the instance's role). With no endpoint and no region (AWS itself), the bucket's
    region is looked up, as S3A does. None for a path not on S3."""
    parsed = urlparse(path)
    if parsed.scheme.lower() not in S3_SCHEMES:
        return None
    conf = session_hadoop_conf(spark)
    bucket = parsed.netloc
    options: dict = {"allow_bucket_creation": False, "allow_bucket_deletion": False}
    endpoint = _s3_setting(conf, bucket, "endpoint")
    if endpoint:
        found = urlparse(endpoint if "://" in endpoint else f"//{endpoint}")
        options["endpoint_override"] = found.netloc or found.path
        ssl = (_s3_setting(conf, bucket, "connection.ssl.enabled") or "true").lower() == "true"
        options["scheme"] = found.scheme or ("https" if ssl else "http")
    region = _s3_setting(conf, bucket, "endpoint.region")
    if not region and not endpoint:
        import pyarrow.fs as pafs

        region = pafs.resolve_s3_region(bucket)
    if region:
        options["region"] = region
    if (_s3_setting(conf, bucket, "path.style.access") or "false").lower() == "true":
        options["force_virtual_addressing"] = False
    access, secret = _s3_setting(conf, bucket, "access.key"), _s3_setting(conf, bucket, "secret.key")
    if access and secret:
        options.update(access_key=access, secret_key=secret)
        token = _s3_setting(conf, bucket, "session.token")
        if token:
            options["session_token"] = token
    return options
