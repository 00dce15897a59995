"""The lexical index: vocabulary, document→terms CSR (forward) and term→documents CSR (postings),
plus each document's term frequencies and length (for the BM25 lexical side, docs/ADAPTIVE.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillsight_fast import kernels
from skillsight_fast.engine.analyzer import analyze


def _read_stopwords() -> frozenset[str]:
    from importlib.resources import files

    text = files("skillsight_fast").joinpath("data/stopwords_en.txt").read_text(encoding="utf-8")
    return frozenset(w for line in text.splitlines() if not line.lstrip().startswith("#") for w in line.split())


#: English function words (``skillsight_fast/data/stopwords_en.txt``, written for this project): never
#: evidence, never part of the lexical score, in a library of any size.
STOPWORDS: frozenset[str] = _read_stopwords()


def stopword_mask(vocab: Sequence[str], term_ids: Mapping[str, int] | None = None) -> np.ndarray:
    """bool (V,): which terms of ``vocab`` are :data:`STOPWORDS`.

    With ``term_ids`` (term -> id of the same vocabulary) each stop-word is looked up, so the cost is
    that of a few hundred lookups, not a pass over every term (2.8 M at a million skills).
    """
    if term_ids is None:
        return np.fromiter((t in STOPWORDS for t in vocab), bool, len(vocab))
    mask = np.zeros(len(vocab), bool)
    for word in STOPWORDS:
        j = term_ids.get(word)
        if j is not None:
            mask[j] = True
    return mask


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
        lexicon was built from token sets (and so when such an index is loaded).
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
        self._term_ids: Mapping[str, int] | None = None

    @property
    def n_docs(self) -> int:
        return int(self.doc_indptr.shape[0] - 1)

    @property
    def has_tf(self) -> bool:
        """True when term frequencies and document lengths are stored (the BM25 side needs them)."""
        return self.doc_tf is not None and self.doc_len is not None

    @property
    def term_ids(self) -> Mapping[str, int]:
        """term → id, built on first use (a loaded format-3 index bisects its sorted vocabulary
        column instead of building a dictionary of every term)."""
        if self._term_ids is None:
            from skillsight_fast.engine.columns import SortedTerms, StringColumn

            if isinstance(self.vocab, StringColumn):
                self._term_ids = SortedTerms(self.vocab)
            else:
                self._term_ids = {t: i for i, t in enumerate(self.vocab)}
        return self._term_ids

    def df(self) -> np.ndarray:
        """Document frequency of each term, int32 (V,)."""
        return np.diff(self.post_indptr).astype(np.int32)

    def doc_term_ids(self, row: int) -> np.ndarray:
        """Sorted term ids of document ``row``."""
        return self.doc_terms[self.doc_indptr[row] : self.doc_indptr[row + 1]]

    @classmethod
    def build(cls, texts: Sequence[str], min_len: int = 2, max_len: int = 40) -> Lexicon:
        """Analyse ``texts`` and build the vocabulary, both CSR indexes, term frequencies and lengths."""
        return cls.from_token_counts([Counter(analyze(t, min_len, max_len)) for t in texts])

    @classmethod
    def from_token_counts(cls, counts: Sequence[Mapping[str, int]]) -> Lexicon:
        """Build from one token → count mapping per document (counts ≥ 1); keeps tf and lengths."""
        return cls._from_docs(counts, with_tf=True)

    @classmethod
    def from_token_sets(cls, sets: Sequence[set[str]]) -> Lexicon:
        """Build from one token set per document."""
        return cls._from_docs(sets, with_tf=False)

    @classmethod
    def _from_docs(cls, docs: Sequence[Any], *, with_tf: bool) -> Lexicon:
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
        post_indptr, post_docs = kernels.transpose_csr(doc_indptr, doc_terms, len(vocab))
        lex = cls(vocab, doc_indptr, doc_terms, post_indptr, post_docs)
        lex._term_ids = ids
        if with_tf:
            flat_tf = np.fromiter((v for d in docs for v in d.values()), dtype=np.int64, count=nnz)
            doc_len = np.fromiter((sum(d.values()) for d in docs), dtype=np.int64, count=len(docs))
            lex.doc_tf = np.minimum(flat_tf[order], TF_MAX).astype(np.uint16)
            lex.doc_len = np.minimum(doc_len, np.iinfo(np.int32).max).astype(np.int32)
        return lex

    def reuse_rows(self, rows: np.ndarray, texts: Sequence[str], min_len: int = 2,
                   max_len: int = 40) -> Lexicon:
        """A lexicon whose row i is this lexicon's row ``rows[i]``, or a fresh analysis where -1.

        ``texts`` are the texts of the rows marked -1, in order. The result equals
        :meth:`build` over the full new list of texts (same vocabulary, ids, CSR indexes, term
        frequencies and lengths), but only the new texts are analysed: what an incremental update
        costs is the analysis of the changed skills plus array work linear in the corpus.

        Raises
        ------
        ValueError
            This lexicon has no term frequencies (it was built from token sets: rebuild instead),
            or ``texts`` does not match the number of -1 rows.
        """
        rows = np.asarray(rows, dtype=np.int64)
        fresh_pos = np.flatnonzero(rows < 0)
        if len(texts) != fresh_pos.size:
            raise ValueError(f"{fresh_pos.size} new rows but {len(texts)} texts")
        if not self.has_tf:
            raise ValueError("the lexicon has no term frequencies to carry over; rebuild it")
        fresh = Lexicon.build(texts, min_len, max_len)
        kept = rows[rows >= 0]
        old_len = np.diff(self.doc_indptr)
        used = np.zeros(len(self.vocab), bool)
        if kept.size:
            starts, lens = self.doc_indptr[kept], old_len[kept]
            used[self.doc_terms[segments(starts, lens)]] = True
        used_ids = np.flatnonzero(used)
        vocab = sorted({self.vocab[t] for t in used_ids.tolist()} | set(fresh.vocab))
        ids = {t: i for i, t in enumerate(vocab)}
        old_map = np.full(len(self.vocab), -1, np.int32)
        old_map[used_ids] = np.fromiter((ids[self.vocab[t]] for t in used_ids.tolist()), np.int32, used_ids.size)
        fresh_map = np.fromiter((ids[t] for t in fresh.vocab), np.int32, len(fresh.vocab))
        # one source array: this lexicon's entries, then the fresh ones, both in the new ids
        # (both maps are increasing, so every row's terms stay sorted)
        src_terms = np.concatenate([old_map[self.doc_terms], fresh_map[fresh.doc_terms]])
        src_tf = np.concatenate([self.doc_tf, fresh.doc_tf])
        src_len = np.concatenate([self.doc_len, fresh.doc_len])
        n_old = self.n_docs
        src_row = rows.copy()
        src_row[fresh_pos] = n_old + np.arange(fresh_pos.size)
        src_indptr = np.concatenate([self.doc_indptr[:-1], self.doc_indptr[-1] + fresh.doc_indptr])
        lens = np.diff(src_indptr)[src_row]
        doc_indptr = np.zeros(rows.size + 1, np.int64)
        np.cumsum(lens, out=doc_indptr[1:])
        take = segments(src_indptr[src_row], lens)
        doc_terms = src_terms[take]
        post_indptr, post_docs = kernels.transpose_csr(doc_indptr, doc_terms, len(vocab))
        lex = Lexicon(vocab, doc_indptr, doc_terms, post_indptr, post_docs, src_tf[take],
                      src_len[src_row].astype(np.int32))
        lex._term_ids = ids
        return lex

    def query_terms(self, texts: Sequence[str], exclude: np.ndarray | bytes, min_len: int = 2,
                    max_len: int = 40) -> tuple[np.ndarray, np.ndarray]:
        """Evidence tokens Q' of each query in CSR form: known terms not flagged in ``exclude``.

        ``exclude`` is a bool (V,) mask, or the same as bytes (one per term,
        ``mask.tobytes()``), which the per-token loop reads faster.

        Returns
        -------
        q_terms : int32 (nnz,), unique per query, in order of appearance.
        q_ptr : int64 (n + 1,)
        """
        ids = self.term_ids
        flags = exclude if isinstance(exclude, bytes) else np.ascontiguousarray(exclude, dtype=bool).tobytes()
        out: list[int] = []
        ptr = np.zeros(len(texts) + 1, dtype=np.int64)
        for i, text in enumerate(texts):
            seen = dict.fromkeys(analyze(text, min_len, max_len))
            for tok in seen:
                j = ids.get(tok)
                if j is not None and not flags[j]:
                    out.append(j)
            ptr[i + 1] = len(out)
        return np.asarray(out, dtype=np.int32), ptr


def segments(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions starts[0]..starts[0]+lens[0]-1, starts[1]..., concatenated, int64."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    out_ptr = np.zeros(lens.size, np.int64)
    np.cumsum(lens[:-1], out=out_ptr[1:])
    return np.arange(total, dtype=np.int64) + np.repeat(starts - out_ptr, lens)
