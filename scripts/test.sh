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
if [ $# -gt 0 ]; then
  .venv/bin/python -m pytest --durations=25 "$@"
else
  # The whole suite in two runs: tests without servers or external tools (-m "not e2e":
  # CPU-bound, nothing shared) on one process per core, then the end-to-end tests one at
  # a time (brokers, Redis and services of their own, timing-sensitive faults).
  .venv/bin/python -m pytest -n "${LDP_TEST_PROCESSES:-auto}" -m "not e2e" --durations=25
  .venv/bin/python -m pytest -m e2e --durations=25
fi
