"""SkillIndex: build, search, save and load a SkillSight index."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.background import (
    BM25_B,
    BM25_K1,
    bm25_idf,
    estimate_background,
    idf_from_df,
    lec_weights,
    otsu_threshold,
    select_background_terms,
)
from skillsight_fast.config import LEXICAL_SIDES, IndexConfig
from skillsight_fast.errors import EmbeddingError, ModelMismatchError, QueryError, SkillsightError
from skillsight_fast.kernels import (
    fuse_topk,
    merge_candidates,
    project_out_background,
    score_bm25_candidates,
    score_lexical_all,
    score_lexical_candidates,
)
from skillsight_fast.lexicon import Lexicon
from skillsight_fast.limits import clean_text
from skillsight_fast.scan import Scan, build_scan
from skillsight_fast.skills import Skill
from skillsight_fast.types import Encoder

logger = logging.getLogger(__name__)


def _remove_background(vectors: np.ndarray, basis: np.ndarray, renormalize: bool) -> np.ndarray:
    """v − B Bᵀ v, or ``vectors`` themselves when there is nothing to remove.

    With SBC off (r = 0, no re-normalising) the projection is the identity: sharing the array
    spares a copy of the document matrix and a kernel launch per query batch. Nothing in the index
    writes into either array.
    """
    if basis.shape[0] == 0 and not renormalize:
        return vectors
    return project_out_background(vectors, basis, renormalize=renormalize)

#: Largest k a search accepts beyond the corpus size (results are padded up to k).
MAX_K = 10_000
#: Longest query text accepted (characters); the encoder sees only its first tokens anyway.
MAX_QUERY_CHARS = 100_000


@dataclass
class SkillMeta:
    """What the index keeps of each skill besides its vectors."""

    id: str
    name: str
    description: str
    path: str
    sha256: str

    @classmethod
    def of(cls, skill: Skill) -> "SkillMeta":
        return cls(skill.id, skill.name, skill.description, skill.path, skill.sha256)


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
        Lexical-side score of each hit (NaN on padding): LEC coverage in [0, 1], or BM25 (≥ 0)
        when ``IndexStats.lexical`` is ``bm25``.
    evidence : list of list of list of str
        For each query and hit, the query's evidence tokens that the skill contains.
    skill_ids : list of list of str or None
        The skills' string ids (None on padding).
    """

    ids: np.ndarray
    scores: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray
    evidence: list[list[list[str]]] = field(default_factory=list)
    skill_ids: list[list[str | None]] = field(default_factory=list)


@dataclass
class IndexStats:
    """Corpus statistics recorded at build time."""

    n_docs: int
    dim: int
    vocab_size: int
    otsu_tau: float
    n_generic: int
    n_background_terms: int
    effective_rank: int
    rank: int
    # adaptive calibration (skillsight_fast.adaptive); defaults keep older manifests loadable
    adaptive: bool = False
    generic_share: float | None = None
    doc_background_energy: float | None = None
    sbc_applied: bool = True
    lexical_weight: float | None = None
    # lexical side of the fusion ("lec" or "bm25"); indexes saved before it existed are LEC
    lexical: str = "lec"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class SkillIndex:
    """A SkillSight index over a skill library.

    The constructor takes arrays, not paths: use :meth:`build` (from skills and an encoder),
    :meth:`from_embeddings` (from precomputed document vectors) or :meth:`load`.

    Examples
    --------
    >>> from skillsight_fast import SkillIndex
    >>> index = SkillIndex.build(skills, encoder)                 # doctest: +SKIP
    >>> result = index.search(["merge two PDF files"], k=3)       # doctest: +SKIP
    >>> result.skill_ids[0]                                       # doctest: +SKIP
    ['pdf', 'pdf-merge', 'docx']
    """

    def __init__(
        self,
        *,
        skills: list[SkillMeta],
        embeddings: np.ndarray,
        embeddings_perp: np.ndarray,
        basis: np.ndarray,
        singular_values: np.ndarray,
        lexicon: Lexicon,
        idf: np.ndarray,
        weights: np.ndarray,
        generic: np.ndarray,
        config: IndexConfig,
        stats: IndexStats,
        model_id: str,
        model_checksum: str,
        encoder: Encoder | None = None,
        scan: Scan | None = None,
    ) -> None:
        self.skills = skills
        self.embeddings = embeddings
        self.embeddings_perp = embeddings_perp
        self.basis = basis
        self.singular_values = singular_values
        self.lexicon = lexicon
        self.idf = idf
        self.weights = weights
        self.generic = generic
        self.config = config
        self.stats = stats
        self.model_id = model_id
        self.model_checksum = model_checksum
        self._encoder = encoder
        #: The dense candidate stage (skillsight_fast.scan); exact float32 unless built otherwise.
        self.scan: Scan = scan if scan is not None else build_scan("exact", embeddings_perp)
        if self.scan.docs is not embeddings_perp:
            raise SkillsightError("the scan must be built over the index's background-removed matrix")
        #: Markdown body per skill when built from Skill objects (saved as texts.jsonl; not loaded).
        self.bodies: list[str] | None = None
        #: The folder this index was loaded from (None when built in memory).
        self.source_dir: Path | None = None
        #: sha256 of the texts.jsonl loaded with the index (bodies of another version are refused).
        self.texts_sha256: str | None = None
        #: Absolute folders the skills' SKILL.md files were read from (files are served only below them).
        self.roots: list[str] = []
        #: Per skill, the reasons the prompt-injection scan flagged it (skillsight_fast.injection); [] = clean.
        self.flags: list[list[str]] = [[] for _ in skills]
        self._encoder_lock = threading.Lock()  # many threads may search before the encoder is loaded
        self._bm25: tuple[np.ndarray, float] | None = None
        if stats.lexical not in LEXICAL_SIDES:
            raise SkillsightError(f"unknown lexical side {stats.lexical!r} (expected 'lec' or 'bm25')")
        if stats.lexical == "bm25" and not lexicon.has_tf:
            raise SkillsightError("the BM25 lexical side needs term frequencies and document lengths "
                                  "in the lexicon (Lexicon.build keeps them); rebuild the index")

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls, skills: Sequence[Skill], encoder: Encoder | None = None, config: IndexConfig | None = None
    ) -> "SkillIndex":
        """Encode ``skills`` and build the index.

        Parameters
        ----------
        skills : sequence of Skill
        encoder : Encoder, optional
            Defaults to ``load_encoder(config.model, int8=config.int8)``.
        config : IndexConfig, optional
        """
        config = config or IndexConfig()
        if encoder is None:
            from skillsight_fast.models import load_encoder

            encoder = load_encoder(config.model, int8=config.int8)
        embeddings = encoder.encode([s.text for s in skills])
        return cls.from_embeddings(
            skills, embeddings, config, model_id=encoder.model_id,
            model_checksum=encoder.checksum, encoder=encoder,
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
        previous_scan: Scan | None = None,
    ) -> "SkillIndex":
        """Build from precomputed document embeddings (float32 (N, d), unit rows).

        ``texts`` (the analysed text per skill) is needed when ``skills`` are SkillMeta;
        a prebuilt ``lexicon`` over the same documents may be passed to skip analysis.
        ``previous_scan`` (the scan of the index being updated) lets an IVF scan keep its trained
        cells (:data:`skillsight_fast.scan.IVF_RETRAIN_FACTOR`).
        """
        config = config or IndexConfig()
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != len(skills):
            raise EmbeddingError(f"embeddings {emb.shape} do not match {len(skills)} skills")
        if not np.isfinite(emb).all():
            bad = int((~np.isfinite(emb).all(axis=1)).sum())
            raise EmbeddingError(f"{bad} document embeddings contain NaN or infinity")
        metas = [s if isinstance(s, SkillMeta) else SkillMeta.of(s) for s in skills]
        if lexicon is None:
            if texts is None:
                if not all(isinstance(s, Skill) for s in skills):
                    raise SkillsightError("texts are needed to build the lexical index from SkillMeta")
                texts = [s.text for s in skills]  # type: ignore[union-attr]
            lexicon = Lexicon.build(texts, config.min_token_len, config.max_token_len)
        side = config.lexical_side  # a BM25 side without term frequencies is refused by __init__
        n = len(metas)
        df = lexicon.df()
        idf = idf_from_df(df, n)
        eligible = df >= 2
        tau = otsu_threshold(idf[eligible], df[eligible] if config.otsu_weighted else None)
        generic = eligible & (idf <= tau)
        terms = select_background_terms(df, idf, generic, config.background_tokens, config.seed)
        bg = estimate_background(
            emb, terms, lexicon.post_indptr, lexicon.post_docs,
            max_rank=config.max_rank, rank=config.rank,
        )
        basis, extra = bg.basis, {}
        if config.adaptive:
            from skillsight_fast.adaptive import calibrate

            cal = calibrate(emb, bg.basis, lexicon, generic, config)
            basis, extra = cal.basis, cal.stats
        perp = _remove_background(emb, basis, config.renormalize)
        weights = lec_weights(idf, df, n, config.beta)
        stats = IndexStats(
            n_docs=n, dim=int(emb.shape[1]), vocab_size=len(lexicon.vocab),
            otsu_tau=float(tau) if math.isfinite(tau) else float("inf"),
            n_generic=int(generic.sum()), n_background_terms=int(len(terms)),
            effective_rank=bg.effective_rank, rank=int(basis.shape[0]), **extra, lexical=side,
        )
        logger.info("index: %d skills, |T_g| = %d, r = %d", n, stats.n_generic, stats.rank)
        index = cls(
            skills=metas, embeddings=emb, embeddings_perp=perp, basis=basis,
            singular_values=bg.singular_values, lexicon=lexicon, idf=idf, weights=weights,
            generic=generic, config=config, stats=stats, model_id=model_id,
            model_checksum=model_checksum, encoder=encoder,
            scan=build_scan(config.scan, perp, config=config, previous=previous_scan),
        )
        if all(isinstance(s, Skill) for s in skills):
            from skillsight_fast.injection import scan_skill

            index.bodies = [s.body for s in skills]  # type: ignore[union-attr]
            index.flags = [scan_skill(s) for s in skills]  # type: ignore[arg-type]
        return index

    # ------------------------------------------------------------------ properties
    def __len__(self) -> int:
        return len(self.skills)

    @property
    def ids(self) -> list[str]:
        """The skills' string ids, in row order."""
        return [s.id for s in self.skills]

    @property
    def encoder(self) -> Encoder:
        """The query encoder, loaded on first use and checked against the index's model."""
        if self._encoder is None:
            with self._encoder_lock:
                if self._encoder is None:
                    from skillsight_fast.models import load_encoder
                    from skillsight_fast.models.registry import get_spec

                    # a registry name, else the path the index was built with (e.g. a static model)
                    name = self.model_id if get_spec(self.model_id) or not self.config.model else self.config.model
                    self._encoder = load_encoder(name, int8=self.config.int8)
        encoder = self._encoder
        self._check_encoder(encoder)
        return encoder

    @encoder.setter
    def encoder(self, encoder: Encoder) -> None:
        self._check_encoder(encoder)
        self._encoder = encoder

    def _check_encoder(self, encoder: Encoder) -> None:
        if self.model_checksum and encoder.checksum != self.model_checksum:
            raise ModelMismatchError(
                f"the index was built with model {self.model_id!r} (checksum "
                f"{self.model_checksum[:12]}), but the encoder is {encoder.model_id!r} "
                f"(checksum {encoder.checksum[:12]}); rebuild the index or use the same model"
            )
        if encoder.dim != self.stats.dim:
            raise ModelMismatchError(f"encoder dimension {encoder.dim} != index dimension {self.stats.dim}")

    # ------------------------------------------------------------------ search
    @property
    def lexical_weight(self) -> float:
        """Weight of the lexical term in the fusion: the adaptive one when recorded, else the config's."""
        w = self.stats.lexical_weight
        return self.config.lexical_weight if w is None else w

    @property
    def bm25_params(self) -> tuple[np.ndarray, float]:
        """(Lucene idf float32 (V,), mean document length) of the BM25 side, derived on first use."""
        if self._bm25 is None:
            lens = self.lexicon.doc_len
            avgdl = float(np.mean(lens)) if lens is not None and len(lens) else 1.0
            self._bm25 = (bm25_idf(self.lexicon.df(), len(self)), avgdl if avgdl > 0 else 1.0)
        return self._bm25

    def score_lexical(self, candidates: np.ndarray, q_terms: np.ndarray, q_ptr: np.ndarray) -> np.ndarray:
        """Lexical-side score (LEC or BM25, per ``stats.lexical``) of each candidate, float32 (n, K)."""
        lex = self.lexicon
        if self.stats.lexical == "bm25":
            idf, avgdl = self.bm25_params
            return score_bm25_candidates(candidates, q_terms, q_ptr, lex.doc_indptr, lex.doc_terms,
                                         lex.doc_tf, lex.doc_len, idf, k1=BM25_K1, b=BM25_B, avgdl=avgdl)
        return score_lexical_candidates(candidates, q_terms, q_ptr, lex.doc_indptr, lex.doc_terms,
                                        self.weights)

    @staticmethod
    def check_queries(queries: str | Sequence[str]) -> list[str]:
        """The queries as a list, validated (QueryError), lone surrogates replaced by U+FFFD."""
        if isinstance(queries, str):
            queries = [queries]
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

    def check_k(self, k: int) -> int:
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise QueryError(f"k must be an integer, got {k!r}")
        if k <= 0:
            raise QueryError(f"k must be at least 1, got {k}")
        if k > max(MAX_K, len(self)):
            raise QueryError(f"k = {k} is too large (at most {max(MAX_K, len(self))})")
        return int(k)

    def encode(self, queries: str | Sequence[str]) -> np.ndarray:
        """Validate and encode queries, float32 (n, d)."""
        texts = self.check_queries(queries)
        return self.encoder.encode(texts) if texts else np.zeros((0, self.stats.dim), np.float32)

    def search(self, queries: str | Sequence[str], k: int = 10) -> SearchResult:
        """Top-k skills for each query.

        Parameters
        ----------
        queries : str or sequence of str
            Task descriptions; one string still gives 2-D results.
        k : int
            Hits per query (padded with -1 / -inf when the library is smaller).

        Raises
        ------
        QueryError
            Empty or over-long query, k < 1 or absurdly large.
        """
        texts = self.check_queries(queries)
        k = self.check_k(k)
        vectors = self.encoder.encode(texts) if texts else np.zeros((0, self.stats.dim), np.float32)
        return self.search_vectors(vectors, texts, k)

    def search_vectors(self, vectors: np.ndarray, texts: Sequence[str], k: int = 10,
                       *, explain: bool = True) -> SearchResult:
        """Search with already encoded queries (``texts`` give the lexical evidence).

        Parameters
        ----------
        vectors : float32 (n, d)
        texts : sequence of str, length n
        k : int
        explain : bool
            Also collect the matched evidence tokens per hit (skip for raw speed).
        """
        k = self.check_k(k)
        q = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
        if q.shape[0] != len(texts) or q.shape[1] != self.stats.dim:
            raise QueryError(f"query vectors {q.shape} do not match {len(texts)} texts of dim {self.stats.dim}")
        if not np.isfinite(q).all():
            raise QueryError("query embedding contains NaN or infinity")
        cfg = self.config
        n_docs = len(self)
        q_perp = _remove_background(q, self.basis, cfg.renormalize)
        kc = min(n_docs, max(cfg.candidates, k))
        q_terms, q_ptr = self.lexicon.query_terms(texts, self.generic, cfg.min_token_len, cfg.max_token_len)
        if n_docs == 0:
            cand = np.full((len(texts), 1), -1, np.int64)
            s_dense = np.full(cand.shape, -np.inf, np.float32)
        else:
            cand, s_dense = self.scan.candidates(q_perp, kc)
        if cfg.lexical_candidates and n_docs:  # admitted by LEC coverage, whichever side is fused
            lex_all = score_lexical_all(q_terms, q_ptr, self.lexicon.post_indptr,
                                        self.lexicon.post_docs, self.weights, n_docs)
            kl = min(n_docs, cfg.lexical_candidates)
            lex_top = np.argsort(-lex_all, axis=1, kind="stable")[:, :kl]
            lex_top = np.where(np.take_along_axis(lex_all, lex_top, 1) > 0, lex_top, -1)
            cand = merge_candidates(cand, lex_top)
            valid = cand >= 0
            s_dense = np.full(cand.shape, -np.inf, np.float32)
            rows = np.nonzero(valid)
            s_dense[rows] = np.einsum("ij,ij->i", q_perp[rows[0]], self.embeddings_perp[cand[rows]])
        s_lex = self.score_lexical(cand, q_terms, q_ptr)
        ids, scores, pos = fuse_topk(cand, s_dense, s_lex, k, mode=cfg.fusion,
                                     weight=self.lexical_weight,
                                     rrf_k=cfg.rrf_k)
        rows = np.arange(len(texts))[:, None]
        safe = np.maximum(pos, 0)
        dense = np.where(pos >= 0, s_dense[rows, safe], np.nan).astype(np.float32)
        lexical = np.where(pos >= 0, s_lex[rows, safe], np.nan).astype(np.float32)
        result = SearchResult(ids=ids, scores=scores, dense=dense, lexical=lexical)
        result.skill_ids = [[self.skills[j].id if j >= 0 else None for j in row] for row in ids.tolist()]
        if explain:
            result.evidence = self._evidence(ids, q_terms, q_ptr)
        return result

    def _evidence(self, ids: np.ndarray, q_terms: np.ndarray, q_ptr: np.ndarray) -> list[list[list[str]]]:
        vocab = self.lexicon.vocab
        out: list[list[list[str]]] = []
        for i in range(ids.shape[0]):
            qt = q_terms[q_ptr[i] : q_ptr[i + 1]]
            row: list[list[str]] = []
            for j in ids[i]:
                if j < 0 or qt.size == 0:
                    row.append([])
                    continue
                terms = self.lexicon.doc_term_ids(int(j))
                hit = np.isin(qt, terms, assume_unique=True)
                row.append([vocab[t] for t in qt[hit]])
            out.append(row)
        return out

    def rebuild_scan(self, kind: str | None = None, **params: Any) -> Scan:
        """Replace the dense candidate scan (``exact``, ``int8``, ``ivf`` or ``auto``) in place.

        ``params`` are the scan fields of :class:`IndexConfig` (``int8_oversample``, ``ivf_nlist``,
        ``ivf_nprobe``); the config records the new choice. Nothing is re-encoded.
        """
        self.config = self.config.replace(scan=kind or self.config.scan, **params)
        self.scan = build_scan(self.config.scan, self.embeddings_perp, config=self.config,
                               previous=self.scan)
        return self.scan

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path, extra_files: dict[str, bytes] | None = None) -> Path:
        """Write the index atomically to ``directory`` (see :mod:`skillsight_fast.io`).

        ``extra_files`` (file name -> bytes) are swapped in together with the index.
        """
        from skillsight_fast.io import save_index

        return save_index(self, Path(directory), extra_files)

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = False, verify: bool = True,
             encoder: Encoder | None = None) -> "SkillIndex":
        """Load an index folder written by :meth:`save`.

        Parameters
        ----------
        directory : path
        mmap : bool
            Memory-map the large arrays read-only instead of reading them.
        verify : bool
            Check every array's sha256 against the manifest.
        encoder : Encoder, optional
            Query encoder; checked against the model recorded in the manifest.
        """
        from skillsight_fast.io import load_index

        index = load_index(Path(directory), mmap=mmap, verify=verify)
        if encoder is not None:
            index.encoder = encoder
        return index

    def warmup(self) -> None:
        """Compile every kernel on tiny arrays of the production dtypes (cached on disk)."""
        from skillsight_fast.kernels.warmup import warmup_kernels

        warmup_kernels(self.stats.dim)
