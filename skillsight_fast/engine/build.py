"""Building a :class:`~skillsight_fast.engine.index.SkillIndex`: encode the skills (:func:`build_index`), or take
precomputed document vectors (:func:`index_from_embeddings`) and compute every array, decision and statistic
of the index from them. What a caller already has (a lexicon, a basis, decisions, a query map or table, the
previous scan) comes in one :class:`Prebuilt` value instead of one argument each.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from skillsight_fast.config import MAPPED_TIERS, TABLE_TIERS, IndexConfig
from skillsight_fast.engine.background import estimate_background, select_background_terms
from skillsight_fast.engine.cascade import DEFAULT_CASCADE, NO_CASCADE, Cascade
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.query_encoders import (
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
)
from skillsight_fast.errors import EmbeddingError, SkillsightError
from skillsight_fast.library.skills import Skill, namedesc_text
from skillsight_fast.types import Encoder

logger = logging.getLogger(__name__)

__all__ = ["Prebuilt", "build_index", "index_from_embeddings"]


@dataclass(frozen=True)
class Prebuilt:
    """What a build from embeddings takes ready instead of computing it (every field optional).

    Attributes
    ----------
    texts : sequence of str
        The analysed text per skill; needed when the skills are SkillMeta and no ``lexicon`` is given.
    lexicon : Lexicon
        A prebuilt lexicon over the same documents (skips analysis).
    basis : (float32 (r, d), float32 (m,))
        A background basis and its singular values to use instead of estimating one (the synthetic
        scale-ups keep the real corpus's basis).
    decisions : Decisions
        Keep these decisions instead of deciding from this corpus (with ``basis``: the basis in use).
    previous_scan : Scan
        The scan of the index being updated: an IVF scan keeps its trained cells
        (:data:`skillsight_fast.engine.scan.IVF_RETRAIN_FACTOR`).
    query_map : float32 (d_s + 1, d)
        ``static-mapped`` and ``contextual`` tiers: a ready map (default: fitted on the skills' texts).
    namedesc : float32 (N, d)
        Embeddings of each skill's ``name + "\\n" + description`` for the ``text+namedesc`` document
        vector. Default: encoded with the encoder when the config asks for them and the index decides for
        itself (``decisions`` not given); without them the index scores the ``text`` vector and says so
        in ``decisions.document_vector``.
    query_table : (int32 (m,), float32 (m, d))
        ``contextual`` / ``fitted`` tier: a ready token table (default: computed from the encoder's token
        states over the skills' texts, :func:`skillsight_fast.models.contextual.contextual_table`).
    fit_query_table : bool
        ``fitted`` tier: fit ``query_table`` to the transformer (:mod:`skillsight_fast.models.fitted`).
        Default: only a table computed here is fitted, a given one is kept as it is (what an update does).
    flags : sequence of (list of str or None)
        Per skill, the prompt-injection screen's findings where already known for its very text (an
        update's unchanged skills); a None entry, or no ``flags``, is screened here
        (:func:`skillsight_fast.library.screen.screen_skill`, ~2 ms a skill).
    """

    texts: Sequence[str] | None = None
    lexicon: Lexicon | None = None
    basis: tuple[np.ndarray, np.ndarray] | None = None
    decisions: Decisions | None = None
    previous_scan: Scan | None = None
    query_map: np.ndarray | None = None
    namedesc: np.ndarray | None = None
    query_table: tuple[np.ndarray, np.ndarray] | None = None
    fit_query_table: bool | None = None
    flags: Sequence[list[str] | None] | None = None

    @classmethod
    def of(cls, **ready: Any) -> Prebuilt:
        """A Prebuilt from keyword arguments named as its fields (a clear error for any other name)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(ready) - names)
        if unknown:
            raise TypeError(f"unknown build input(s) {', '.join(unknown)}; Prebuilt takes {', '.join(sorted(names))}")
        return cls(**ready)


def checked_embeddings(embeddings: Any, n: int) -> np.ndarray:
    """Document embeddings as C-contiguous float32 (n, d), refused unless finite and one row a skill."""
    emb = np.ascontiguousarray(embeddings, dtype=np.float32)
    if emb.ndim != 2 or emb.shape[0] != n:
        raise EmbeddingError(f"embeddings {emb.shape} do not match {n} skills")
    if not np.isfinite(emb).all():
        bad = int((~np.isfinite(emb).all(axis=1)).sum())
        raise EmbeddingError(f"{bad} document embeddings contain NaN or infinity")
    return emb

def build_index(cls: Any, skills: Sequence[Skill], encoder: Encoder | None = None,
                config: IndexConfig | None = None, cascade: Cascade | None = None) -> Any:
    """Encode ``skills`` and build the index (:meth:`SkillIndex.build <skillsight_fast.engine.index.SkillIndex.build>`)."""
    config = config or IndexConfig()
    auto = config.encoder.query_encoder == "auto"
    if auto:  # the cascade needs the transformer's token states
        if encoder is None:
            from skillsight_fast.models import load_encoder

            encoder = load_encoder(config.encoder.model, int8=config.encoder.int8)
        config = config.settled(can_fit=gives_token_states(encoder))
    config = resolve_query_encoder(config, encoder)
    if encoder is not None and config.encoder.query_encoder == "static" and encoder.checksum != load_static_query_encoder(config).checksum:
        encoder = None  # the static tier encodes the skills with the static model itself
    if encoder is None:
        from skillsight_fast.models import load_encoder

        encoder = load_encoder(config.encoder.model, int8=config.encoder.int8)
    query_table = None
    if config.encoder.query_encoder in TABLE_TIERS and getattr(encoder, "hidden_states", None) is not None:
        # the table tiers' token states come from the same pass as the skills' vectors
        from skillsight_fast.models.contextual import contextual_table, encode_with_token_sums

        embeddings, sums, counts = encode_with_token_sums(encoder, [s.text for s in skills])
        query_table = contextual_table(sums, counts)
    else:
        embeddings = encoder.encode([s.text for s in skills])
    return index_from_embeddings(
        cls, skills, embeddings, config, model_id=encoder.model_id, model_checksum=encoder.checksum,
        encoder=encoder, prebuilt=Prebuilt(query_table=query_table, fit_query_table=config.encoder.query_encoder == "fitted"),
        cascade=cascade if cascade is not None else
        DEFAULT_CASCADE if auto and config.encoder.query_encoder in MAPPED_TIERS else NO_CASCADE)


def index_from_embeddings(cls: Any, skills: Sequence[Skill] | Sequence[SkillMeta], embeddings: np.ndarray,
                          config: IndexConfig | None = None, *, model_id: str = "unknown", model_checksum: str = "",
                          encoder: Encoder | None = None, query_encoder: Encoder | None = None,
                          prebuilt: Prebuilt | None = None, derive: bool | None = None,
                          cascade: Cascade | None = None) -> Any:
    """Build from precomputed document embeddings (float32 (N, d), unit rows): :meth:`SkillIndex.from_embeddings
    <skillsight_fast.engine.index.SkillIndex.from_embeddings>` (``cls``), whose docstring has the arguments;
    ``cascade`` is the index's default cascade (None: the default one when ``auto`` settles into a lookup tier,
    else none)."""
    p = prebuilt or Prebuilt()
    texts, lexicon, basis, decisions = p.texts, p.lexicon, p.basis, p.decisions
    query_map, namedesc, query_table = p.query_map, p.namedesc, p.query_table
    # precomputed vectors: the cascade's table needs the transformer's token states, unless given
    given = config or IndexConfig()
    config = resolve_query_encoder(given.settled(can_fit=query_table is not None))
    # auto settled into a lookup tier: the default cascade (a query-time policy the index keeps)
    if cascade is None:
        cascade = DEFAULT_CASCADE if given.encoder.query_encoder == "auto" and config.encoder.query_encoder in MAPPED_TIERS else NO_CASCADE
    emb = checked_embeddings(embeddings, len(skills))
    metas = [s if isinstance(s, SkillMeta) else SkillMeta.of(s) for s in skills]
    namedesc = _namedesc_vectors(config, metas, emb, namedesc, encoder if decisions is None else None)
    if lexicon is None:
        if texts is None:
            if not all(isinstance(s, Skill) for s in skills):
                raise SkillsightError("texts are needed to build the lexical index from SkillMeta")
            texts = [s.text for s in skills]  # type: ignore[union-attr]
        lexicon = Lexicon.build(texts, config.analyzer.min_token_len, config.analyzer.max_token_len)
    query_info: tuple[str, str] = ("", "")
    if config.encoder.query_encoder in MAPPED_TIERS:
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
    fit_table = config.encoder.query_encoder == "fitted" and (query_table is None if p.fit_query_table is None
                                                       else p.fit_query_table)
    if config.encoder.query_encoder in TABLE_TIERS:
        if query_table is None:
            query_table = contextual_table_of(skills, texts, encoder, config.encoder.query_encoder)
    else:
        query_table = None
    lexical, tau = LexicalState.build(lexicon, beta=config.scoring.beta, otsu_weighted=config.background.otsu_weighted)
    if basis is None:
        terms = select_background_terms(lexicon.df(), lexical.idf, lexical.generic,
                                        config.background.tokens, config.seed)
        bg = estimate_background(emb, terms, lexicon.post_indptr, lexicon.post_docs,
                                 max_rank=config.background.max_rank, rank=config.background.rank)
        paper_basis, singular_values, r_eff, n_terms = bg.basis, bg.singular_values, bg.effective_rank, len(terms)
    else:
        paper_basis, singular_values = basis
        r_eff, n_terms = int(paper_basis.shape[0]), 0
    if decisions is None:
        decisions, used_basis, rule_stats = _decide(config, emb, paper_basis, lexical)
    else:
        used_basis, rule_stats = paper_basis, {}
    dense = DenseState.build(emb, used_basis, singular_values, renormalize=config.background.renormalize,
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
        known = p.flags
        if known is not None and len(known) != len(skills):
            raise SkillsightError(f"{len(skills)} skills but {len(known)} known screen results")
        flags = [list(known[i]) if known is not None and known[i] is not None  # type: ignore[arg-type]
                 else screen_skill(s) for i, s in enumerate(skills)]  # type: ignore[arg-type]
    scan = build_scan(config.scan.kind, dense.embeddings_perp, config=config, previous=p.previous_scan)
    state = IndexState(skills=metas, dense=dense, lexical=lexical, decisions=decisions, stats=stats,
                       config=config, model=ModelInfo(model_id, model_checksum, *query_info),
                       bodies=bodies, scan=scan, flags=flags, cascade=cascade)
    logger.info("index: %d skills, |T_g| = %d, r = %d", len(metas), stats.n_generic, stats.rank)
    index = cls(state, encoder, query_encoder if config.encoder.query_encoder in MAPPED_TIERS else None)
    if derive if derive is not None else (encoder is not None and bodies is not None):
        from skillsight_fast.engine.abstention import derive_abstention

        index.state.abstention = derive_abstention(index, index.state.bodies)
    return index


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

        teacher = load_encoder(config.encoder.model, int8=True, threads=getattr(inner, "threads", None),
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
    if config.encoder.document_vector != "text+namedesc":
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
