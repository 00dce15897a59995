"""Baselines that only the evaluation and the benchmark run: SPLADE and the cross-encoder rerankers."""
