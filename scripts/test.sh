#!/usr/bin/env bash
# README's second command: lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/mypy --strict ldpcore ldpstream producer aggregator query_api gateway issuer ldpctl
# The documentation site (mkdocs.yml): --strict fails on any broken link or anchor.
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
.venv/bin/mkdocs build --strict --quiet --site-dir "$site"
# pytest exits 5 when it collects nothing: set -e turns that into a failure.  The 25
# slowest tests are listed at the end (where CI time goes); pyproject.toml sets the
# per-test timeout.
.venv/bin/python -m pytest --durations=25 "$@"
