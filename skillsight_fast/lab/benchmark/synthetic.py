"""Seeded synthetic scale-ups of a real skill index (for speed measurements only).

How a library of N skills is grown from a real one of N0 (documented in docs/SPEED.md):

* Rows 0..N0-1 are the real skills unchanged. Every further row j draws a real *source* skill
  s(j) uniformly at random.
* **Tokens**: each of the source's distinct terms is kept with probability ``keep`` (0.85); a kept
  rare term (real df <= 3) is renamed to a fresh synthetic term, so that copying a source does not
  turn its unique words into common ones; and
  Poisson(``(1 - keep) * len``) extra terms are added, so documents keep their length. An extra
  term is, with probability 1 - ``new_share`` (0.5), a term of the real vocabulary drawn from a
  Zipf law over its document-frequency rank (exponent 1.1), otherwise a *new* rare synthetic term,
  uniform over ``n_new`` fresh ids with ``n_new`` growing like Heaps' law (V ∝ N^0.6, a few
  documents each). The df distribution stays Zipfian, the vocabulary grows, generic terms stay
  generic.
* **Embeddings**: ``normalise(e_s + sigma * g)`` with g ~ N(0, I/d), sigma 0.5 (cosine to the source
  about 0.89), so the synthetic rows sit in the real embedding's clusters and keep its background
  direction.
* The background basis of the real index is reused (it is a corpus statistic the resampling keeps;
  recomputing the token directions at a million rows costs minutes); df, idf, T_g (Otsu) and the
  LEC weights are recomputed from the synthetic lexicon.
* **Term frequencies** (when the real index stores them, for its BM25 side): every synthetic
  term has tf = 1 and a document's length is its number of distinct terms. The BM25 kernel's work
  and memory traffic do not depend on the tf values, so this is enough for timing.

Memory (``workdir``): the largest arrays the grower writes (the resampling's work buffer, the
document → terms lists and their transpose, the term frequencies and the embeddings) can live in files of a scratch
folder, memory-mapped and unlinked at once (the mapping keeps them readable), so they are page cache
the kernel may write back and drop instead of anonymous memory; the arrays are the same either way.
At 2M skills the build's anonymous peak is 7.9 GB so (10.8 GB with only the transpose in memory;
docs/LARGE.md, "2M skills over 4 shard folders").
"""

from __future__ import annotations

import numpy as np

from skillsight_fast.kernels.synthetic import compact_rows as _compact
from skillsight_fast.kernels.synthetic import resample_terms as _resample_terms


class _Scratch:
    """Arrays of a build: anonymous memory, or (``folder`` given) ``.npy`` files in it, memory-mapped
    and unlinked at once, so they vanish with their last reference, crash or not."""

    def __init__(self, folder=None) -> None:
        self.folder = folder

    def empty(self, shape, dtype) -> np.ndarray:
        if self.folder is None:
            return np.empty(shape, dtype)
        import os
        import tempfile

        fd, name = tempfile.mkstemp(suffix=".npy", dir=self.folder)
        os.close(fd)
        try:
            return np.lib.format.open_memmap(name, mode="w+", dtype=dtype, shape=tuple(np.atleast_1d(shape)))
        finally:
            os.unlink(name)


def _zipf_sampler(n: int, exponent: float, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` draws of ranks in [0, n) with P(r) ∝ (r + 1)^-exponent."""
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -exponent)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size)), n - 1)


def scale_up(index, n_docs: int, *, seed: int = 0, keep: float = 0.85, new_share: float = 0.5,
             sigma: float = 0.5, zipf: float = 1.1, rare_df: int = 3, scan: str | None = None,
             workdir=None):
    """A :class:`SkillIndex` of ``n_docs`` rows grown from ``index`` (see the module docstring).

    ``scan``: the scan kind to build (default: the real index's config, ``auto`` resolved by size);
    ``workdir``: a folder for the memory-mapped scratch arrays (default: anonymous memory).

    Returns
    -------
    (SkillIndex, numpy.ndarray)
        The synthetic index and int64 (n_docs,) source row of each row (itself for real rows).
    """
    import math

    from skillsight_fast.engine.index import SkillIndex, SkillMeta
    from skillsight_fast.engine.lexicon import Lexicon
    from skillsight_fast.kernels import transpose_csr

    base_n = len(index)
    if n_docs < base_n:
        raise ValueError(f"n_docs {n_docs} is smaller than the real corpus ({base_n})")
    rng = np.random.default_rng(seed)
    lex = index.lexical.lexicon
    v0 = len(lex.vocab)
    src = np.concatenate([np.arange(base_n), rng.integers(0, base_n, n_docs - base_n)]).astype(np.int64)
    lens = np.diff(lex.doc_indptr)[src]
    n_extra = rng.poisson((1 - keep) * lens).astype(np.int64)
    n_extra[:base_n] = 0
    extra_ptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(n_extra, out=extra_ptr[1:])
    total_extra = int(extra_ptr[-1])
    n_new = int(v0 * max(1.0, (n_docs / base_n)) ** 0.6) - v0
    df_rank = np.argsort(-lex.df(), kind="stable").astype(np.int32)
    extra = np.empty(total_extra, np.int32)
    is_new = rng.random(total_extra) < new_share if n_new > 0 else np.zeros(total_extra, bool)
    n_is_new = int(is_new.sum())
    extra[~is_new] = df_rank[_zipf_sampler(v0, zipf, rng, total_extra - n_is_new)]
    if n_is_new:
        extra[is_new] = v0 + rng.integers(0, n_new, n_is_new).astype(np.int32)
    cap_ptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(lens + n_extra, out=cap_ptr[1:])
    mem = _Scratch(workdir)
    work = mem.empty(int(cap_ptr[-1]), np.int32)
    out_len = np.zeros(n_docs, np.int64)
    rare = lex.df() <= rare_df
    _resample_terms(src, base_n, lex.doc_indptr, lex.doc_terms, rare, float(keep), np.int32(v0),
                    max(n_new, 0), int(seed), extra_ptr, extra, cap_ptr, work, out_len)
    del extra, is_new, n_extra, extra_ptr
    doc_indptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(out_len, out=doc_indptr[1:])
    doc_terms = mem.empty(int(doc_indptr[-1]), np.int32)
    _compact(cap_ptr, work, out_len, doc_indptr, doc_terms)
    del work, cap_ptr, out_len
    n_terms = v0 + max(n_new, 0)
    post_indptr, post_docs = transpose_csr(doc_indptr, doc_terms, n_terms,
                                           out=mem.empty(doc_terms.shape[0], np.int32))
    # "{" sorts after every analyser character ([a-z0-9_]) and the ids are zero-padded: the vocabulary
    # stays sorted, as an index requires
    vocab = list(lex.vocab) + [f"{{syn{i:08d}}}" for i in range(max(n_new, 0))]
    lexicon = Lexicon(vocab, doc_indptr, doc_terms, post_indptr, post_docs)
    if index.lexical.lexicon.has_tf:  # same kernel as the real index (tf values do not change its cost)
        lexicon.doc_tf = mem.empty(doc_terms.shape[0], np.uint16)
        lexicon.doc_tf[:] = 1
        lexicon.doc_len = np.diff(doc_indptr).astype(np.int32)

    d = index.dense.embeddings.shape[1]
    emb = mem.empty((n_docs, d), np.float32)
    emb[:base_n] = index.dense.embeddings
    chunk = 1 << 16
    scale = np.float32(sigma / math.sqrt(d))
    for a in range(base_n, n_docs, chunk):
        b = min(n_docs, a + chunk)
        x = rng.standard_normal((b - a, d), dtype=np.float32)
        x *= scale
        x += index.dense.embeddings[src[a:b]]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        emb[a:b] = x
    base_meta = index.skills
    metas = base_meta + [
        SkillMeta(f"syn{j}/{base_meta[s].id}", base_meta[s].name, base_meta[s].description, "", "")
        for j, s in zip(range(base_n, n_docs), src[base_n:].tolist())
    ]
    # the public build path, keeping the real corpus's background basis and decisions
    config = index.config if scan is None else index.config.replace(scan=scan)
    syn = SkillIndex.from_embeddings(
        metas, emb, config, model_id=index.state.model.id, model_checksum=index.state.model.checksum,
        encoder=index.encoders.attached, lexicon=lexicon,
        basis=(index.dense.basis, index.dense.singular_values), decisions=index.decisions,
        query_encoder=index.encoders.attached_query if index.dense.query_map is not None else None,
        query_map=index.dense.query_map,
        query_table=None if index.dense.query_table is None else (index.dense.query_table_ids,
                                                                  index.dense.query_table))
    return syn, src
