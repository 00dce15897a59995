"""SkillIndex: build, search, save and load a SkillSight index.

A search is six public stages, each a method over plain arrays (docs/METHOD.md has the formulas):

1. :meth:`SkillIndex.encode`: task texts → query vectors q (the index's query encoder: the
   transformer, or a static table lookup mapped into its space, docs/ENCODERS.md).
2. :meth:`SkillIndex.remove_background`: q⊥ = q − B Bᵀ q.
3. :meth:`SkillIndex.dense_candidates`: the top-K documents by s⊥ = q⊥ᵀ d⊥.
4. :meth:`SkillIndex.evidence_tokens`: the task's distinctive tokens Q' (known, not generic).
5. :meth:`SkillIndex.lexical_scores`: the lexical side (BM25 or LEC) of each candidate over Q'.
6. :meth:`SkillIndex.fuse`: fused score of each candidate, final top-k.

:meth:`SkillIndex.search` and :meth:`SkillIndex.search_vectors` run them in that order. Every
caller that times, evaluates or swaps a stage calls these methods; ``search_vectors`` takes a
replacement for the candidate or the lexical stage for one call (``dense_stage=``,
``lexical_stage=``) and per-call values of the query-time knobs, whose defaults are the index's
:class:`~skillsight_fast.engine.state.Decisions`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast import kernels
from skillsight_fast.config import ENGINES, MAPPED_TIERS, TABLE_TIERS, IndexConfig
from skillsight_fast.kernels import twins as numpy_stages
from skillsight_fast.engine.background import BM25_B, BM25_K1, estimate_background, select_background_terms
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.query_encoders import (
    QueryEncoders,
    contextual_table_of,
    gives_token_states,
    load_static_query_encoder,
    resolve_query_encoder,
)
from skillsight_fast.engine.scan import Scan, build_scan
from skillsight_fast.engine.state import (
    Decisions,
    DenseState,
    IndexState,
    IndexStats,
    LexicalState,
    ModelInfo,
    SkillMeta,
    remove_background,
)
from skillsight_fast.errors import EmbeddingError, QueryError, SkillsightError
from skillsight_fast.library.skills import Skill, namedesc_text
from skillsight_fast.limits import clean_text
from skillsight_fast.types import Encoder

logger = logging.getLogger(__name__)

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "SearchResult", "SkillIndex", "SkillMeta"]

#: Largest k a search accepts beyond the corpus size (results are padded up to k).
MAX_K = 10_000
#: Longest query text accepted (characters); the encoder sees only its first tokens anyway.
MAX_QUERY_CHARS = 100_000

#: A candidate stage: (q⊥ float32 (n, d), depth K) → (ids int64 (n, K), s⊥ float32 (n, K)).
DenseStage = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
#: A lexical stage: (candidates int64 (n, K), Q' terms int32, Q' offsets int64 (n + 1,)) → float32 (n, K).
LexicalStage = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass
class SearchResult:
    """Ranked hits for a batch of queries (faiss contract: 2-D, best first, padded).

    Attributes
    ----------
    ids : int64 (n_queries, k)
        Rows of the index, -1 on padding.
    scores : float32 (n_queries, k)
        Fused scores, -inf on padding.
    dense : float32 (n_queries, k)
        Calibrated dense score s⊥ of each hit (NaN on padding).
    lexical : float32 (n_queries, k)
        Lexical-side score of each hit (NaN on padding): BM25 (≥ 0), or LEC coverage in [0, 1].
    evidence : list of list of list of str
        For each query and hit, the query's evidence tokens that the skill contains.
    skill_ids : list of list of str or None
        The skills' string ids (None on padding).
    cosine : float32 (n_queries, k) or None
        Raw dense similarity qᵀd of each hit (NaN on padding): what a cosine abstention threshold
        reads. Filled by :meth:`SkillIndex.search_vectors`.
    """

    ids: np.ndarray
    scores: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray
    evidence: list[list[list[str]]] = field(default_factory=list)
    skill_ids: list[list[str | None]] = field(default_factory=list)
    cosine: np.ndarray | None = None


def cascade_search(searcher: Any, head: SkillIndex, texts: list[str], k: int, **knobs: Any
                   ) -> tuple[np.ndarray, SearchResult]:
    """:meth:`SkillIndex.encode_search` for any ``searcher`` with ``search_vectors`` (an index, or a
    sharded one) whose encoders and cascade are ``head``'s."""
    if head.config.fallback_below is None or not texts:
        vectors = head.encode(texts)
        return vectors, searcher.search_vectors(vectors, texts, k, **knobs)
    n = len(texts)
    first = np.flatnonzero(head.lookup_first(texts))  # the rows the lookup tries
    send = np.setdiff1d(np.arange(n), first)
    parts: list[tuple[np.ndarray, np.ndarray, SearchResult]] = []  # (rows, their vectors, their result)
    if first.size:
        sub_texts = texts if first.size == n else [texts[i] for i in first.tolist()]
        sub_vectors = head.encode(sub_texts)
        parts.append((first, sub_vectors, searcher.search_vectors(sub_vectors, sub_texts, k, **knobs)))
        send = np.union1d(send, first[head.unsure(parts[-1][2])])
    if send.size:
        sub_texts = texts if send.size == n else [texts[i] for i in send.tolist()]
        sub_vectors = np.asarray(head.encoders.fallback_encoder.encode(sub_texts), np.float32)
        parts.append((send, sub_vectors, searcher.search_vectors(sub_vectors, sub_texts, k, **knobs)))
    if parts[-1][0].size == n:  # one path answered every task (a single task always): nothing to assemble
        return parts[-1][1], parts[-1][2]
    vectors = np.zeros((n, head.stats.dim), np.float32)
    for rows, sub_vectors, _ in parts:
        vectors[rows] = sub_vectors
    return vectors, assemble_rows(n, [(rows, result) for rows, _, result in parts])


def assemble_rows(n: int, parts: Sequence[tuple[np.ndarray, SearchResult]]) -> SearchResult:
    """One result of ``n`` rows from partial results (their rows given); a later part's rows win."""
    first = parts[0][1]

    def rows_of(name: str) -> np.ndarray | None:
        if getattr(first, name) is None:
            return None
        out = np.empty((n, *getattr(first, name).shape[1:]), getattr(first, name).dtype)
        for rows, part in parts:
            out[rows] = getattr(part, name)
        return out

    result = SearchResult(ids=rows_of("ids"), scores=rows_of("scores"), dense=rows_of("dense"),
                          lexical=rows_of("lexical"), cosine=rows_of("cosine"))
    for name in ("evidence", "skill_ids"):
        if all(getattr(part, name) for _, part in parts):
            out: list[Any] = [None] * n
            for rows, part in parts:
                for at, row in zip(rows.tolist(), getattr(part, name)):
                    out[at] = row
            setattr(result, name, out)
    return result


def _fitted_dense(dense: DenseState, skills: Sequence[Skill] | Sequence[SkillMeta], texts: Sequence[str] | None,
                  encoder: Encoder | None, config: IndexConfig, prior: tuple[np.ndarray, np.ndarray],
                  unk_id: int | None) -> DenseState:
    """``dense`` with the fitted tier's table: the contextual table ``prior`` fitted to the transformer on
    the skills' own texts (:mod:`skillsight_fast.models.fitted`), teacher the int8 task graph; below
    :data:`~skillsight_fast.models.fitted.GENERAL_DIRECT_BELOW` skills the shipped general table as it is."""
    import dataclasses

    from skillsight_fast.models.fitted import direct_general_table, fit_library_table, library_training_set

    inner = getattr(encoder, "inner", encoder)
    if not all(isinstance(s, Skill) for s in skills) or getattr(inner, "tokenize", None) is None:
        raise SkillsightError("the fitted tier is fitted from the skills' texts with the transformer: build "
                              "it with SkillIndex.build and the ONNX encoder (or pass query_table)")
    general = direct_general_table(len(skills), getattr(inner, "checksum", None), int(dense.embeddings.shape[1]))
    if general is not None:  # a small library: the shipped general table as it is, no fit
        logger.info("fitted tier: %d skills, the general table (%d rows) as it is", len(skills), general[0].size)
        return dataclasses.replace(dense, query_table_ids=general[0], query_table=general[1])
    texts = list(texts) if texts is not None else [s.text for s in skills]  # type: ignore[union-attr]
    teacher: Any = encoder
    if getattr(inner, "onnx_path", None) is not None and not getattr(inner, "quantized", True):
        from skillsight_fast.models import load_encoder

        teacher = load_encoder(config.model, int8=True, threads=getattr(inner, "threads", None),
                               batch_size=getattr(inner, "batch_size", 32))
    t0 = time.perf_counter()
    all_texts, targets, owner = library_training_set(
        skills, texts, dense.embeddings, [namedesc_text(s.name, s.description) for s in skills], dense.namedesc,
        teacher)
    logger.info("fitted tier: %d training texts encoded in %.1f s", len(all_texts), time.perf_counter() - t0)
    ids, res = fit_library_table(prior[0], prior[1], inner.tokenize, all_texts, targets, owner, dense.basis,
                                 dense.embeddings_perp, drop=[unk_id] if unk_id is not None else [])
    return dataclasses.replace(dense, query_table_ids=ids, query_table=res.table)


def _decide(config: IndexConfig, embeddings: np.ndarray, basis: np.ndarray, lexical: LexicalState
            ) -> tuple[Decisions, np.ndarray, dict[str, Any]]:
    """The build's decisions, the basis in use, and the statistics the rules read."""
    if config.adaptive:
        from skillsight_fast.engine.adaptive import decide

        return decide(embeddings, basis, lexical.lexicon, lexical.generic, config)
    return Decisions.of_config(config, background=True), basis, {}


def _namedesc_vectors(config: IndexConfig, metas: Sequence[SkillMeta], emb: np.ndarray,
                      namedesc: np.ndarray | None, encoder: Encoder | None) -> np.ndarray | None:
    """The name + description vectors the build uses (None: the ``text`` document vector)."""
    if config.document_vector_side != "text+namedesc":
        return None
    if namedesc is None:
        if encoder is None or not metas:
            return None
        namedesc = encoder.encode([namedesc_text(m.name, m.description) for m in metas])
    nd = np.ascontiguousarray(namedesc, dtype=np.float32)
    if nd.shape != emb.shape:
        raise EmbeddingError(f"name + description embeddings {nd.shape} do not match {emb.shape}")
    if not np.isfinite(nd).all():
        raise EmbeddingError("name + description embeddings contain NaN or infinity")
    return nd


def hit_parts(pos: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dense and lexical score of each hit, from the candidates' scores and the hits' positions.

    Parameters
    ----------
    pos : int64 (n, k)
        Position of each hit among its query's candidates (-1 on padding), as :meth:`SkillIndex.fuse` returns.
    s_dense, s_lex : float32 (n, K)
        The candidates' dense and lexical scores.

    Returns
    -------
    dense, lexical : float32 (n, k)
        NaN on padding.
    """
    rows = np.arange(pos.shape[0])[:, None]
    safe = np.maximum(pos, 0)
    dense = np.where(pos >= 0, s_dense[rows, safe], np.nan).astype(np.float32)
    lex = np.where(pos >= 0, s_lex[rows, safe], np.nan).astype(np.float32)
    return dense, lex


def hit_cosines(embeddings: np.ndarray, vectors: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The raw dense similarity qᵀd of every hit.

    Parameters
    ----------
    embeddings : float32 (N, d)
        The document vectors (may be a memory map: only the hits' rows are read).
    vectors : float32 (n, d)
        The query vectors.
    ids : int64 (n, k)
        Rows of the hits, -1 on padding.

    Returns
    -------
    float32 (n, k)
        NaN on padding.
    """
    q = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    out = np.full(ids.shape, np.nan, np.float32)
    for i in range(ids.shape[0]):
        valid = ids[i] >= 0
        if valid.any():
            out[i, valid] = np.asarray(embeddings[ids[i, valid]]) @ q[i]
    return out


class SkillIndex:
    """A SkillSight index over a skill library.

    The constructor takes an :class:`~skillsight_fast.engine.state.IndexState` (arrays and records, not
    paths): use :meth:`build` (from skills and an encoder), :meth:`from_embeddings` (from
    precomputed document vectors) or :meth:`load`.

    Examples
    --------
    >>> from skillsight_fast import SkillIndex
    >>> index = SkillIndex.build(skills, encoder)                 # doctest: +SKIP
    >>> result = index.search(["merge two PDF files"], k=3)       # doctest: +SKIP
    >>> result.skill_ids[0]                                       # doctest: +SKIP
    ['pdf', 'pdf-merge', 'docx']
    """

    def __init__(self, state: IndexState, encoder: Encoder | None = None,
                 query_encoder: Encoder | None = None) -> None:
        #: The index's document and query encoders (:mod:`skillsight_fast.engine.query_encoders`).
        self.encoders = QueryEncoders(state, encoder, query_encoder)
        self.state = state
        #: The folder this index was loaded from (None when built in memory).
        self.source_dir: Path | None = None
        #: sha256 of the texts.jsonl loaded with the index (bodies of another version are refused).
        self.texts_sha256: str | None = None
        self._engine = "numba"

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls, skills: Sequence[Skill], encoder: Encoder | None = None, config: IndexConfig | None = None
    ) -> SkillIndex:
        """Encode ``skills`` and build the index.

        Parameters
        ----------
        skills : sequence of Skill
        encoder : Encoder, optional
            The document encoder; defaults to ``load_encoder(config.model, int8=config.int8)``
            (for the ``static`` tier: the static model).
        config : IndexConfig, optional
            ``query_encoder`` picks the tier; ``static-mapped`` also fits the query map on the
            skills' texts.
        """
        config = config or IndexConfig()
        if config.query_encoder == "auto":  # the cascade needs the transformer's token states
            if encoder is None:
                from skillsight_fast.models import load_encoder

                encoder = load_encoder(config.model, int8=config.int8)
            config = config.settled(can_fit=gives_token_states(encoder))
        config = resolve_query_encoder(config, encoder)
        if encoder is not None and config.query_encoder == "static" and encoder.checksum != load_static_query_encoder(config).checksum:
            encoder = None  # the static tier encodes the skills with the static model itself
        if encoder is None:
            from skillsight_fast.models import load_encoder

            encoder = load_encoder(config.model, int8=config.int8)
        query_table = None
        if config.query_encoder in TABLE_TIERS and getattr(encoder, "hidden_states", None) is not None:
            # the table tiers' token states come from the same pass as the skills' vectors
            from skillsight_fast.models.contextual import contextual_table, encode_with_token_sums

            embeddings, sums, counts = encode_with_token_sums(encoder, [s.text for s in skills])
            query_table = contextual_table(sums, counts)
        else:
            embeddings = encoder.encode([s.text for s in skills])
        return cls.from_embeddings(
            skills, embeddings, config, model_id=encoder.model_id,
            model_checksum=encoder.checksum, encoder=encoder, query_table=query_table,
            fit_query_table=config.query_encoder == "fitted",
        )

    @classmethod
    def from_embeddings(
        cls,
        skills: Sequence[Skill] | Sequence[SkillMeta],
        embeddings: np.ndarray,
        config: IndexConfig | None = None,
        *,
        model_id: str = "unknown",
        model_checksum: str = "",
        encoder: Encoder | None = None,
        texts: Sequence[str] | None = None,
        lexicon: Lexicon | None = None,
        basis: tuple[np.ndarray, np.ndarray] | None = None,
        decisions: Decisions | None = None,
        previous_scan: Scan | None = None,
        query_encoder: Encoder | None = None,
        query_map: np.ndarray | None = None,
        namedesc: np.ndarray | None = None,
        query_table: tuple[np.ndarray, np.ndarray] | None = None,
        derive: bool | None = None,
        fit_query_table: bool | None = None,
    ) -> "SkillIndex":
        """Build from precomputed document embeddings (float32 (N, d), unit rows).

        Parameters
        ----------
        skills : sequence of Skill or SkillMeta
        embeddings : float32 (N, d)
        config : IndexConfig, optional
        model_id, model_checksum : str
            The document encoder (queries must come from the same one).
        encoder : Encoder, optional
            Query encoder to attach.
        texts : sequence of str, optional
            The analysed text per skill; needed when ``skills`` are SkillMeta and no ``lexicon``
            is given.
        lexicon : Lexicon, optional
            A prebuilt lexicon over the same documents (skips analysis).
        basis : (float32 (r, d), float32 (m,)), optional
            A background basis and its singular values to use instead of estimating one (the
            synthetic scale-ups keep the real corpus's basis).
        decisions : Decisions, optional
            Keep these decisions instead of deciding from this corpus (with ``basis``: the basis
            in use); the synthetic scale-ups keep the real corpus's.
        previous_scan : Scan, optional
            The scan of the index being updated: an IVF scan keeps its trained cells
            (:data:`skillsight_fast.engine.scan.IVF_RETRAIN_FACTOR`).
        query_encoder : Encoder, optional
            ``static-mapped`` tier: the static query encoder (default: loaded from
            ``config.query_model``).
        query_map : float32 (d_s + 1, d), optional
            ``static-mapped`` and ``contextual`` tiers: a ready map (default: fitted here on the
            skills' texts).
        query_table : (int32 (m,), float32 (m, d)), optional
            ``contextual`` / ``fitted`` tier: a ready token table (default: computed here from
            ``encoder``'s token states over the skills' texts, a second pass of the transformer;
            :func:`skillsight_fast.models.contextual.contextual_table`; :meth:`build` takes them from
            its one pass).
        fit_query_table : bool, optional
            ``fitted`` tier: fit ``query_table`` (the contextual table) to the transformer here
            (:mod:`skillsight_fast.models.fitted`). Default: only a table computed here is fitted, a
            given one is kept as it is (what ``update`` does).
        namedesc : float32 (N, d), optional
            Embeddings of each skill's ``name + "\\n" + description`` for the ``text+namedesc``
            document vector (``config.document_vector_side``). Default: encoded here with
            ``encoder`` when the config asks for them and the index decides for itself
            (``decisions`` not given); without them the index scores the ``text`` vector and says
            so in ``decisions.document_vector``. Ignored when the config asks for ``text``.
        derive : bool, optional
            Derive the label-free abstention rule (:meth:`derive_abstention`); default: when an
            ``encoder`` is attached and the skills are Skill objects (an evaluation context, which
            attaches none, searches without it).
        """
        # precomputed vectors: the cascade's table needs the transformer's token states, unless given
        config = resolve_query_encoder((config or IndexConfig()).settled(can_fit=query_table is not None))
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != len(skills):
            raise EmbeddingError(f"embeddings {emb.shape} do not match {len(skills)} skills")
        if not np.isfinite(emb).all():
            bad = int((~np.isfinite(emb).all(axis=1)).sum())
            raise EmbeddingError(f"{bad} document embeddings contain NaN or infinity")
        metas = [s if isinstance(s, SkillMeta) else SkillMeta.of(s) for s in skills]
        namedesc = _namedesc_vectors(config, metas, emb, namedesc, encoder if decisions is None else None)
        if lexicon is None:
            if texts is None:
                if not all(isinstance(s, Skill) for s in skills):
                    raise SkillsightError("texts are needed to build the lexical index from SkillMeta")
                texts = [s.text for s in skills]  # type: ignore[union-attr]
            lexicon = Lexicon.build(texts, config.min_token_len, config.max_token_len)
        query_info: tuple[str, str] = ("", "")
        if config.query_encoder in MAPPED_TIERS:
            query_encoder = query_encoder or load_static_query_encoder(config)
            if query_map is None:  # the transformer is the teacher: static vector of each text -> its vector
                from skillsight_fast.models.static import fit_query_map

                if texts is None:
                    if not all(isinstance(s, Skill) for s in skills):
                        raise SkillsightError("texts are needed to fit the query map from SkillMeta")
                    texts = [s.text for s in skills]  # type: ignore[union-attr]
                query_map = fit_query_map(query_encoder.encode(list(texts)), emb)
            if query_map.shape != (query_encoder.dim + 1, emb.shape[1]):
                raise EmbeddingError(f"query map {query_map.shape} does not map dimension {query_encoder.dim} "
                                     f"onto {emb.shape[1]}")
            query_info = (query_encoder.model_id, query_encoder.checksum)
        else:
            query_map = None
        # the fitted tier fits a table it computes; a given table is kept as it is unless asked to fit it
        fit_table = config.query_encoder == "fitted" and (query_table is None if fit_query_table is None
                                                           else fit_query_table)
        if config.query_encoder in TABLE_TIERS:
            if query_table is None:
                query_table = contextual_table_of(skills, texts, encoder, config.query_encoder)
        else:
            query_table = None
        lexical, tau = LexicalState.build(lexicon, beta=config.beta, otsu_weighted=config.otsu_weighted)
        if basis is None:
            terms = select_background_terms(lexicon.df(), lexical.idf, lexical.generic,
                                            config.background_tokens, config.seed)
            bg = estimate_background(emb, terms, lexicon.post_indptr, lexicon.post_docs,
                                     max_rank=config.max_rank, rank=config.rank)
            paper_basis, singular_values, r_eff, n_terms = bg.basis, bg.singular_values, bg.effective_rank, len(terms)
        else:
            paper_basis, singular_values = basis
            r_eff, n_terms = int(paper_basis.shape[0]), 0
        if decisions is None:
            decisions, used_basis, rule_stats = _decide(config, emb, paper_basis, lexical)
        else:
            used_basis, rule_stats = paper_basis, {}
        dense = DenseState.build(emb, used_basis, singular_values, renormalize=config.renormalize,
                                 query_map=query_map, namedesc=namedesc, query_table=query_table)
        if fit_table:  # against the scored matrix and the basis in use
            assert query_table is not None
            dense = _fitted_dense(dense, skills, texts, encoder, config, query_table,
                                  query_encoder.unk_id if query_encoder is not None else None)
        if decisions.document_vector != dense.document_vector:  # what the scored matrix really is
            decisions = decisions.replace(document_vector=dense.document_vector)
        stats = IndexStats(
            n_docs=len(metas), dim=int(emb.shape[1]), vocab_size=len(lexicon.vocab),
            otsu_tau=float(tau) if math.isfinite(tau) else math.inf,
            n_generic=int(lexical.generic.sum()), n_background_terms=int(n_terms),
            effective_rank=int(r_eff), rank=int(dense.basis.shape[0]), **rule_stats,
        )
        bodies = flags = None
        if all(isinstance(s, Skill) for s in skills):
            from skillsight_fast.library.screen import screen_skill

            bodies = [s.body for s in skills]  # type: ignore[union-attr]
            flags = [screen_skill(s) for s in skills]  # type: ignore[arg-type]
        scan = build_scan(config.scan, dense.embeddings_perp, config=config, previous=previous_scan)
        state = IndexState(skills=metas, dense=dense, lexical=lexical, decisions=decisions, stats=stats,
                           config=config, model=ModelInfo(model_id, model_checksum, *query_info),
                           bodies=bodies, scan=scan, flags=flags)
        logger.info("index: %d skills, |T_g| = %d, r = %d", len(metas), stats.n_generic, stats.rank)
        index = cls(state, encoder, query_encoder if config.query_encoder in MAPPED_TIERS else None)
        if derive if derive is not None else (encoder is not None and bodies is not None):
            index.derive_abstention()
        return index

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> IndexState:
        """Everything the index holds (:class:`~skillsight_fast.engine.state.IndexState`)."""
        return self._state

    @state.setter
    def state(self, state: IndexState) -> None:
        self._state = state
        self.encoders.state = state

    def __len__(self) -> int:
        return len(self.state.skills)

    @property
    def skills(self) -> list[SkillMeta]:
        return self.state.skills

    @property
    def dense(self) -> DenseState:
        """Embeddings, background-removed embeddings, basis, singular values."""
        return self.state.dense

    @property
    def lexical(self) -> LexicalState:
        """Lexicon, IDF, LEC weights, generic-token mask."""
        return self.state.lexical

    @property
    def decisions(self) -> Decisions:
        """What the build decided and the query-time defaults (what a search will do)."""
        return self.state.decisions

    @property
    def stats(self) -> IndexStats:
        return self.state.stats

    @property
    def config(self) -> IndexConfig:
        """The build settings the index was built with."""
        return self.state.config

    @property
    def model_id(self) -> str:
        return self.state.model.id

    @property
    def model_checksum(self) -> str:
        return self.state.model.checksum

    @property
    def scan(self) -> Scan:
        """The dense candidate stage (:mod:`skillsight_fast.engine.scan`): exact, int8 or IVF."""
        return self.state.scan  # type: ignore[return-value]

    @property
    def roots(self) -> list[str]:
        """Absolute folders the skills' SKILL.md files were read from."""
        return self.state.roots

    @roots.setter
    def roots(self, roots: Sequence[str]) -> None:
        self.state.roots = [str(r) for r in roots]

    @property
    def pins(self) -> list[str]:
        """Ids of the skills every :func:`~skillsight_fast.agents.find.find_skills` answer starts with."""
        return self.state.pins

    @pins.setter
    def pins(self, pins: Sequence[str]) -> None:
        known = set(self.ids)
        unknown = [p for p in pins if p not in known]
        if unknown:
            raise SkillsightError(f"cannot pin unknown skill id(s): {', '.join(map(repr, unknown[:5]))}")
        self.state.pins = list(dict.fromkeys(pins))

    @property
    def abstention(self) -> dict[str, Any] | None:
        """The label-free abstention rule derived at build (``signal``, ``threshold``,
        ``duplicate_cosine``, ...; :func:`skillsight_fast.engine.abstention.derive_abstention`), or None."""
        return self.state.abstention

    def derive_abstention(self, bodies: Sequence[str] | None = None) -> dict[str, Any]:
        """Derive and keep this index's abstention rule from its own skills and the shipped off-topic
        tasks (needs the encoder); ``bodies`` default: the index's own, when it has them."""
        from skillsight_fast.engine.abstention import derive_abstention

        rule = derive_abstention(self, bodies if bodies is not None else self.state.bodies)
        self.state.abstention = rule
        return rule

    @property
    def flags(self) -> list[list[str]]:
        """Per skill, the reasons the prompt-injection scan flagged it ([] = clean)."""
        return self.state.flags  # type: ignore[return-value]

    @flags.setter
    def flags(self, flags: list[list[str]]) -> None:
        if len(flags) != len(self):
            raise SkillsightError(f"{len(flags)} injection-scan entries for {len(self)} skills")
        self.state.flags = flags

    @property
    def bodies(self) -> list[str] | None:
        """Markdown body per skill when built from Skill objects (saved as texts.jsonl; not loaded)."""
        return self.state.bodies

    @bodies.setter
    def bodies(self, bodies: list[str] | None) -> None:
        self.state.bodies = bodies

    # shortcuts to the arrays most callers read
    @property
    def embeddings(self) -> np.ndarray:
        return self.state.dense.embeddings

    @property
    def lexicon(self) -> Lexicon:
        return self.state.lexical.lexicon

    @property
    def ids(self) -> list[str]:
        """The skills' string ids, in row order."""
        return [s.id for s in self.state.skills]

    # ------------------------------------------------------------------ engine
    @property
    def engine(self) -> str:
        """What runs the stages after the encoder: ``"numba"`` (the kernels, the default) or
        ``"numpy"`` (:mod:`skillsight_fast.engine.numpy_stages`: same ids and order, no Numba import; for
        a process that searches a few tasks once). An int8 or IVF scan always runs its own code."""
        return self._engine

    @engine.setter
    def engine(self, engine: str) -> None:
        if engine not in ENGINES:
            raise SkillsightError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self._engine = engine

    @property
    def _ops(self) -> Any:
        """The module holding the stage functions of :attr:`engine`."""
        return numpy_stages if self._engine == "numpy" else kernels

    # ------------------------------------------------------------------ encoders
    @property
    def encoder(self) -> Encoder:
        """The document encoder (the model the skills were encoded with), loaded on first use and
        checked against the index's model. Tasks go through :attr:`query_encoder`."""
        return self.encoders.encoder

    @encoder.setter
    def encoder(self, encoder: Encoder) -> None:
        self.encoders.encoder = encoder

    @property
    def query_encoder(self) -> Encoder:
        """What encodes the tasks (:attr:`QueryEncoders.query_encoder`, docs/ENCODERS.md)."""
        return self.encoders.query_encoder

    @query_encoder.setter
    def query_encoder(self, encoder: Encoder) -> None:
        self.encoders.query_encoder = encoder

    def contextual_encoder(self) -> Encoder:
        """The contextual tier's task encoder (:meth:`QueryEncoders.contextual_encoder`)."""
        return self.encoders.contextual_encoder()

    # ------------------------------------------------------------------ input checks
    @staticmethod
    def check_queries(queries: str | Sequence[str]) -> list[str]:
        """The queries as a list, validated (QueryError), lone surrogates replaced by U+FFFD."""
        if isinstance(queries, str):
            queries = [queries]
        if queries is None or not isinstance(queries, Sequence):
            raise QueryError(f"queries must be a string or a sequence of strings, got {type(queries).__name__}")
        out = list(queries)
        for i, q in enumerate(out):
            if not isinstance(q, str):
                raise QueryError(f"a query must be a string, got {type(q).__name__}")
            if len(q) > MAX_QUERY_CHARS:
                raise QueryError(f"query of {len(q):,} characters is over the {MAX_QUERY_CHARS:,} limit")
            if not any(c.isprintable() and not c.isspace() for c in q):
                raise QueryError("empty query (only whitespace or control characters): "
                                 "give the task to find skills for")
            # lone surrogates (undecodable argv bytes, "\\ud800" in JSON) would crash the tokenizer
            out[i] = clean_text(q)
        return out

    def check_k(self, k: int, most: int | None = None) -> int:
        """``k`` as an int, validated (QueryError); ``most`` caps it lower than the index does
        (a server's per-request cap)."""
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise QueryError(f"k must be an integer, got {k!r}")
        if k <= 0:
            raise QueryError(f"k must be at least 1, got {k}")
        limit = max(MAX_K, len(self)) if most is None else most
        if k > limit:
            raise QueryError(f"k = {k} is too large (at most {limit})")
        return int(k)

    def query_decisions(self, **knobs: Any) -> Decisions:
        """The index's decisions with per-call knobs applied (None = the index's value).

        Raises
        ------
        QueryError
            An unknown knob or value, or a lexical side the index cannot score.
        """
        changes = {name: value for name, value in knobs.items() if value is not None}
        try:
            decisions = self.decisions.replace(**changes) if changes else self.decisions
        except TypeError as exc:
            raise QueryError(f"unknown search setting ({exc})") from None
        except SkillsightError as exc:
            raise QueryError(str(exc)) from None
        if decisions.lexical == "bm25" and not self.lexicon.has_tf:
            raise QueryError("this index stores no term frequencies, so it cannot score BM25: use lexical='lec'")
        return decisions

    # ------------------------------------------------------------------ stages
    def encode(self, queries: str | Sequence[str]) -> np.ndarray:
        """Stage 1: validate and encode task texts with the query encoder, float32 (n, d)."""
        texts = self.check_queries(queries)
        if not texts:
            return np.zeros((0, self.stats.dim), np.float32)
        qmap = self.dense.query_map
        if qmap is None:
            return self.query_encoder.encode(texts)
        if self.dense.query_table is not None:
            return self.contextual_encoder().encode(texts)
        from skillsight_fast.models.static import apply_query_map

        return apply_query_map(self.query_encoder.encode(texts), qmap)

    def remove_background(self, vectors: np.ndarray) -> np.ndarray:
        """Stage 2: q⊥ = q − B Bᵀ q (re-normalised if the index says so), float32 (n, d).

        Raises
        ------
        QueryError
            Wrong dimension, NaN or infinity.
        """
        q = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.stats.dim:
            raise QueryError(f"query vectors {q.shape} do not have dimension {self.stats.dim}")
        if not np.isfinite(q).all():
            raise QueryError("query embedding contains NaN or infinity")
        return remove_background(q, self.dense.basis, self.config.renormalize,
                                 project=self._ops.project_out_background)

    def dense_candidates(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Stage 3: the ``depth`` best documents by s⊥ = q⊥ᵀ d⊥ (the index's :attr:`scan`).

        Returns
        -------
        ids : int64 (n, min(depth, N)) (one column of -1 for an empty library)
        scores : float32, same shape (-inf on padding)
        """
        if len(self) == 0:
            cand = np.full((q_perp.shape[0], 1), -1, np.int64)
            return cand, np.full(cand.shape, -np.inf, np.float32)
        if self._engine == "numpy" and self.scan.kind == "exact":
            return numpy_stages.dense_topk(q_perp, self.scan.docs, min(len(self), depth))
        return self.scan.candidates(q_perp, min(len(self), depth))

    def evidence_tokens(self, texts: Sequence[str], exclude: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Stage 4: the evidence tokens Q' of each text (known, neither generic nor a stop-word), CSR.

        ``exclude`` (bool (V,)) replaces the mask (generic tokens T_g and stop-words,
        :attr:`LexicalState.evidence_flags`) for this call: all-False keeps every known token of the text.

        Returns
        -------
        terms : int32 (nnz,), unique per text, in order of appearance
        ptr : int64 (n + 1,)
        """
        cfg = self.config
        mask = self.lexical.evidence_flags if exclude is None else exclude
        return self.lexicon.query_terms(texts, mask, cfg.min_token_len, cfg.max_token_len)

    @property
    def _no_generic(self) -> bytes:
        """The mask of ``lexical_evidence="all"``: every known token but the stop-words (which never
        count as lexical score, :data:`~skillsight_fast.engine.lexicon.STOPWORDS`)."""
        return self.lexical.stopword_flags

    def lexical_scores(self, candidates: np.ndarray, terms: np.ndarray, ptr: np.ndarray,
                       side: str | None = None) -> np.ndarray:
        """Stage 5: the lexical side (``bm25`` or ``lec``; default the index's) of each candidate,
        float32 (n, K); 0 on padding."""
        lex = self.lexicon
        if (side or self.decisions.lexical) == "bm25":
            idf, avgdl = self.lexical.bm25
            return self._ops.score_bm25_candidates(candidates, terms, ptr, lex.doc_indptr, lex.doc_terms,
                                                   lex.doc_tf, lex.doc_len, idf, k1=BM25_K1, b=BM25_B,
                                                   avgdl=avgdl)
        return self._ops.score_lexical_candidates(candidates, terms, ptr, lex.doc_indptr, lex.doc_terms,
                                                  self.lexical.weights)

    def lexical_scores_all(self, terms: np.ndarray, ptr: np.ndarray) -> np.ndarray:
        """LEC coverage of every document, float32 (n, N) (the lexical candidate generator)."""
        if self.state.verification is not None:  # a load that deferred the postings' check runs it now
            self.state.verification.require("postings")
        lex = self.lexicon
        return self._ops.score_lexical_all(terms, ptr, lex.post_indptr, lex.post_docs, self.lexical.weights,
                                           len(self))

    def add_lexical_candidates(self, q_perp: np.ndarray, terms: np.ndarray, ptr: np.ndarray,
                               candidates: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Merge the ``depth`` best documents by LEC coverage into the candidate set.

        Returns the merged candidates int64 (n, K') and their s⊥ float32 (n, K') (-inf on padding).
        """
        lex_all = self.lexical_scores_all(terms, ptr)
        kl = min(len(self), depth)
        lex_top = np.argsort(-lex_all, axis=1, kind="stable")[:, :kl]
        lex_top = np.where(np.take_along_axis(lex_all, lex_top, 1) > 0, lex_top, -1)
        cand = self._ops.merge_candidates(candidates, lex_top)
        s_dense = np.full(cand.shape, -np.inf, np.float32)
        rows = np.nonzero(cand >= 0)
        s_dense[rows] = np.einsum("ij,ij->i", q_perp[rows[0]], self.dense.embeddings_perp[cand[rows]])
        return cand, s_dense

    def fuse(self, candidates: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int, *,
             fusion: str | None = None, lexical_weight: float | None = None,
             rrf_k: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stage 6: fused score of each candidate and the final top-k.

        Returns
        -------
        ids : int64 (n, k), -1 padding
        scores : float32 (n, k), -inf padding
        pos : int64 (n, k), position of each hit in its candidate row (-1 padding)
        """
        d = self.decisions
        return self._ops.fuse_topk(candidates, s_dense, s_lex, k, mode=fusion or d.fusion,
                                   weight=d.lexical_weight if lexical_weight is None else lexical_weight,
                                   rrf_k=d.rrf_k if rrf_k is None else rrf_k)

    # ------------------------------------------------------------------ search
    def search(self, queries: str | Sequence[str], k: int = 10, **knobs: Any) -> SearchResult:
        """Top-k skills for each query.

        Parameters
        ----------
        queries : str or sequence of str
            Task descriptions; one string still gives 2-D results.
        k : int
            Hits per query (padded with -1 / -inf when the library is smaller).
        **knobs
            Per-call settings of :meth:`search_vectors`.

        Raises
        ------
        QueryError
            Empty or over-long query, k < 1 or absurdly large, a bad setting.
        """
        texts = self.check_queries(queries)
        self.check_k(k)
        return self.encode_search(texts, k, **knobs)[1]

    def encode_search(self, queries: str | Sequence[str], k: int = 10, **knobs: Any
                      ) -> tuple[np.ndarray, SearchResult]:
        """Encode and search the tasks; returns the vectors that answered them and the result.

        For an index with a lookup-first cascade (``config.fallback_below``, docs/ENCODERS.md) the
        tasks whose lookup search's best fused score is below that value are encoded again by the
        transformer (:attr:`QueryEncoders.fallback_encoder`) and searched again; their rows of the
        result and of the vectors are the transformer's. Otherwise ``encode`` then
        ``search_vectors``. ``knobs`` are :meth:`search_vectors`'s.
        """
        return cascade_search(self, self, self.check_queries(queries), k, **knobs)

    def answering_vectors(self, queries: str | Sequence[str]) -> np.ndarray:
        """The vectors that answer the tasks: :meth:`encode`'s, or with a lookup-first cascade the
        lookup's or the transformer's per task (:meth:`encode_search`, which searches to decide)."""
        if self.config.fallback_below is None:
            return self.encode(queries)
        return self.encode_search(queries, 1, explain=False)[0]

    def lookup_first(self, texts: Sequence[str]) -> np.ndarray:
        """Which tasks the cascade tries with the lookup first (bool per task): all but those of fewer
        word pieces than ``config.lookup_min_pieces`` (the query encoder's tokenizer, [CLS] and [SEP]
        counted), which go to the transformer directly."""
        least = self.config.lookup_min_pieces
        if not least:
            return np.ones(len(texts), bool)
        return np.array([ids.size + 2 >= least for ids in self.query_encoder.tokenize(list(texts))], bool)

    def unsure(self, result: SearchResult) -> np.ndarray:
        """Rows of ``result`` (a lookup search) the cascade sends to the transformer: a finite best
        fused score below ``config.fallback_below`` (none without a cascade; a task with no hit
        has nothing the transformer could reorder)."""
        tau = self.config.fallback_below
        if tau is None or result.scores.shape[1] == 0:
            return np.zeros(0, np.int64)
        top = result.scores[:, 0]
        return np.flatnonzero(np.isfinite(top) & (top < tau))

    def search_vectors(self, vectors: np.ndarray, texts: Sequence[str], k: int = 10, *,
                       candidates: int | None = None, fusion: str | None = None,
                       lexical_weight: float | None = None, lexical: str | None = None,
                       lexical_candidates: int | None = None, rrf_k: float | None = None,
                       dense_stage: DenseStage | None = None, lexical_stage: LexicalStage | None = None,
                       explain: bool = True) -> SearchResult:
        """Search with already encoded queries (``texts`` give the lexical evidence).

        Parameters
        ----------
        vectors : float32 (n, d)
        texts : sequence of str, length n
        k : int
        candidates, fusion, lexical_weight, lexical, lexical_candidates, rrf_k : optional
            Query-time knobs; None keeps the index's value (:attr:`decisions`).
        dense_stage : callable, optional
            Replaces :meth:`dense_candidates` for this call: ``(q_perp, depth) -> (ids, s_perp)``.
        lexical_stage : callable, optional
            Replaces :meth:`lexical_scores` for this call: ``(candidates, terms, ptr) -> scores``.
        explain : bool
            Also collect the matched evidence tokens per hit (skip for raw speed).
        """
        k = self.check_k(k)
        d = self.query_decisions(candidates=candidates, fusion=fusion, lexical_weight=lexical_weight,
                                 lexical=lexical, lexical_candidates=lexical_candidates, rrf_k=rrf_k)
        if self._engine == "numba" and len(texts) == 1:
            # one task: every parallel kernel would run one iteration while its other threads wait at the
            # barrier; on a loaded machine that wait costs ~15 ms per kernel (bench/serve_latency.py)
            from skillsight_fast.kernels import single_thread

            with single_thread():
                return self._search_vectors(vectors, texts, k, d, dense_stage, lexical_stage, explain)
        return self._search_vectors(vectors, texts, k, d, dense_stage, lexical_stage, explain)

    def _search_vectors(self, vectors: np.ndarray, texts: Sequence[str], k: int, d: Decisions,
                        dense_stage: DenseStage | None, lexical_stage: LexicalStage | None,
                        explain: bool) -> SearchResult:
        q_perp = self.remove_background(vectors)
        if q_perp.shape[0] != len(texts):
            raise QueryError(f"{q_perp.shape[0]} query vectors for {len(texts)} texts")
        terms, ptr = self.evidence_tokens(texts)
        cand, s_dense = (dense_stage or self.dense_candidates)(q_perp, max(d.candidates, k))
        if d.lexical_candidates and len(self):  # admitted by LEC coverage, whichever side is fused
            cand, s_dense = self.add_lexical_candidates(q_perp, terms, ptr, cand, d.lexical_candidates)
        s_terms, s_ptr = terms, ptr  # what the lexical side scores; the evidence shown stays Q'
        if d.lexical == "bm25" and d.lexical_evidence == "all":
            s_terms, s_ptr = self.evidence_tokens(texts, exclude=self._no_generic)
        if lexical_stage is not None:
            s_lex = lexical_stage(cand, s_terms, s_ptr)
        else:
            s_lex = self.lexical_scores(cand, s_terms, s_ptr, side=d.lexical)
        result, _ = self.fused_result(cand, s_dense, s_lex, k, d, vectors)
        if explain:
            result.evidence = self._evidence(result.ids, terms, ptr)
        return result

    def fused_result(self, cand: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int, d: Decisions,
                     vectors: np.ndarray, embeddings: np.ndarray | None = None) -> tuple[SearchResult, np.ndarray]:
        """The last stage of a search: fuse the candidates' scores, keep the top ``k`` and fill the hits'
        parts, raw cosines (``embeddings``' rows, default the index's) and skill ids; also returns each
        hit's position in its candidate row (for evidence kept per candidate, as a sharded search does)."""
        ids, scores, pos = self.fuse(cand, s_dense, s_lex, k, fusion=d.fusion,
                                     lexical_weight=d.lexical_weight, rrf_k=d.rrf_k)
        dense, lex = hit_parts(pos, s_dense, s_lex)
        result = SearchResult(ids=ids, scores=scores, dense=dense, lexical=lex, cosine=hit_cosines(
            self.embeddings if embeddings is None else embeddings, vectors, ids))
        metas = self.skills
        result.skill_ids = [[metas[j].id if j >= 0 else None for j in row] for row in ids.tolist()]
        return result, pos

    def _evidence(self, ids: np.ndarray, terms: np.ndarray, ptr: np.ndarray) -> list[list[list[str]]]:
        """Per query and hit, the query's evidence tokens the hit contains (query order)."""
        lex = self.lexicon
        vocab = lex.vocab
        n, k = ids.shape
        mptr, mterms = self._ops.matched_terms(ids, terms, ptr, lex.doc_indptr, lex.doc_terms)
        at, found = mptr.tolist(), mterms.tolist()
        return [[[vocab[t] for t in found[at[i * k + c] : at[i * k + c + 1]]] for c in range(k)] for i in range(n)]

    def rebuild_scan(self, kind: str | None = None, **params: Any) -> Scan:
        """Replace the dense candidate scan (``exact``, ``int8``, ``ivf`` or ``auto``) in place.

        ``params`` are the scan fields of :class:`IndexConfig` (``int8_oversample``, ``ivf_nlist``,
        ``ivf_nprobe``); the config records the new choice. Nothing is re-encoded.
        """
        self.state.config = self.config.replace(scan=kind or self.config.scan, **params)
        self.state.scan = build_scan(self.config.scan, self.dense.embeddings_perp, config=self.config,
                                     previous=self.scan)
        return self.state.scan

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path, extra_files: dict[str, bytes] | None = None) -> Path:
        """Write the index atomically to ``directory`` (see :mod:`skillsight_fast.engine.io`).

        ``extra_files`` (file name -> bytes) are swapped in together with the index. A loaded
        index carries its stored bodies (``texts.jsonl``) over into the new folder.
        """
        from skillsight_fast.engine.io import read_bodies, save_index

        if self.state.bodies is None and self.source_dir is not None:
            try:
                self.state.bodies = read_bodies(self.source_dir)
            except (OSError, SkillsightError) as exc:
                logger.warning("not carrying texts.jsonl over from %s: %s", self.source_dir, exc)
        return save_index(self.state, Path(directory), extra_files)

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = False, verify: bool | str = True,
             encoder: Encoder | None = None) -> SkillIndex:
        """Load an index folder written by :meth:`save`.

        Parameters
        ----------
        directory : path
        mmap : bool
            Memory-map the large arrays read-only instead of reading them.
        verify : bool or str
            True: check every file's sha256 against the manifest and every value before returning;
            False: no checksums; ``"background"``: the checks that keep the kernels in bounds now,
            the checksums and the rest on a thread (:attr:`verification`); ``"lazy"``: the same,
            the rest run only by ``index.verification.wait()`` (docs/GUARANTEES.md).
        encoder : Encoder, optional
            Document encoder (the query encoder too, except in the static-mapped tier: set
            :attr:`query_encoder`); checked against the model recorded in the manifest.
        """
        from skillsight_fast.engine.io import load_index

        state, folder, texts_sha256 = load_index(Path(directory), mmap=mmap, verify=verify)
        index = cls(state)
        index.source_dir = folder  # bodies (texts.jsonl) stay on disk; save() carries them over
        # read_bodies checks texts.jsonl against this digest: bodies of another version are refused
        index.texts_sha256 = texts_sha256
        if encoder is not None:
            index.encoder = encoder
        return index

    @property
    def verification(self) -> Any:
        """The checks deferred by ``load(verify="background"|"lazy")``
        (:class:`skillsight_fast.io.Verification`), else None."""
        return self.state.verification

    def warmup(self) -> None:
        """Compile every kernel on tiny arrays of the production dtypes (cached on disk)."""
        from skillsight_fast.kernels.warmup import warmup_kernels

        warmup_kernels(self.stats.dim)
