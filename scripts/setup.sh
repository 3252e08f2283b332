#!/usr/bin/env bash
# Creates .venv in the repository root and installs commitlab with its pinned dependencies.
# Idempotent: a second run only checks. Java 17+ is required by PySpark/RayDP.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
# first, so nothing is installed for an interpreter that cannot run commitlab: the pinned
# matplotlib and fastavro need 3.11, and the pins are tested on 3.11 only
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: commitlab needs Python 3.11; '$PY' was not found." >&2
  echo "       Set PYTHON=/path/to/python3.11 and run this again." >&2
  exit 1
fi
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
  found=$("$PY" --version 2>&1 | head -n 1 || true)
  echo "setup: commitlab needs Python 3.11; '$PY' is ${found:-not a Python interpreter}." >&2
  echo "       Set PYTHON=/path/to/python3.11 and run this again." >&2
  exit 1
fi

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: Java 17+ not found; installing openjdk-17-jre-headless with apt-get" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: PySpark and RayDP need Java 17 or newer, and 'java' is missing or older." >&2
    echo "       Install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless;" >&2
    echo "       macOS: brew install openjdk@17) or set JAVA_HOME, then run this again." >&2
    exit 1
  fi
fi

# The report test loads a page in headless Chromium (Debian's package); without it that one test
# is skipped, saying why.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing Debian's chromium with apt-get (the HTML report's test opens the page in it)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    || echo "setup: chromium could not be installed; the report's browser test will be skipped" >&2
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.commitlab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing commitlab and its pinned dependencies into .venv (about a minute)" >&2
  .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
  .venv/bin/python -m pip install -q -e ".[test]"
  touch "$stamp"
fi

# The bytecode of the project's own sources, as an installed package has it: where
# PYTHONDONTWRITEBYTECODE is set no process writes it, and every process (each role of a job on
# Ray, each command) would compile them again as it starts (about 0.1 s of CPU each). Python still
# reads it, and recompiles in memory only a file edited since. Up-to-date files are skipped.
.venv/bin/python -m compileall -q runtime actors >/dev/null

# The conformance harness (conformance/, Hudi's own Flink writer in a Flink MiniCluster): built once
# per Hudi release when Maven is installed; Maven downloads here, never when a check runs. Without
# Maven, `commitlab conformance` says how to build it and everything else works.
if command -v mvn >/dev/null 2>&1; then
  for release in 0.10.1 0.12.3 0.13.1 0.14.0 0.14.1; do
    jar=conformance/target/conformance-hudi-$release.jar
    if [ ! -f "$jar" ] || [ -n "$(find conformance/pom.xml conformance/src -newer "$jar" -print -quit)" ]; then
      echo "setup: building the conformance harness for Hudi $release with Maven (the first time downloads Flink and Hudi, a few minutes)" >&2
      mvn -q -B -Dstyle.color=never -f conformance/pom.xml -P "hudi-$release" package -DskipTests
    fi
  done
  # The Kafka broker for --control-topic kafka and `commitlab kafka` (Kafka 4.1, KRaft): its jars,
  # copied once into kafka-broker/target/libs; nothing downloads when a broker starts.
  if [ ! -f kafka-broker/target/libs/kafka_2.13-4.1.0.jar ] || [ kafka-broker/pom.xml -nt kafka-broker/target/libs ]; then
    echo "setup: fetching the Kafka broker's jars with Maven (kafka_2.13 4.1.0, once)" >&2
    mvn -q -B -Dstyle.color=never -f kafka-broker/pom.xml package
  fi
else
  echo "setup: Maven not found; the conformance harness is not built (commitlab conformance says how)" >&2
  echo "       nor the Kafka broker's jars (--control-topic kafka and commitlab kafka say how)" >&2
fi
