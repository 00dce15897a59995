"""The lexical index: vocabulary, document→terms CSR (forward) and term→documents CSR (postings),
plus each document's term frequencies and length (for the BM25 lexical side, docs/ADAPTIVE.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillsight_fast.analyzer import analyze

#: Largest stored term frequency (doc_tf is uint16; BM25's tf saturation makes the cap harmless:
#: tf/(tf + k1·norm) differs from 1 by less than 1e-4 there).
TF_MAX = np.iinfo(np.uint16).max


@dataclass
class Lexicon:
    """Sparse binary incidence of terms in documents, in both directions.

    Attributes
    ----------
    vocab : list[str]
        Sorted terms; a term's id is its position.
    doc_indptr, doc_terms : int64 (N + 1,), int32 (nnz,)
        Sorted distinct term ids of each document.
    post_indptr, post_docs : int64 (V + 1,), int32 (nnz,)
        Sorted document rows containing each term.
    doc_tf : uint16 (nnz,) or None
        Term frequency of each entry of ``doc_terms`` (capped at ``TF_MAX``); None when the
        lexicon was built from token sets (or loaded from an index saved without it).
    doc_len : int32 (N,) or None
        Number of analyzer tokens of each document (with repeats), the BM25 document length.
    """

    vocab: list[str]
    doc_indptr: np.ndarray
    doc_terms: np.ndarray
    post_indptr: np.ndarray
    post_docs: np.ndarray
    doc_tf: np.ndarray | None = None
    doc_len: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._term_ids: dict[str, int] | None = None

    @property
    def n_docs(self) -> int:
        return int(self.doc_indptr.shape[0] - 1)

    @property
    def has_tf(self) -> bool:
        """True when term frequencies and document lengths are stored (the BM25 side needs them)."""
        return self.doc_tf is not None and self.doc_len is not None

    @property
    def term_ids(self) -> dict[str, int]:
        """term → id, built on first use."""
        if self._term_ids is None:
            self._term_ids = {t: i for i, t in enumerate(self.vocab)}
        return self._term_ids

    def df(self) -> np.ndarray:
        """Document frequency of each term, int32 (V,)."""
        return np.diff(self.post_indptr).astype(np.int32)

    def doc_term_ids(self, row: int) -> np.ndarray:
        """Sorted term ids of document ``row``."""
        return self.doc_terms[self.doc_indptr[row] : self.doc_indptr[row + 1]]

    @classmethod
    def build(cls, texts: Sequence[str], min_len: int = 2, max_len: int = 40) -> "Lexicon":
        """Analyse ``texts`` and build the vocabulary, both CSR indexes, term frequencies and lengths."""
        return cls.from_token_counts([Counter(analyze(t, min_len, max_len)) for t in texts])

    @classmethod
    def from_token_counts(cls, counts: Sequence[Mapping[str, int]]) -> "Lexicon":
        """Build from one token → count mapping per document (counts ≥ 1); keeps tf and lengths."""
        return cls._from_docs(counts, with_tf=True)

    @classmethod
    def from_token_sets(cls, sets: Sequence[set[str]]) -> "Lexicon":
        """Build from one token set per document."""
        return cls._from_docs(sets, with_tf=False)

    @classmethod
    def _from_docs(cls, docs: Sequence[Any], *, with_tf: bool) -> "Lexicon":
        """One pass over the documents' distinct tokens (sets, or token → count mappings when
        ``with_tf``): vocabulary, both CSR indexes, and the term frequencies in ``doc_terms`` order."""
        vocab = sorted(set().union(*docs)) if docs else []
        ids = {t: i for i, t in enumerate(vocab)}
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        doc_indptr = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=doc_indptr[1:])
        nnz = int(doc_indptr[-1])
        flat = np.fromiter((ids[t] for d in docs for t in d), dtype=np.int32, count=nnz)
        rows = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        order = np.lexsort((flat, rows))  # sorted term ids within each document
        doc_terms = flat[order]
        post_indptr, post_docs = invert(doc_indptr, doc_terms, len(vocab))
        lex = cls(vocab, doc_indptr, doc_terms, post_indptr, post_docs)
        lex._term_ids = ids
        if with_tf:
            flat_tf = np.fromiter((v for d in docs for v in d.values()), dtype=np.int64, count=nnz)
            doc_len = np.fromiter((sum(d.values()) for d in docs), dtype=np.int64, count=len(docs))
            lex.doc_tf = np.minimum(flat_tf[order], TF_MAX).astype(np.uint16)
            lex.doc_len = np.minimum(doc_len, np.iinfo(np.int32).max).astype(np.int32)
        return lex

    def query_terms(self, texts: Sequence[str], exclude: np.ndarray, min_len: int = 2,
                    max_len: int = 40) -> tuple[np.ndarray, np.ndarray]:
        """Evidence tokens Q' of each query in CSR form: known terms not flagged in ``exclude``.

        Returns
        -------
        q_terms : int32 (nnz,), unique per query, in order of appearance.
        q_ptr : int64 (n + 1,)
        """
        ids = self.term_ids
        out: list[int] = []
        ptr = np.zeros(len(texts) + 1, dtype=np.int64)
        for i, text in enumerate(texts):
            seen = dict.fromkeys(analyze(text, min_len, max_len))
            for tok in seen:
                j = ids.get(tok)
                if j is not None and not exclude[j]:
                    out.append(j)
            ptr[i + 1] = len(out)
        return np.asarray(out, dtype=np.int32), ptr


def invert(indptr: np.ndarray, indices: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Transpose a binary CSR matrix: rows→columns becomes columns→rows (rows sorted)."""
    n_rows = indptr.shape[0] - 1
    rows = np.repeat(np.arange(n_rows, dtype=np.int32), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    counts = np.bincount(indices, minlength=n_cols) if indices.size else np.zeros(n_cols, np.int64)
    out_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(counts, out=out_ptr[1:])
    return out_ptr, rows[order].astype(np.int32)
