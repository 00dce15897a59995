"""The research wing: what measures the product rather than being it.

``evaluation`` (``skillsight eval``: every baseline and ablation, paired bootstrap), ``benchmark``
(``skillsight bench``: speed side by side with faiss, bm25s and Dense + Reranker), ``baselines``
(the SPLADE and cross-encoder arms) and ``analyze`` (the paper's analysis report). Only the CLI
imports this package; an import-linter contract (``lab``) keeps every product module out of it.
"""
