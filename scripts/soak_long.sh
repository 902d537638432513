#!/usr/bin/env bash
# `make soak-long`: the feature scenarios (streams, writers with write numbers, transactions, large
# events, retention with vacuum, reader groups, streaming, key-value tables) ROUNDS times (default 3)
# in a row on ONE long-lived session, each round on new stores, with the live heap after each
# round and a verdict (tests/soak_long.py): first one classic local session, then one Spark Connect
# server with CONNECT_SERVER_MEMORY (default 1g). Not part of `make test`. PYTEST_ARGS="--histograms DIR"
# also writes the JVM's class histogram after each round (round-N.txt), to diff what stayed;
# "--heap-dumps DIR" a heap dump (round-N.hprof), split between what Spark Connect's stopped
# streaming queries alone hold and the rest (bench/hprof.py): the Connect leg always does (in its
# temporary folder, unless given one), since Spark Connect keeps each stopped query for an hour.
# Usage: ROUNDS=N scripts/soak_long.sh [classic|connect|all] [pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
rounds="${ROUNDS:-3}"
which="${1:-all}"
[ $# -gt 0 ] && shift
export SPARK_LOCAL_IP=127.0.0.1
FEATURES=(tests/integration/test_stream_manager.py tests/integration/test_idempotent_writes.py
          tests/integration/test_transactions.py tests/integration/test_large_events.py
          tests/integration/test_retention_service.py tests/integration/test_reader_group.py
          tests/integration/test_streaming.py tests/integration/test_key_value_tables.py)
status=0
if [ "$which" = classic ] || [ "$which" = all ]; then
  echo "[soak-long] classic session: ${rounds} rounds"
  "$PY" -m pytest -p tests.soak_long --rounds "$rounds" -q -p no:cacheprovider \
    -m "not slow and not process and not soak and not cluster and not s3" "${FEATURES[@]}" "$@" || status=$?
fi
if [ "$which" = connect ] || [ "$which" = all ]; then
  dir="$(mktemp -d)"
  export CONNECT_SERVER_DIR="$dir/server" SPARK_CONF_DIR="$dir/conf"
  mkdir -p "$SPARK_CONF_DIR"
  printf 'spark.sql.codegen.wholeStage false\nspark.sql.codegen.factoryMode NO_CODEGEN\n' \
    >"$SPARK_CONF_DIR/spark-defaults.conf"  # as the Connect tier's server (scripts/test_tiers.sh)
  trap "scripts/connect_server.sh stop; rm -rf '$dir'" EXIT
  remote="$(scripts/connect_server.sh start | sed -n 's/^SPARK_REMOTE=//p')"
  echo "[soak-long] Spark Connect server ${CONNECT_SERVER_MEMORY:-1g} heap, SPARK_REMOTE=$remote: ${rounds} rounds"
  SPARK_REMOTE="$remote" "$PY" -m pytest -p tests.soak_long --rounds "$rounds" -q -p no:cacheprovider \
    -m "connect and not soak and not process" --heap-dumps "$dir/dumps" "${FEATURES[@]}" tests/connect "$@" || status=$?
fi
exit $status
