"""The research wing: what measures the product rather than being it.

``evaluation`` (``skillsight lab eval``: every baseline and ablation, paired bootstrap),
``benchmark`` (``skillsight lab bench``: speed side by side with faiss, bm25s and Dense + Reranker),
``baselines`` (the SPLADE and cross-encoder arms) and ``analyze`` (``skillsight lab analyze``, the
paper's analysis report); ``skillsight eval``, ``bench`` and ``analyze`` are the same commands. Their
knobs are settings (``skillsight -c KEY=VALUE lab eval``, ``skillsight_fast.cli.settings``). Only the
CLI imports this package; an import-linter contract (``lab``) keeps every product module out of it.
"""
