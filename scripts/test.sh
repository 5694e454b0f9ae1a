#!/usr/bin/env bash
# README's second command: lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/mypy --strict ldpcore ldpstream producer aggregator query_api gateway issuer
# pytest exits 5 when it collects nothing: set -e turns that into a failure.
.venv/bin/python -m pytest "$@"
