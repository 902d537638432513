#!/usr/bin/env bash
# Idempotent set-up: a virtual environment with the pinned packages, and Delta's jars in the local
# Maven repository ($M2_REPOSITORY, else ~/.m2/repository). Each step is skipped when already done; safe to run any number of times.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
DELTA_COORD="io.delta:delta-spark_4.1_2.13:4.4.0"
# One local Maven repository for set-up and session alike: $M2_REPOSITORY, else ~/.m2/repository
# under $HOME (pravega_spark._session.maven_repository reads the same). mvn is told explicitly:
# left alone it writes under the JVM's user.home, which need not be $HOME.
M2_REPO="${M2_REPOSITORY:-$HOME/.m2/repository}"
DELTA_JAR="$M2_REPO/io/delta/delta-spark_4.1_2.13/4.4.0/delta-spark_4.1_2.13-4.4.0.jar"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed-$(cat setup.cfg pyproject.toml | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "[setup] installing pravega-spark with extras spark,quality,plots,test"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[spark,quality,plots,test]"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
else
  echo "[setup] python packages up to date"
fi

if [ ! -f "$DELTA_JAR" ]; then
  echo "[setup] fetching $DELTA_COORD (with its dependencies) into $M2_REPO"
  mvn -B -q dependency:get -Dartifact="$DELTA_COORD" -Dtransitive=true -Dmaven.repo.local="$M2_REPO"
else
  echo "[setup] Delta jars present in $M2_REPO"
fi

# The object-store tier: Hadoop's S3A connector matching pyspark's Hadoop (3.4.2) and the AWS SDK
# bundle it needs (put on the class path by pravega_spark._session, not shipped in spark.jars),
# and the local S3 server's class path (scripts/local_s3.sh).
for coord in org.apache.hadoop:hadoop-aws:3.4.2 software.amazon.awssdk:bundle:2.29.52 \
             software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.2.1; do
  IFS=: read -r group artifact version <<<"$coord"
  jar="$M2_REPO/${group//.//}/$artifact/$version/$artifact-$version.jar"
  if [ ! -f "$jar" ]; then
    echo "[setup] fetching $coord into $M2_REPO"
    mvn -B -q -Dstyle.color=never dependency:get -Dartifact="$coord" -Dtransitive=false -Dmaven.repo.local="$M2_REPO"
  fi
done
# the local S3 server's class path: resolved again whenever scripts/s3proxy/pom.xml changed
s3proxy_classpath="$(scripts/local_s3.sh classpath)"  # a failed resolution stops set-up here
if [ "$s3proxy_classpath" = resolved ]; then
  echo "[setup] resolved the local S3 server (S3Proxy, scripts/s3proxy/pom.xml) into $M2_REPO"
else
  echo "[setup] S3 connector and local S3 server present"
fi

# The put-if-absent Delta log store for object stores (java/): compiled against pyspark's Hadoop
# and Delta's storage jar, into the package (pravega_spark._session adds it to spark.jars).
LOGSTORE_JAR=pravega_spark/_delta/jars/pravega-spark-logstore.jar
if [ ! -f "$LOGSTORE_JAR" ] || [ -n "$(find java -name '*.java' -newer "$LOGSTORE_JAR")" ]; then
  echo "[setup] building $LOGSTORE_JAR"
  PYSPARK_JARS="$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  build="$(mktemp -d)"
  javac --release 17 -nowarn -d "$build" \
    -cp "$PYSPARK_JARS/hadoop-client-api-3.4.2.jar:$(echo "$PYSPARK_JARS"/slf4j-api-*.jar):$M2_REPO/io/delta/delta-storage/4.4.0/delta-storage-4.4.0.jar" \
    $(find java -name '*.java')
  mkdir -p "$(dirname "$LOGSTORE_JAR")"
  jar cf "$LOGSTORE_JAR" -C "$build" .
  rm -rf "$build"
fi

# Executors of a local-cluster master write their logs under pyspark's work/ folder: start clean.
rm -rf "$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/work"
