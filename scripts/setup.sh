#!/usr/bin/env bash
# Idempotent set-up, in parts; each step prints what it fetched or that it was present, and is
# skipped when already done (safe to run any number of times):
#
#   scripts/setup.sh        the demo's: a virtual environment with the extras the demo runs on
#                           (spark,quality), Delta's jars in the local Maven repository, and the
#                           check of the log-store jar against its sources. Nothing for S3 or Connect.
#   scripts/setup.sh dev    the same with every extra (spark,quality,plots,test): make setup, make test
#   scripts/setup.sh s3     only the object-store tier's artefacts: Hadoop's S3A connector, the AWS
#                           SDK bundle and the local S3 server's class path (scripts/test_tiers.sh s3)
#
# The Spark Connect tier needs nothing more: its server is pyspark's own jar with Delta's jars.
# The local Maven repository is $M2_REPOSITORY, else ~/.m2/repository under $HOME.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-demo}"
PYTHON=${PYTHON:-python3}
VENV=.venv
DELTA_COORD="io.delta:delta-spark_4.1_2.13:4.4.0"
# One local Maven repository for set-up and session alike: $M2_REPOSITORY, else ~/.m2/repository
# under $HOME (pravega_spark._session.maven_repository reads the same). mvn is told explicitly:
# left alone it writes under the JVM's user.home, which need not be $HOME.
M2_REPO="${M2_REPOSITORY:-$HOME/.m2/repository}"
DELTA_JAR="$M2_REPO/io/delta/delta-spark_4.1_2.13/4.4.0/delta-spark_4.1_2.13-4.4.0.jar"

# The object-store tier: Hadoop's S3A connector matching pyspark's Hadoop (3.4.2) and the AWS SDK
# bundle it needs (put on the class path by pravega_spark._session, not shipped in spark.jars),
# and the local S3 server's class path (scripts/local_s3.sh).
setup_s3() {
  local coord group artifact version jar
  for coord in org.apache.hadoop:hadoop-aws:3.4.2 software.amazon.awssdk:bundle:2.29.52 \
               software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.2.1; do
    IFS=: read -r group artifact version <<<"$coord"
    jar="$M2_REPO/${group//.//}/$artifact/$version/$artifact-$version.jar"
    if [ ! -f "$jar" ]; then
      echo "[setup] fetching $coord into $M2_REPO"
      mvn -B -q -Dstyle.color=never dependency:get -Dartifact="$coord" -Dtransitive=false -Dmaven.repo.local="$M2_REPO"
    else
      echo "[setup] $coord present in $M2_REPO"
    fi
  done
  # the local S3 server's class path: resolved again whenever scripts/s3proxy/pom.xml changed
  local s3proxy_classpath
  s3proxy_classpath="$(scripts/local_s3.sh classpath)"  # a failed resolution stops set-up here
  if [ "$s3proxy_classpath" = resolved ]; then
    echo "[setup] resolved the local S3 server (S3Proxy, scripts/s3proxy/pom.xml) into $M2_REPO"
  else
    echo "[setup] local S3 server (S3Proxy) class path present"
  fi
}

case "$mode" in
  demo) EXTRAS=spark,quality ;;
  dev) EXTRAS=spark,quality,plots,test ;;
  s3) setup_s3; exit 0 ;;
  *) echo "usage: $0 [demo|dev|s3]" >&2; exit 2 ;;
esac

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi

# Delta's two jars, nothing else: the session puts only them on its class path (the rest of
# Delta's dependency tree, ~700 MB with Spark's, is pyspark's own; fetching it took 3 minutes).
# Fetched while pip installs (Maven's own start-up is most of it): set-up waits for both.
DELTA_STORAGE_JAR="$M2_REPO/io/delta/delta-storage/4.4.0/delta-storage-4.4.0.jar"
fetch_delta() {
  if [ -f "$DELTA_JAR" ] && [ -f "$DELTA_STORAGE_JAR" ]; then
    echo "[setup] Delta jars present in $M2_REPO"
    return
  fi
  local started=$SECONDS coord
  for coord in "$DELTA_COORD" io.delta:delta-storage:4.4.0; do
    echo "[setup] fetching $coord into $M2_REPO"
    mvn -B -q -Dstyle.color=never dependency:get -Dartifact="$coord" -Dtransitive=false \
      -Dmaven.repo.local="$M2_REPO" </dev/null
  done
  echo "[setup] fetched Delta's jars in $((SECONDS - started)) s"
}
fetch_delta &
delta_fetch=$!

# One stamp per package set: .installed-<hash> for every extra, .installed-<hash>-demo for the
# demo's; the demo's set is a part of the whole, so either stamp will do for it.
hash="$(cat setup.cfg pyproject.toml scripts/constraints.txt | sha1sum | cut -c1-12)"
full_stamp="$VENV/.installed-$hash"
stamp="$full_stamp"
[ "$mode" = demo ] && stamp="$VENV/.installed-$hash-demo"
if [ -f "$full_stamp" ] || [ -f "$stamp" ]; then
  echo "[setup] python packages up to date (extras $EXTRAS)"
else
  echo "[setup] installing pravega-spark with extras $EXTRAS"
  started=$SECONDS
  # pip, and `wheel` for setuptools 65 (a venv's own): the build requirements of pyproject.toml, so that
  # `pip wheel . --no-deps --no-build-isolation` builds the wheel from the venv (tests/test_wheel.py).
  # (Byte-compiling here costs what the first run would pay instead: measured, --no-compile moved
  # about 10 s from set-up into the demo.)
  # uv resolves, downloads (in parallel) and installs the same packages as pip in about half the
  # time (measured with an empty HOME: 26 s against 48 s for the demo's extras); pip stays in the
  # venv for users and for tests/test_wheel.py.
  "$VENV/bin/python" -m pip install -q --upgrade pip wheel uv
  # at the versions the suite last passed with (scripts/constraints.txt), whatever was published since
  "$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python" -c scripts/constraints.txt -e ".[$EXTRAS]"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
  echo "[setup] installed the python packages in $((SECONDS - started)) s"
fi
wait "$delta_fetch"  # fails set-up if Maven did

# The put-if-absent Delta log store for object stores (java/): shipped built, in git and in the
# wheel (pravega_spark._session adds it to spark.jars). It is compiled again, against pyspark's
# Hadoop and Delta's storage jar, only when java/'s sources differ from those it was built from,
# recorded (sha256sum lines) in $LOGSTORE_SOURCES; tests/unit/test_logstore_jar.py fails until then.
LOGSTORE_JAR=pravega_spark/_delta/jars/pravega-spark-logstore.jar
LOGSTORE_SOURCES=pravega_spark/_delta/jars/pravega-spark-logstore.sources.sha256
sources="$(find java -name '*.java' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)"
if [ -f "$LOGSTORE_JAR" ] && [ "$sources" = "$(cat "$LOGSTORE_SOURCES" 2>/dev/null)" ]; then
  echo "[setup] log-store jar present, built from java/ as it is"
else
  echo "[setup] building $LOGSTORE_JAR (java/ changed since it was built)"
  PYSPARK_JARS="$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  build="$(mktemp -d)"
  javac --release 17 -nowarn -d "$build/classes" \
    -cp "$PYSPARK_JARS/hadoop-client-api-3.4.2.jar:$(echo "$PYSPARK_JARS"/slf4j-api-*.jar):$M2_REPO/io/delta/delta-storage/4.4.0/delta-storage-4.4.0.jar" \
    $(find java -name '*.java')
  mkdir -p "$(dirname "$LOGSTORE_JAR")"
  jar cf "$LOGSTORE_JAR.tmp" -C "$build/classes" .
  mv -f "$LOGSTORE_JAR.tmp" "$LOGSTORE_JAR"  # a new file: a running JVM keeps reading the one it opened
  rm -rf "$build"
  echo "$sources" >"$LOGSTORE_SOURCES"
fi

echo "[setup] S3 and Connect artefacts: not needed here (the S3 tier fetches its own with" \
     "scripts/setup.sh s3; the Connect server needs only pyspark's and Delta's jars)"

# Executors of a local-cluster master write their logs under pyspark's work/ folder: start clean.
rm -rf "$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/work"
