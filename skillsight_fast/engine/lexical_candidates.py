"""The LEC coverage candidate generator: every document's coverage of the task's evidence tokens, and the
merge of the best ones into the dense candidate set (``lexical_candidates`` > 0)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["add_lexical_candidates", "lexical_scores_all"]


def lexical_scores_all(index: Any, terms: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """LEC coverage of every document, float32 (n, N) (the lexical candidate generator)."""
    if index.state.verification is not None:  # a load that deferred the postings' check runs it now
        index.state.verification.require("postings")
    lex = index.lexical.lexicon
    return index._ops.score_lexical_all(terms, ptr, lex.post_indptr, lex.post_docs, index.lexical.weights,
                                       len(index))

def add_lexical_candidates(index: Any, q_perp: np.ndarray, terms: np.ndarray, ptr: np.ndarray,
                           candidates: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge the ``depth`` best documents by LEC coverage into the candidate set.

    Returns the merged candidates int64 (n, K') and their s⊥ float32 (n, K') (-inf on padding).
    """
    lex_all = lexical_scores_all(index, terms, ptr)
    kl = min(len(index), depth)
    lex_top = np.argsort(-lex_all, axis=1, kind="stable")[:, :kl]
    lex_top = np.where(np.take_along_axis(lex_all, lex_top, 1) > 0, lex_top, -1)
    cand = index._ops.merge_candidates(candidates, lex_top)
    s_dense = np.full(cand.shape, -np.inf, np.float32)
    rows = np.nonzero(cand >= 0)
    s_dense[rows] = np.einsum("ij,ij->i", q_perp[rows[0]], index.dense.embeddings_perp[cand[rows]])
    return cand, s_dense
