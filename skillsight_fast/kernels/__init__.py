"""Numba kernels: pure functions over arrays, each with a checked Python wrapper.

- :func:`project_out_background`: q - B (B^T q) for a batch of vectors.
- :func:`dense_topk`: inner-product scan of a document matrix with top-K selection.
- :func:`score_lexical_candidates` / :func:`score_lexical_all`: LEC weighted coverage.
- :func:`score_bm25_candidates`: BM25 with term frequencies over the same tokens.
- :func:`matched_terms`: the query's evidence tokens each hit contains.
- :func:`transpose_csr`: document→terms CSR into term→documents postings.
- :func:`fuse_topk`: fusion of dense and lexical scores over the candidate set, final top-k.
"""

from skillsight_fast.kernels.csr import transpose_csr
from skillsight_fast.kernels.fusion import FUSION_MODES, fuse_topk
from skillsight_fast.kernels.lexical import (
    matched_terms,
    score_bm25_candidates,
    score_lexical_all,
    score_lexical_candidates,
)
from skillsight_fast.kernels.projection import project_out_background
from skillsight_fast.kernels.stats import token_directions
from skillsight_fast.kernels.topk import dense_topk, merge_candidates

__all__ = [
    "FUSION_MODES",
    "dense_topk",
    "fuse_topk",
    "matched_terms",
    "merge_candidates",
    "project_out_background",
    "score_bm25_candidates",
    "score_lexical_all",
    "score_lexical_candidates",
    "token_directions",
    "transpose_csr",
]
