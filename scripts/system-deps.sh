#!/usr/bin/env bash
# The system tools the test suite needs, installed with apt when missing (idempotent).
# Called by scripts/test.sh (README's second command) and so by .ci/run: nothing in the
# suite may skip for lack of a tool.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
# javac for the Java SDK (sdks/java); the JDK also carries the JRE the Kafka broker needs
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
# a C compiler for the fault suite's fsync logger (tests/integration/faults.py)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing system packages: ${need[*]} (Debian names); install them and re-run" >&2
  exit 1
fi
echo "installing ${need[*]} …" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
