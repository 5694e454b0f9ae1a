#!/usr/bin/env bash
# Build bench/.venv-peers: ldpstream beside the peer libraries it is compared with.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv bench/.venv-peers
bench/.venv-peers/bin/python -m pip install --quiet --upgrade pip
bench/.venv-peers/bin/python -m pip install --quiet "numpy<2.3" "xxhash<4" \
    pure-ldp==1.2.0 multi-freq-ldpy==0.2.5 scikit-learn statsmodels
bench/.venv-peers/bin/python -m pip install --quiet -e .
