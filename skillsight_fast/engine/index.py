"""SkillIndex: build, search, save and load a SkillSight index.

A search is six public stages, each a method over plain arrays (docs/METHOD.md has the formulas):

1. :meth:`SkillIndex.encode`: task texts → query vectors q (the index's query encoder: the
   transformer, or a static table lookup mapped into its space, docs/ENCODERS.md).
2. :meth:`SkillIndex.remove_background`: q⊥ = q − B Bᵀ q.
3. :meth:`SkillIndex.dense_candidates`: the top-K documents by s⊥ = q⊥ᵀ d⊥.
4. :meth:`SkillIndex.evidence_tokens`: the task's distinctive tokens Q' (known, not generic).
5. :meth:`SkillIndex.lexical_scores`: the lexical side (BM25 or LEC) of each candidate over Q'.
6. :meth:`SkillIndex.fuse`: fused score of each candidate, final top-k.

:meth:`SkillIndex.search` and :meth:`SkillIndex.search_vectors` run them in order; ``search_vectors``
takes a replacement candidate or lexical stage for one call and per-call knobs (defaults: the index's
:class:`~skillsight_fast.engine.state.Decisions`). Building: :mod:`~skillsight_fast.engine.build`; the
cascade: :mod:`~skillsight_fast.engine.cascade`; results and input checks: :mod:`~skillsight_fast.engine.result`;
what every searcher offers: :class:`~skillsight_fast.engine.searcher.Searcher`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast import kernels
from skillsight_fast.config import ENGINES, IndexConfig, ScanConfig
from skillsight_fast.engine.background import BM25_B, BM25_K1
from skillsight_fast.engine.cascade import Cascade, cascade_search
from skillsight_fast.engine.lexical_candidates import add_lexical_candidates
from skillsight_fast.engine.query_encoders import QueryEncoders, resolve_query_encoder
from skillsight_fast.engine.result import (
    MAX_K,
    MAX_QUERY_CHARS,
    SearchResult,
    check_k,
    check_queries,
    continued_result,
    hit_cosines,
    hit_evidence,
)
from skillsight_fast.engine.scan import Scan, build_scan
from skillsight_fast.engine.state import (
    Decisions,
    DenseState,
    IndexState,
    IndexStats,
    LexicalState,
    SkillMeta,
    query_decisions,
    remove_background,
)
from skillsight_fast.errors import QueryError, SkillsightError
from skillsight_fast.kernels import twins as numpy_stages
from skillsight_fast.library.skills import Skill
from skillsight_fast.types import Encoder

logger = logging.getLogger(__name__)

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "SearchResult", "SkillIndex", "SkillMeta", "check_queries", "hit_cosines",
           "resolve_query_encoder"]

#: A candidate stage: (q⊥ float32 (n, d), depth K) → (ids int64 (n, K), s⊥ float32 (n, K)); a lexical stage:
#: (candidates int64 (n, K), Q' terms int32, Q' offsets int64 (n + 1,)) → float32 (n, K).
DenseStage = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
LexicalStage = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class SkillIndex:
    """A SkillSight index over a skill library.

    The constructor takes an :class:`~skillsight_fast.engine.state.IndexState` (arrays and records, not
    paths): use :meth:`build` (from skills and an encoder), :meth:`from_embeddings` (from
    precomputed document vectors) or :meth:`load`. The library's records (``pins``, ``flags``,
    ``roots``, ``abstention``, ``model``, ...) are :attr:`state`'s.

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
        self._engine = "numba"

    @classmethod
    def build(cls, skills: Sequence[Skill], encoder: Encoder | None = None,
              config: IndexConfig | None = None, cascade: Cascade | None = None) -> SkillIndex:
        """Encode ``skills`` and build the index.

        Parameters
        ----------
        skills : sequence of Skill
        encoder : Encoder, optional
            The document encoder; defaults to ``load_encoder(config.encoder.model, int8=config.encoder.int8)``
            (for the ``static`` tier: the static model).
        config : IndexConfig, optional
            ``query_encoder`` picks the tier; ``static-mapped`` also fits the query map on the
            skills' texts.
        cascade : Cascade, optional
            The index's default cascade; None: :data:`~skillsight_fast.engine.cascade.DEFAULT_CASCADE` when
            ``auto`` settles into a lookup tier, else none.
        """
        from skillsight_fast.engine.build import build_index

        return build_index(cls, skills, encoder, config, cascade)

    @classmethod
    def from_embeddings(cls, skills: Sequence[Skill] | Sequence[SkillMeta], embeddings: np.ndarray,
                        config: IndexConfig | None = None, *, model_id: str = "unknown", model_checksum: str = "",
                        encoder: Encoder | None = None, query_encoder: Encoder | None = None,
                        prebuilt: Any = None, derive: bool | None = None, **ready: Any) -> SkillIndex:
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
        query_encoder : Encoder, optional
            Mapped tiers: the static query encoder (default: loaded from ``config.encoder.query_model``).
        prebuilt : :class:`~skillsight_fast.engine.build.Prebuilt`, optional
            What the build takes ready instead of computing (texts, lexicon, basis, decisions, previous
            scan, query map or table, name + description vectors); ``**ready`` are its fields as
            keywords, a shorthand for ``prebuilt=Prebuilt(...)``.
        derive : bool, optional
            Derive the label-free abstention rule (default: an ``encoder`` attached to Skill objects).
        """
        from skillsight_fast.engine.build import Prebuilt, index_from_embeddings

        if ready:
            if prebuilt is not None:
                raise TypeError("give prebuilt= or its fields as keywords, not both")
            prebuilt = Prebuilt.of(**ready)
        return index_from_embeddings(cls, skills, embeddings, config, model_id=model_id,
                                     model_checksum=model_checksum, encoder=encoder, query_encoder=query_encoder,
                                     prebuilt=prebuilt, derive=derive)

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
    def ids(self) -> list[str]:
        """The skills' string ids, in row order."""
        return [s.id for s in self.state.skills]

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
    def cascade(self) -> Cascade:
        """The index's default lookup-first cascade (:mod:`skillsight_fast.engine.cascade`); a search may
        pass another (``cascade=``)."""
        return self.state.cascade

    @property
    def scan(self) -> Scan:
        """The dense candidate stage (:mod:`skillsight_fast.engine.scan`): exact, int8 or IVF."""
        return self.state.scan  # type: ignore[return-value]

    @property
    def engine(self) -> str:
        """What runs the stages after the encoder: ``"numba"`` (the kernels, the default) or
        ``"numpy"`` (:mod:`skillsight_fast.kernels.twins`: same ids and order, no Numba import; for
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

    @property
    def encoder(self) -> Encoder:
        """The document encoder (the model the skills were encoded with), loaded on first use and
        checked against the index's model. Tasks go through ``encoders.query_encoder``."""
        return self.encoders.encoder

    @encoder.setter
    def encoder(self, encoder: Encoder) -> None:
        self.encoders.encoder = encoder

    def check_k(self, k: int, most: int | None = None) -> int:
        """``k`` as an int, validated (QueryError); ``most`` caps it lower than the index does
        (a server's per-request cap)."""
        return check_k(k, len(self), most)

    # ------------------------------------------------------------------ stages
    def encode(self, queries: str | Sequence[str]) -> np.ndarray:
        """Stage 1: encode task texts (checked by the caller: :func:`~skillsight_fast.engine.result.check_queries`)
        with the query encoder, float32 (n, d)."""
        texts = [queries] if isinstance(queries, str) else list(queries)
        if not texts:
            return np.zeros((0, self.stats.dim), np.float32)
        qmap = self.dense.query_map
        if qmap is None:
            return self.encoders.query_encoder.encode(texts)
        if self.dense.query_table is not None:
            return self.encoders.contextual_encoder().encode(texts)
        from skillsight_fast.models.static import apply_query_map

        return apply_query_map(self.encoders.query_encoder.encode(texts), qmap)

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
        return remove_background(q, self.dense.basis, self.config.background.renormalize,
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
        return self.lexical.lexicon.query_terms(texts, mask, cfg.analyzer.min_token_len, cfg.analyzer.max_token_len)

    def lexical_scores(self, candidates: np.ndarray, terms: np.ndarray, ptr: np.ndarray,
                       side: str | None = None) -> np.ndarray:
        """Stage 5: the lexical side (``bm25`` or ``lec``; default the index's) of each candidate,
        float32 (n, K); 0 on padding."""
        lex = self.lexical.lexicon
        if (side or self.decisions.lexical) == "bm25":
            idf, avgdl = self.lexical.bm25
            return self._ops.score_bm25_candidates(candidates, terms, ptr, lex.doc_indptr, lex.doc_terms,
                                                   lex.doc_tf, lex.doc_len, idf, k1=BM25_K1, b=BM25_B,
                                                   avgdl=avgdl)
        return self._ops.score_lexical_candidates(candidates, terms, ptr, lex.doc_indptr, lex.doc_terms,
                                                  self.lexical.weights)

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
        """Top-k skills for each query (the entry point: the texts and ``k`` are checked here, once).

        Parameters
        ----------
        queries : str or sequence of str
            Task descriptions; one string still gives 2-D results.
        k : int
            Hits per query (padded with -1 / -inf when the library is smaller).
        **knobs
            Per-call settings of :meth:`search_vectors`, and ``cascade=`` (a
            :class:`~skillsight_fast.engine.cascade.Cascade`; default the index's).

        Raises
        ------
        QueryError
            Empty or over-long query, k < 1 or absurdly large, a bad setting.
        """
        texts = check_queries(queries)
        self.check_k(k)
        return self.encode_search(texts, k, **knobs)[1]

    def encode_search(self, texts: Sequence[str], k: int = 10, cascade: Cascade | None = None, **knobs: Any
                      ) -> tuple[np.ndarray, SearchResult]:
        """Encode and search checked task texts; returns the vectors that answered them and the result.

        With a lookup-first cascade (``cascade``, default :attr:`cascade`; docs/ENCODERS.md) the tasks whose
        lookup search's best fused score is below its threshold are encoded again by the transformer
        (``encoders.fallback_encoder``) and searched again; their rows of the result and of the vectors
        are the transformer's. Otherwise ``encode`` then ``search_vectors``. ``knobs`` are
        :meth:`search_vectors`'s.
        """
        return cascade_search(self, self, list(texts), k, cascade, **knobs)

    def search_vectors(self, vectors: np.ndarray, texts: Sequence[str], k: int = 10, *,
                       candidates: int | None = None, fusion: str | None = None,
                       lexical_weight: float | None = None, lexical: str | None = None,
                       lexical_candidates: int | None = None, rrf_k: float | None = None,
                       continuation: str | None = None,
                       dense_stage: DenseStage | None = None, lexical_stage: LexicalStage | None = None,
                       explain: bool = True) -> SearchResult:
        """Search with already encoded queries (``texts`` give the lexical evidence).

        Parameters
        ----------
        vectors : float32 (n, d)
        texts : sequence of str, length n
        k : int
        candidates, fusion, lexical_weight, lexical, lexical_candidates, rrf_k, continuation : optional
            Query-time knobs; None keeps the index's value (:attr:`decisions`). ``continuation="rrf"``
            orders the hits past the first 10 by RRF (:mod:`skillsight_fast.engine.depth`): their scores
            are then each hit's own and need not decrease there.
        dense_stage : callable, optional
            Replaces :meth:`dense_candidates` for this call: ``(q_perp, depth) -> (ids, s_perp)``.
        lexical_stage : callable, optional
            Replaces :meth:`lexical_scores` for this call: ``(candidates, terms, ptr) -> scores``.
        explain : bool
            Also collect the matched evidence tokens per hit (skip for raw speed).
        """
        k = self.check_k(k)
        d = query_decisions(self, candidates=candidates, fusion=fusion, lexical_weight=lexical_weight,
                            lexical=lexical, lexical_candidates=lexical_candidates, rrf_k=rrf_k,
                            continuation=continuation)
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
            cand, s_dense = add_lexical_candidates(self, q_perp, terms, ptr, cand, d.lexical_candidates)
        s_terms, s_ptr = terms, ptr  # what the lexical side scores; the evidence shown stays Q'
        if d.lexical == "bm25" and d.lexical_evidence == "all":
            s_terms, s_ptr = self.evidence_tokens(texts, exclude=self.lexical.stopword_flags)
        if lexical_stage is not None:
            s_lex = lexical_stage(cand, s_terms, s_ptr)
        else:
            s_lex = self.lexical_scores(cand, s_terms, s_ptr, side=d.lexical)
        result, _ = continued_result(self, cand, s_dense, s_lex, k, d, vectors)
        if explain:
            result.evidence = hit_evidence(self.lexical.lexicon, self._ops, result.ids, terms, ptr)
        return result

    def rebuild_scan(self, kind: str | None = None, **params: Any) -> Scan:
        """Replace the dense candidate scan (``exact``, ``int8``, ``ivf`` or ``auto``) in place, nothing re-encoded;
        ``params`` are scan parameters by name (``oversample``, ``rerank``, ``nlist``, ``nprobe``:
        :data:`skillsight_fast.engine.scan.SCAN_PARAMS`), kept with the ones given before; the config records
        the new choice."""
        scan = self.config.scan
        self.state.config = self.config.replace(scan=ScanConfig(kind or scan.kind, {**scan.params, **params}))
        self.state.scan = build_scan(self.config.scan.kind, self.dense.embeddings_perp, config=self.config,
                                     previous=self.scan)
        return self.state.scan

    def save(self, directory: str | Path, extra_files: dict[str, bytes] | None = None) -> Path:
        """Write the index atomically to ``directory`` (see :mod:`skillsight_fast.engine.io`).

        ``extra_files`` (file name -> bytes) are swapped in together with the index. A loaded
        index carries its stored bodies (``texts.jsonl``) over into the new folder.
        """
        from skillsight_fast.engine.io import read_bodies, save_index

        source = self.state.source_dir
        if self.state.bodies is None and source is not None:
            try:
                self.state.bodies = read_bodies(source)
            except (OSError, SkillsightError) as exc:
                logger.warning("not carrying texts.jsonl over from %s: %s", source, exc)
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
            the checksums and the rest on a thread (``state.verification``); ``"lazy"``: the same,
            the rest run only by ``index.state.verification.wait()`` (docs/GUARANTEES.md).
        encoder : Encoder, optional
            Document encoder, checked against the model recorded in the manifest.
        """
        from skillsight_fast.engine.io import load_index

        state, folder, texts_sha256 = load_index(Path(directory), mmap=mmap, verify=verify)
        state.source_dir = folder  # bodies (texts.jsonl) stay on disk; save() carries them over
        # read_bodies checks texts.jsonl against this digest: bodies of another version are refused
        state.texts_sha256 = texts_sha256
        index = cls(state)
        if encoder is not None:
            index.encoder = encoder  # checked against the manifest's model
        return index

    def warmup(self) -> None:
        """Compile every kernel on tiny arrays of the production dtypes (cached on disk)."""
        from skillsight_fast.kernels.warmup import warmup_kernels

        warmup_kernels(self.stats.dim)
