"""Corpus statistics of an index build as sums over documents (METHOD.md: "all corpus statistics
are sums, so they can be computed in shards and added").

Two rounds are needed, because which tokens build the background subspace (T_g) is known only
once the document frequencies of the *whole* corpus are:

* :class:`CorpusStats`, round 1, per shard while it is encoded: the number of documents, the
  document frequency of every term, the sum of the embeddings (for the corpus mean d̄) and their
  second-moment matrix Σ d dᵀ (for the mean background energy e_D = tr(B S Bᵀ) / N of adaptive
  Rule 1, once the basis B is known).
* :class:`TokenStats`, round 2, over blocks of documents once T_g is known: the sum of the
  embeddings of the documents containing each background token (g_t = sum / df), and the sum over
  documents of their generic-token share (Rule 1's g).

Both are plain arrays and add up, so shards can be computed anywhere (chunk after chunk in one
process, or on Ray workers) and added in any grouping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from skillsight_fast.kernels.sharded import token_sums


@dataclass
class CorpusStats:
    """Round-1 statistics of a set of documents; :meth:`add` merges another set into it.

    Attributes
    ----------
    n_docs : int
    vocab : list of str
        The terms the documents contain, in order of first addition; ``df[i]`` is ``vocab[i]``'s.
    df : int64 (V,)
        Number of documents containing each term.
    emb_sum : float64 (d,)
        Σ of the document embeddings.
    gram : float64 (d, d)
        Σ d dᵀ over the document embeddings.
    """

    n_docs: int
    vocab: list[str]
    df: np.ndarray
    emb_sum: np.ndarray
    gram: np.ndarray
    _ids: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self._ids and self.vocab:
            self._ids = {t: i for i, t in enumerate(self.vocab)}

    @classmethod
    def of(cls, vocab: Sequence[str], df: np.ndarray, embeddings: np.ndarray) -> CorpusStats:
        """Statistics of one shard: its vocabulary and df, and its embeddings float32 (n, d)."""
        x = np.asarray(embeddings, dtype=np.float64)
        return cls(int(x.shape[0]), list(vocab), np.asarray(df, dtype=np.int64).copy(),
                   x.sum(axis=0), x.T @ x)

    @classmethod
    def empty(cls, dim: int) -> CorpusStats:
        return cls(0, [], np.zeros(0, np.int64), np.zeros(dim), np.zeros((dim, dim)))

    def add(self, other: CorpusStats) -> np.ndarray:
        """Add ``other``'s documents in place; returns the id here of each of ``other``'s terms.

        New terms are appended to ``vocab`` (amortised growth of ``df``), so adding S shards costs
        O(Σ |V_shard|), not O(S · V).
        """
        ids = self._ids
        where = np.empty(len(other.vocab), np.int64)
        for j, t in enumerate(other.vocab):
            i = ids.get(t)
            if i is None:
                i = ids[t] = len(self.vocab)
                self.vocab.append(t)
            where[j] = i
        if len(self.vocab) > self.df.shape[0]:
            grown = np.zeros(max(len(self.vocab), 2 * self.df.shape[0]), np.int64)
            grown[: self.df.shape[0]] = self.df
            self.df = grown
        np.add.at(self.df, where, other.df)
        self.n_docs += other.n_docs
        self.emb_sum = self.emb_sum + other.emb_sum
        self.gram = self.gram + other.gram
        return where

    def sorted(self) -> tuple[CorpusStats, np.ndarray]:
        """The statistics with the vocabulary sorted (the index's term order), and the new id of
        each current id (int32 (V,))."""
        v = len(self.vocab)
        order = sorted(range(v), key=self.vocab.__getitem__)
        rank = np.empty(v, np.int32)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(v, dtype=np.int32)
        df = self.df[:v][np.asarray(order, dtype=np.int64)] if v else np.zeros(0, np.int64)
        return CorpusStats(self.n_docs, [self.vocab[i] for i in order], df, self.emb_sum, self.gram), rank

    @property
    def mean(self) -> np.ndarray:
        """Mean document embedding d̄, float64 (d,)."""
        return self.emb_sum / self.n_docs if self.n_docs else np.zeros_like(self.emb_sum)

    def background_energy(self, basis: np.ndarray) -> float:
        """Mean ‖B d‖² over the documents, tr(B S Bᵀ) / N (0 for an empty corpus or basis)."""
        if self.n_docs == 0 or basis.size == 0:
            return 0.0
        b = np.asarray(basis, dtype=np.float64)
        return float(np.einsum("ij,jk,ik->", b, self.gram, b) / self.n_docs)


@dataclass
class TokenStats:
    """Round-2 statistics: per-token embedding sums and the generic-token shares.

    Attributes
    ----------
    sums : float64 (m, d)
        Σ of the embeddings of the documents containing each selected term.
    share_sum : float
        Σ over non-empty documents of |generic terms of the document| / |terms of the document|.
    n_nonempty : int
        Documents with at least one term.
    """

    sums: np.ndarray
    share_sum: float = 0.0
    n_nonempty: int = 0

    @classmethod
    def of(cls, doc_indptr: np.ndarray, doc_terms: np.ndarray, embeddings: np.ndarray,
           slot: np.ndarray, generic: np.ndarray, n_slots: int) -> TokenStats:
        """Statistics of one block of documents.

        Parameters
        ----------
        doc_indptr : int (n + 1,)
            Offsets of the block's rows into ``doc_terms`` (any start offset).
        doc_terms : int32
            Term ids of the rows, in the id space of ``slot`` and ``generic``.
        embeddings : float32 (n, d)
            The block's embeddings.
        slot : int32 (V,)
            Row of ``sums`` of each term, -1 for terms that are not summed.
        generic : bool (V,)
            T_g flags.
        n_slots : int
            Number of summed terms m.
        """
        x = np.ascontiguousarray(embeddings, dtype=np.float32)
        sums = np.zeros((n_slots, x.shape[1]), np.float64)
        ptr = np.asarray(doc_indptr, dtype=np.int64)
        base = int(ptr[0]) if ptr.size else 0
        terms = np.ascontiguousarray(doc_terms[base : int(ptr[-1]) if ptr.size else 0], dtype=np.int32)
        share, nonempty = token_sums(ptr - base, terms, x, np.asarray(slot, np.int32),
                                     np.asarray(generic, np.bool_), sums)
        return cls(sums, float(share), int(nonempty))

    def merge(self, other: TokenStats) -> TokenStats:
        """The statistics of both blocks."""
        return TokenStats(self.sums + other.sums, self.share_sum + other.share_sum,
                          self.n_nonempty + other.n_nonempty)

    @property
    def generic_share(self) -> float:
        """Rule 1's g: the mean generic-token share of the non-empty documents (0 when none)."""
        return self.share_sum / self.n_nonempty if self.n_nonempty else 0.0
