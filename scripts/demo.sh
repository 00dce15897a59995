#!/usr/bin/env bash
# The main job: set up, index the bundled skill library (the SkillsBench skills plus 3,251 real
# SKILL.md distractors from the pool, minus the ids the corpus excludes), then find the skills for an example task.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh base   # the demo needs the base install only (scripts/test.sh sets up the dev extra)
. .venv/bin/activate
IDX=.skillsight/skillsbench-index
TASK="${1:-Parse a binary STL file, find the largest connected component of the mesh and compute its volume and mass}"
# (re)build when there is no index yet, or when it is of another format version or damaged
if ! skillsight info -i "$IDX" >/dev/null 2>&1; then
  skillsight index data/skillsbench -o "$IDX"
fi
skillsight search -i "$IDX" -k 5 --explain "$TASK"
