"""Numba kernels: pure functions over arrays, each with a checked Python wrapper.

- :func:`project_out_background`: q - B (B^T q) for a batch of vectors.
- :func:`dense_topk`: inner-product scan of a document matrix with top-K selection.
- :func:`score_lexical_candidates` / :func:`score_lexical_all`: LEC weighted coverage.
- :func:`score_bm25_candidates`: BM25 with term frequencies over the same tokens.
- :func:`matched_terms`: the query's evidence tokens each hit contains.
- :func:`transpose_csr`: document→terms CSR into term→documents postings.
- :func:`fuse_topk`: fusion of dense and lexical scores over the candidate set, final top-k.
- :func:`single_thread` / :func:`n_threads`: a block run with one (or n) Numba threads.

Every Numba-compiled function of the package lives in this folder, one concern per file, and each
query kernel has its NumPy twin in :mod:`skillsight_fast.kernels.twins` (the tests' reference and the
one-shot search's stages). The import-linter contract ``kernels`` (pyproject.toml) names the packages
that may import this one; the ``_``-prefixed modules are private to it.

The names are loaded on first use (PEP 562 ``__getattr__``): importing this package does not
import Numba, so a process that never calls a kernel (a one-shot search on the NumPy stages,
:mod:`skillsight_fast.kernels.twins`) never pays Numba's import. Callers hold the package
(``from skillsight_fast import kernels``) and call ``kernels.fuse_topk(...)``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for type checkers and readers (nothing imported at run time)
    from skillsight_fast.kernels.csr import transpose_csr
    from skillsight_fast.kernels.fusion import FUSION_MODES, fuse_topk
    from skillsight_fast.kernels.lexical import (
        matched_terms,
        score_bm25_candidates,
        score_lexical_all,
        score_lexical_candidates,
    )
    from skillsight_fast.kernels.projection import project_out_background
    from skillsight_fast.kernels.stats import token_direction_sums, token_directions
    from skillsight_fast.kernels.threads import n_threads, single_thread
    from skillsight_fast.kernels.topk import dense_topk, merge_candidates

#: Public name -> the submodule that defines it.
_WHERE = {
    "FUSION_MODES": "fusion",
    "dense_topk": "topk",
    "fuse_topk": "fusion",
    "matched_terms": "lexical",
    "merge_candidates": "topk",
    "n_threads": "threads",
    "project_out_background": "projection",
    "score_bm25_candidates": "lexical",
    "score_lexical_all": "lexical",
    "score_lexical_candidates": "lexical",
    "single_thread": "threads",
    "token_direction_sums": "stats",
    "token_directions": "stats",
    "transpose_csr": "csr",
}

__all__ = [
    "FUSION_MODES",
    "dense_topk",
    "fuse_topk",
    "matched_terms",
    "merge_candidates",
    "n_threads",
    "project_out_background",
    "score_bm25_candidates",
    "score_lexical_all",
    "score_lexical_candidates",
    "single_thread",
    "token_direction_sums",
    "token_directions",
    "transpose_csr",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
