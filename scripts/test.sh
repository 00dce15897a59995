#!/usr/bin/env bash
# Set up, lint (ruff check: fails the script on any finding), then run the whole test suite (and the
# kernel tests once more without the JIT, so the kernel bodies run as plain Python against their
# references).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
ruff check .
python -m pytest -q "$@"
NUMBA_DISABLE_JIT=1 python -m pytest -q tests/kernels/test_kernels.py
