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
  echo "[setup] installing pravega-spark with extras spark,quality,test"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[spark,quality,test]"
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
