"""Compile every search kernel once on tiny arrays of the exact production dtypes.

Index-side arrays are passed both writable (built or loaded) and read-only (memory-mapped), which
Numba types apart, and batches of one and of several queries (serial and parallel kernels), so that
no later call of the package compiles a new specialisation. Build-only kernels (``kernels.sharded``,
``kernels.tablefit``) and ``bench``'s (``kernels.synthetic``, ``kernels.bandwidth``) are not in the
set; they compile the first time a build or a benchmark uses them.
"""

from __future__ import annotations

import numpy as np

from skillsight_fast.config import FUSIONS
from skillsight_fast.kernels import _compiled, _notice
from skillsight_fast.kernels.binary import dense_topk_binary, pack_signs
from skillsight_fast.kernels.compressed import dense_topk_int8, quantize_int8, rescore_rows
from skillsight_fast.kernels.csr import transpose_csr
from skillsight_fast.kernels.fusion import fuse_topk
from skillsight_fast.kernels.lexical import (
    matched_terms,
    score_bm25_candidates,
    score_lexical_all,
    score_lexical_candidates,
)
from skillsight_fast.kernels.projection import project_out_background
from skillsight_fast.kernels.stats import token_directions
from skillsight_fast.kernels.topk import dense_topk, merge_candidates


def warmup_kernels(dim: int = 8) -> None:
    """Run each search kernel once (compiling it, or loading it from Numba's on-disk cache), then
    stamp the cache as complete (:mod:`skillsight_fast.kernels._compiled`)."""
    with _notice.whole_set():
        _run_all(dim)
    _compiled.write_stamp()


def _run_all(dim: int) -> None:
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((4, dim)).astype(np.float32)
    basis = np.zeros((1, dim), np.float32)
    basis[0, 0] = 1.0
    for renorm in (False, True):
        q = project_out_background(docs[:2], basis, renormalize=renorm)
    qt, qp = np.array([0, 1], np.int32), np.array([0, 1, 2], np.int64)
    # index-side arrays twice: writable (loaded) and read-only (memory-mapped), which Numba types apart
    for writable in (True, False):
        d = docs.copy()
        indptr = np.array([0, 1, 2, 3, 4], np.int64)
        terms = np.array([0, 1, 0, 1], np.int32)
        tf, dl = np.ones(4, np.uint16), np.ones(4, np.int32)
        w = np.ones(2, np.float32)
        post_ptr, post_docs = np.array([0, 2, 4], np.int64), np.array([0, 2, 1, 3], np.int32)
        for a in (d, indptr, terms, tf, dl, w, post_ptr, post_docs):
            a.setflags(write=writable)
        cand, s = dense_topk(q, d, 3)
        dense_topk(q[:1], d, 3)
        lex = score_lexical_candidates(cand, qt, qp, indptr, terms, w)
        # idf: computed, writable
        score_bm25_candidates(cand, qt, qp, indptr, terms, tf, dl, np.ones(2, np.float32))
        score_lexical_all(qt, qp, post_ptr, post_docs, w, 4)
        matched_terms(cand, qt, qp, indptr, terms)
        rescore_rows(q[0], d, np.array([0, 2], np.int64))
    for mode in FUSIONS:
        fuse_topk(cand, s, lex, 2, mode=mode)
    merge_candidates(cand, cand)
    token_directions(np.array([0], np.int64), post_ptr, post_docs, docs)
    transpose_csr(np.array([0, 1, 2], np.int64), np.array([1, 0], np.int32), 2)
    codes, scales = quantize_int8(docs)
    bits = pack_signs(docs)
    for writable in (True, False):  # a loaded int8 or binary scan may be memory-mapped (read only)
        c, sc, d, b = codes.copy(), scales.copy(), docs.copy(), bits.copy()
        for a in (c, sc, d, b):
            a.setflags(write=writable)
        dense_topk_int8(q, c, sc, 2, docs=d)  # a batch: the parallel kernel
        dense_topk_int8(q[:1], c, sc, 2, docs=d)  # one query: the serial kernel
        dense_topk_int8(q, c, sc, 2)  # approximate scores only
        dense_topk_int8(q[:1], c, sc, 2)
        dense_topk_binary(q, b, c, sc, d, 2, rerank=4)
        dense_topk_binary(q[:1], b, c, sc, d, 2, rerank=4)
