#!/usr/bin/env bash
# A real Spark Connect server with Delta on 127.0.0.1, in its own JVM (what Databricks serverless
# and standard clusters hand a notebook: a session with no JVM in the client's process).
#
#   scripts/connect_server.sh start   start it (or find it running) and print SPARK_REMOTE=sc://127.0.0.1:<port>
#   scripts/connect_server.sh stop    stop it
#
# Environment: CONNECT_SERVER_DIR (state: pid, port, log; default .connect_server in the
# repository), CONNECT_SERVER_PORT (default: a free port), CONNECT_SERVER_MASTER (default
# local[2]), CONNECT_SERVER_MEMORY (the server's heap, default 1g). The server runs spark-submit's
# SparkConnectServer class with the settings of pravega_spark._session.connect_server_conf
# (Delta's jars from the local Maven repository that scripts/setup.sh fills), logging warnings only
# (scripts/connect/log4j2.properties). Its Python workers (foreachBatch functions, UDFs) run the venv's
# interpreter, where pravega_spark is installed.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${CONNECT_SERVER_DIR:-$REPO/.connect_server}"
PY="$REPO/.venv/bin/python"
[ -x "$PY" ] || PY=python3

running() { [ -f "$DIR/pid" ] && ps -p "$(cat "$DIR/pid")" -o args= 2>/dev/null | grep -q SparkConnectServer; }
listening() { "$PY" -c "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1).close()" "$1" 2>/dev/null; }

case "${1:-}" in
  start)
    if running; then echo "SPARK_REMOTE=sc://127.0.0.1:$(cat "$DIR/port")"; exit 0; fi
    mkdir -p "$DIR"
    port="${CONNECT_SERVER_PORT:-$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
    spark_home="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
    args=()
    while IFS= read -r line; do args+=(--conf "$line"); done < <(
      "$PY" -c 'import sys; from pravega_spark._session import connect_server_conf
for k, v in connect_server_conf(int(sys.argv[1]), sys.argv[2]).items(): print(f"{k}={v}")' "$port" "$REPO/scripts/connect/log4j2.properties")
    SPARK_HOME="$spark_home" SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PY" SPARK_CONF_DIR="${SPARK_CONF_DIR:-$DIR/conf}" \
      nohup "$spark_home/bin/spark-submit" --class org.apache.spark.sql.connect.service.SparkConnectServer \
        --master "${CONNECT_SERVER_MASTER:-local[2]}" --driver-memory "${CONNECT_SERVER_MEMORY:-1g}" "${args[@]}" \
        >"$DIR/server.log" 2>&1 </dev/null &
    echo $! >"$DIR/pid"
    echo "$port" >"$DIR/port"
    for _ in $(seq 1 300); do  # up to 60 s: accepting connections on the port
      if listening "$port"; then echo "SPARK_REMOTE=sc://127.0.0.1:$port"; exit 0; fi
      if ! running; then break; fi
      sleep 0.2
    done
    echo "Spark Connect server did not start; its log ($DIR/server.log) ends:" >&2
    tail -5 "$DIR/server.log" >&2
    exit 1
    ;;
  stop)
    if running; then
      pid="$(cat "$DIR/pid")"
      pkill -P "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do running || break; sleep 0.1; done
    fi
    rm -f "$DIR/pid"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
