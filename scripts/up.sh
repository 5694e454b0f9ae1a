#!/usr/bin/env bash
# README's first command: install into .venv and bring the whole stack up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/ldpstream up "$@"
