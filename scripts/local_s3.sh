#!/usr/bin/env bash
# A real S3 server on 127.0.0.1 for tests and users: S3Proxy (S3's REST API over a directory; it
# resolves `If-None-Match: *` atomically, so put-if-absent log commits work as on AWS S3).
#
#   scripts/local_s3.sh start   start it (or find it running) and print KEY=value lines: S3_ENDPOINT,
#                               S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, then one
#                               spark.hadoop.<key>=<value> line per setting a Spark session needs
#   scripts/local_s3.sh stop    stop it (its data stays under $LOCAL_S3_DIR until removed)
#   scripts/local_s3.sh classpath   resolve the server's class path if needed and print "resolved",
#                               else print "present" (scripts/setup.sh)
#
# Environment: LOCAL_S3_DIR (state: data, pid, log; default .local_s3 in the repository),
# LOCAL_S3_PORT (default: a free port), LOCAL_S3_BUCKET (default pravega). The server's class path
# comes from the local Maven repository that scripts/setup.sh fills ($M2_REPOSITORY, else
# ~/.m2/repository); it is resolved here too if set-up has not run, and again whenever
# scripts/s3proxy/pom.xml changed since (LOCAL_S3_CLASSPATH: another class path file, used as is).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${LOCAL_S3_DIR:-$REPO/.local_s3}"
BUCKET="${LOCAL_S3_BUCKET:-pravega}"
M2_REPO="${M2_REPOSITORY:-$HOME/.m2/repository}"
IDENTITY=local-identity
CREDENTIAL=local-credential
# the server's class path: resolved once per pom (scripts/setup.sh does it) and shared by every LOCAL_S3_DIR
CLASSPATH="${LOCAL_S3_CLASSPATH:-$REPO/.local_s3/classpath}"
POM="$REPO/scripts/s3proxy/pom.xml"

# resolve_classpath: resolve the pom's class path into $CLASSPATH unless it is there, its first
# jar exists (not another Maven repository) and it was resolved from this very pom (its sha1 in
# $CLASSPATH.pom); a class path named by LOCAL_S3_CLASSPATH is used as it is. RESOLVED=1 if it ran.
RESOLVED=0
resolve_classpath() {
  [ -n "${LOCAL_S3_CLASSPATH:-}" ] && return 0
  local pom_sha
  pom_sha="$(sha1sum "$POM" | cut -c1-40)"
  if [ -s "$CLASSPATH" ] && [ -f "$(cut -d: -f1 "$CLASSPATH")" ] && [ "$(cat "$CLASSPATH.pom" 2>/dev/null)" = "$pom_sha" ]; then
    return 0
  fi
  mkdir -p "$(dirname "$CLASSPATH")"
  mvn -B -q -Dstyle.color=never -f "$POM" dependency:build-classpath \
    -Dmdep.outputFile="$CLASSPATH.tmp" -Dmaven.repo.local="$M2_REPO" >/dev/null
  mv "$CLASSPATH.tmp" "$CLASSPATH"
  echo "$pom_sha" >"$CLASSPATH.pom"
  RESOLVED=1
}

settings() {  # the KEY=value lines of a running server on port $1
  local endpoint="http://127.0.0.1:$1"
  cat <<EOF
S3_ENDPOINT=$endpoint
S3_BUCKET=$BUCKET
AWS_ACCESS_KEY_ID=$IDENTITY
AWS_SECRET_ACCESS_KEY=$CREDENTIAL
spark.hadoop.fs.s3a.endpoint=$endpoint
spark.hadoop.fs.s3a.endpoint.region=us-east-1
spark.hadoop.fs.s3a.path.style.access=true
spark.hadoop.fs.s3a.connection.ssl.enabled=false
spark.hadoop.fs.s3a.aws.credentials.provider=org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider
spark.hadoop.fs.s3a.access.key=$IDENTITY
spark.hadoop.fs.s3a.secret.key=$CREDENTIAL
EOF
}

# running: the pid file names a live S3Proxy (a pid left by a dead server may be reused by another process)
running() { [ -f "$DIR/pid" ] && ps -p "$(cat "$DIR/pid")" -o args= 2>/dev/null | grep -q org.gaul.s3proxy; }

case "${1:-}" in
  start)
    if running; then settings "$(cat "$DIR/port")"; exit 0; fi
    mkdir -p "$DIR/data/$BUCKET"  # a bucket is a directory of the file-system backend
    resolve_classpath
    port="${LOCAL_S3_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
    cat >"$DIR/s3proxy.conf" <<EOF
s3proxy.endpoint=http://127.0.0.1:$port
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$IDENTITY
s3proxy.credential=$CREDENTIAL
jclouds.provider=filesystem-nio2
jclouds.filesystem.basedir=$DIR/data
EOF
    nohup java -Xmx256m -Dlogback.configurationFile="$REPO/scripts/s3proxy/logback.xml" -cp "$(cat "$CLASSPATH")" org.gaul.s3proxy.Main --properties "$DIR/s3proxy.conf" \
      >"$DIR/s3proxy.log" 2>&1 </dev/null &
    echo $! >"$DIR/pid"
    echo "$port" >"$DIR/port"
    for _ in $(seq 1 150); do  # up to 30 s: answering HTTP on the port
      if curl -s -o /dev/null "http://127.0.0.1:$port/"; then settings "$port"; exit 0; fi
      if ! running; then break; fi
      sleep 0.2
    done
    echo "local S3 server did not start; its log ($DIR/s3proxy.log) ends:" >&2
    tail -5 "$DIR/s3proxy.log" >&2
    exit 1
    ;;
  stop)
    if running; then
      pid="$(cat "$DIR/pid")"
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$DIR/pid"
    ;;
  classpath)  # prints "resolved", or "present" when it was up to date already
    resolve_classpath
    if [ "$RESOLVED" = 1 ]; then echo resolved; else echo present; fi
    ;;
  *)
    echo "usage: $0 start|stop|classpath" >&2
    exit 2
    ;;
esac
