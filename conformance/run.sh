#!/usr/bin/env bash
# Runs Hudi's own Flink writer on a lab input: run.sh <release> --input DIR --out FILE [--timeout-s S] [--grace-ms MS]
# JAVA names the java to run (default: the one on PATH). <release> is 0.10.1, 0.12.3, 0.13.1, 0.14.0 or 0.14.1 (build it first: mvn -f conformance/pom.xml -P hudi-<release> package -DskipTests).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -lt 1 ]]; then
  echo "usage: $0 <release: 0.10.1|0.12.3|0.13.1|0.14.0|0.14.1> --input DIR --out FILE [--timeout-s 300] [--grace-ms 1000]" >&2
  exit 2
fi
release="${1#hudi-}"; shift
jar="$here/target/conformance-hudi-$release.jar"
if [[ ! -f "$jar" ]]; then
  echo "error: $jar is missing: build it with mvn -q -f $here/pom.xml -P hudi-$release package -DskipTests" >&2
  exit 2
fi
opens=()
for p in java.base/java.lang java.base/java.lang.reflect java.base/java.lang.invoke java.base/java.io \
         java.base/java.net java.base/java.nio java.base/sun.nio.ch java.base/java.text java.base/java.time \
         java.base/java.util java.base/java.util.concurrent java.base/java.util.concurrent.atomic \
         java.base/java.util.concurrent.locks java.base/java.math java.base/java.security \
         java.base/jdk.internal.misc java.base/sun.security.action java.sql/java.sql; do
  opens+=("--add-opens=$p=ALL-UNNAMED")
done
# jol.skipHotspotSAAttach: Hudi's record size estimate (ObjectSizeCalculator, JOL) would otherwise
# attach the HotSpot serviceability agent, a child process, from inside a write task; allowAttachSelf
# lets it take the JVM's instrumentation instead (without either, sizing a record takes milliseconds)
# CONFORMANCE_GC: serial (default: the protocol scenarios, one collector thread) or g1 (the JVM's own
# default on this machine and what Flink's scripts leave in place: benchmarks/bench_vs_hudi.py)
case "${CONFORMANCE_GC:-serial}" in
  serial) gc=-XX:+UseSerialGC ;;
  g1) gc=-XX:+UseG1GC ;;
  *) echo "error: CONFORMANCE_GC=${CONFORMANCE_GC}: serial or g1" >&2; exit 2 ;;
esac
exec "${JAVA:-java}" -Xmx"${CONFORMANCE_XMX:-1g}" "$gc" -XX:ActiveProcessorCount=2 "${opens[@]}" \
  -Djol.skipHotspotSAAttach=true -Djdk.attach.allowAttachSelf=true \
  -jar "$jar" "$@"
