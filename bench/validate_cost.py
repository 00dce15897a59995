"""Cost of the load-time content validation (skillsight_fast.engine.validate) at a given library size.

Synthetic arrays of the production dtypes and shapes: N skills, d = 384, `--terms` distinct terms per
skill from a Zipf-ish vocabulary, basis rank 8. Run: python bench/validate_cost.py 3434 1000000
"""

from __future__ import annotations

import sys
import time

import numpy as np

from skillsight_fast.engine import validate
from skillsight_fast.kernels import transpose_csr


def arrays_for(n: int, dim: int = 384, terms: int = 60, vocab: int = 200_000, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    ptr = np.arange(n + 1, dtype=np.int64) * terms
    flat = (rng.zipf(1.3, size=n * terms) % vocab).astype(np.int32)
    flat = flat.reshape(n, terms)
    flat.sort(axis=1)
    flat[:, 1:] = np.maximum(flat[:, 1:], flat[:, :-1] + 1)  # strictly increasing per row
    flat = np.minimum(flat, vocab - 1).reshape(-1)
    # rows that hit the cap may repeat the last id: make them distinct by construction
    flat = np.where(np.diff(np.r_[-1, flat]) > 0, flat, flat)
    q, _ = np.linalg.qr(rng.standard_normal((dim, 8)))
    basis = q.T.astype(np.float32)
    ok = np.ones(flat.size, bool)
    ok[1:] = (flat[1:] > flat[:-1]) | (np.arange(1, flat.size) % terms == 0)
    lens = np.add.reduceat(ok, np.arange(0, flat.size, terms))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    flat = flat[ok]
    post_ptr, post_docs = transpose_csr(ptr, flat, vocab)
    return {"embeddings": emb, "embeddings_perp": emb, "basis": basis,
            "singular_values": np.ones(8, np.float32), "idf": np.ones(vocab, np.float32),
            "weights": np.ones(vocab, np.float32), "generic": np.zeros(vocab, bool),
            "doc_indptr": ptr, "doc_terms": flat, "post_indptr": post_ptr, "post_docs": post_docs,
            "doc_tf": np.ones(flat.size, np.uint16), "doc_len": lens.astype(np.int32)}


def main(sizes: list[int]) -> None:
    for n in sizes:
        a = arrays_for(n)
        vocab = a["idf"].shape[0]
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            validate.check_arrays(a, n, vocab, 384)
            best = min(best, time.perf_counter() - t)
        terms = [f"t{i:07d}" for i in range(vocab)]
        vt = time.perf_counter()
        validate.check_vocab(terms)
        vt = time.perf_counter() - vt
        print(f"N = {n:>9,}: arrays {best * 1e3:8.1f} ms, vocab ({vocab:,} terms) {vt * 1e3:6.1f} ms, "
              f"nnz {a['doc_terms'].size:,}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [3434, 100_000])
