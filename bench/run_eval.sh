#!/usr/bin/env bash
# Regenerate results/*.json and docs/RESULTS.md. Embeddings are cached in the per-user cache
# (first run: ~40 min of encoding on 2 cores, plus ~30 min for the chunk embeddings; later runs: minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p results
skillsight eval --all --methods bm25,tfidf,dense,abtt,sbc,lec,dense+lec,bm25+sbc,rrf,skillsight-paper,skillsight,dense+rerank \
    --rerank-queries 10 --json results/eval.json
skillsight eval --all --methods splade --json results/eval-splade.json
skillsight eval --data data/skillsbench --data data/sra_theoremqa --data data/bfcl --ablations --chunks --json results/ablations.json
python -m skillsight_fast.lab.evaluation.report results
