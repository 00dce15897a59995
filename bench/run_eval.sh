#!/usr/bin/env bash
# Regenerate results/eval/*.json and docs/RESULTS.md. Embeddings are cached in the per-user cache
# (first run: ~40 min of encoding on 2 cores, plus ~30 min for the chunk embeddings; later runs: minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p results/eval
skillsight -c all=true -c methods=bm25,tfidf,dense,abtt,sbc,lec,dense+lec,bm25+sbc,rrf,skillsight-paper,skillsight,dense+rerank \
    -c rerank-queries=10 eval --json results/eval/eval.json
skillsight -c all=true -c methods=splade eval --json results/eval/eval-splade.json
skillsight -c ablations=true -c chunks=true eval --data data/skillsbench --data data/sra_theoremqa --data data/bfcl \
    --json results/eval/ablations.json
python -m skillsight_fast.lab.evaluation.report results/eval
