#!/usr/bin/env bash
# Build the device SDKs for their tests (tests/sdks; called by scripts/bootstrap.sh):
#   sdks/js    npm ci (TypeScript and Node types, dev only) + tsc  -> sdks/js/dist
#   sdks/java  mvn package (and the test classes), with every plugin the later
#              `mvn -o test` needs (surefire's JUnit 5 provider) -> sdks/java/target
# Each is skipped while its sources are unchanged since its last build; after this no
# test needs the network (tests/sdks runs `npm test` and `mvn -o test`).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools/sdk-java

digest() {  # sha256 over the named files and directories (sorted), one line
  find "$@" -type f -not -path '*/node_modules/*' -not -path '*/dist/*' \
    -not -path '*/target/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}

if command -v npm >/dev/null 2>&1; then
  js_want=$(digest sdks/js/src sdks/js/test sdks/js/bin sdks/js/bench sdks/js/examples \
    sdks/js/package.json sdks/js/tsconfig.build.json sdks/js/package-lock.json \
    sdks/js/tsconfig.json)
  if [ "$(cat .tools/sdk-js.sha256 2>/dev/null)" != "$js_want" ] \
      || [ ! -f sdks/js/dist/src/index.js ]; then
    npm ci --silent --no-audit --no-fund --prefix sdks/js >/dev/null
    rm -rf sdks/js/dist
    sdks/js/node_modules/.bin/tsc -p sdks/js
    echo "$js_want" > .tools/sdk-js.sha256
  fi
else
  echo "bootstrap: no npm on PATH, so no TypeScript SDK build: tests/sdks will fail" >&2
fi

if command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then
  java_want=$(digest sdks/java/src sdks/java/pom.xml sdks/java/examples)
  if [ "$(cat .tools/sdk-java.sha256 2>/dev/null)" != "$java_want" ] \
      || [ ! -d sdks/java/target/test-classes ]; then
    # `test -Dtest=NONE` compiles the tests and fetches surefire's provider without running
    # them (pytest runs `mvn -o test`).
    if ! out=$(mvn -q -B -f sdks/java/pom.xml clean package -DskipTests 2>&1 \
        && mvn -q -B -f sdks/java/pom.xml test -Dtest=NONE \
             -Dsurefire.failIfNoSpecifiedTests=false 2>&1); then
      echo "$out" >&2
      echo "bootstrap: could not build the Java SDK with Maven (see above)" >&2
      exit 1
    fi
    echo "$java_want" > .tools/sdk-java.sha256
  fi
else
  echo "bootstrap: no mvn/javac on PATH, so no Java SDK build: tests/sdks will fail" \
       "(apt-get install maven openjdk-17-jdk-headless)" >&2
fi
