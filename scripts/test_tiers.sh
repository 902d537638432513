#!/usr/bin/env bash
# The cluster and object-store test tiers (part of `make test`), each in its own pytest invocation
# (one SparkContext per process):
#   cluster  tests marked `cluster` (and tests/cluster) on a local-cluster master: two executors in
#            their own JVMs with their own Python workers, everything bound to 127.0.0.1
#   s3       tests marked `s3` (and tests/s3) with stores on a local S3 server (S3Proxy on
#            127.0.0.1, fetched with the S3A connector by `scripts/setup.sh s3`, started here and
#            stopped on exit); its settings reach every session, the tests' worker processes
#            included, through spark-defaults.conf in SPARK_CONF_DIR
#   connect  tests marked `connect` (and tests/connect) on a Spark Connect session: a local Connect
#            server with Delta in its own JVM (scripts/connect_server.sh, started here and stopped on
#            exit), SPARK_REMOTE set, and no JVM in the test process (tests/connect asserts it);
#            nothing to fetch beyond `make setup`'s: the server is pyspark's jar with Delta's jars
# Usage: scripts/test_tiers.sh [cluster|s3|connect|all] [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
tier="${1:-all}"
[ $# -gt 0 ] && shift
export SPARK_LOCAL_IP=127.0.0.1

run_cluster() {
  echo "[tiers] cluster tier: local-cluster[2,1,1536]"
  local start=$SECONDS
  local status=0
  PRAVEGA_SPARK_TEST_MASTER='local-cluster[2,1,1536]' "$PY" -m pytest -m "cluster and not soak" -p no:cacheprovider "$@" || status=$?
  echo "[tiers] cluster tier took $((SECONDS - start)) s"
  return $status
}

run_s3() {
  local dir start=$SECONDS
  # this tier's own artefacts (the S3A connector, the AWS SDK bundle, S3Proxy): fetched here, once
  bash scripts/setup.sh s3 || return 1
  dir="$(mktemp -d)"
  export LOCAL_S3_DIR="$dir/s3" SPARK_CONF_DIR="$dir/conf"
  trap "scripts/local_s3.sh stop; rm -rf '$dir'" EXIT  # also when a failure ends the script
  mkdir -p "$SPARK_CONF_DIR"
  scripts/local_s3.sh start >"$dir/settings"
  grep '^spark\.' "$dir/settings" | sed 's/=/ /' >"$SPARK_CONF_DIR/spark-defaults.conf"
  echo "[tiers] s3 tier: $(grep '^S3_ENDPOINT=' "$dir/settings")"
  local status=0
  local bucket
  bucket="$(sed -n 's/^S3_BUCKET=//p' "$dir/settings")"
  PRAVEGA_SPARK_TEST_ROOT="s3a://$bucket/tests" PRAVEGA_SPARK_TEST_S3_DATA="$LOCAL_S3_DIR/data" \
    "$PY" -m pytest -m "s3 and not soak" -p no:cacheprovider "$@" || status=$?
  echo "[tiers] s3 tier took $((SECONDS - start)) s"
  return $status
}

run_connect() {
  local dir start=$SECONDS
  dir="$(mktemp -d)"
  export CONNECT_SERVER_DIR="$dir/server" SPARK_CONF_DIR="$dir/conf"
  mkdir -p "$SPARK_CONF_DIR"
  # the test server runs Spark's expressions interpreted, as the local suite does (tests/conftest.py)
  printf 'spark.sql.codegen.wholeStage false\nspark.sql.codegen.factoryMode NO_CODEGEN\n' \
    >"$SPARK_CONF_DIR/spark-defaults.conf"
  trap "scripts/connect_server.sh stop; rm -rf '$dir'" EXIT  # also when a failure ends the script
  local remote status=0
  remote="$(scripts/connect_server.sh start | sed -n 's/^SPARK_REMOTE=//p')"
  echo "[tiers] connect tier: SPARK_REMOTE=$remote (server started in $((SECONDS - start)) s)"
  SPARK_REMOTE="$remote" "$PY" -m pytest -m "connect and not soak" -p no:cacheprovider "$@" || status=$?
  echo "[tiers] connect tier took $((SECONDS - start)) s"
  return $status
}

case "$tier" in
  cluster) run_cluster "$@" ;;
  s3) run_s3 "$@" ;;
  connect) run_connect "$@" ;;
  all)  # every tier runs (each in a subshell: its own server and trap); the script fails if one did
    status=0
    (run_cluster "$@") || status=$?
    (run_connect "$@") || status=$?
    (run_s3 "$@") || status=$?
    exit $status ;;
  *) echo "usage: $0 [cluster|s3|connect|all] [pytest args...]" >&2; exit 2 ;;
esac
