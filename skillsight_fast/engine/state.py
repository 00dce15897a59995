"""What an index is made of: small frozen bundles, each owning its arrays' names, dtypes and shapes.

* :class:`DenseState`: the document embeddings, their background-removed copy, the background
  basis and its singular values.
* :class:`LexicalState`: the lexicon (vocabulary, forward and inverted CSR, term frequencies) and
  the per-term statistics derived from it (IDF, LEC weights, the generic-token mask T_g).
* :class:`Decisions`: what the build decided (background removal on or off, lexical side and
  weight) and the index's defaults for the query-time knobs; a search reads only these.
* :class:`IndexStats`: corpus statistics, for information (``skillsight info``).
* :class:`IndexState`: all of the above plus the skills' metadata and the model; what
  :mod:`skillsight_fast.engine.io` writes and reads, and what :class:`~skillsight_fast.engine.index.SkillIndex`
  wraps. Adding an array means adding one :class:`ArraySpec` to the bundle that owns it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from skillsight_fast import kernels
from skillsight_fast.config import (
    CONTINUATIONS,
    DOCUMENT_VECTORS,
    FUSIONS,
    LEXICAL_EVIDENCE,
    LEXICAL_SIDES,
    IndexConfig,
    default_continuation,
)
from skillsight_fast.engine.background import bm25_idf, idf_from_df, lec_weights, otsu_threshold
from skillsight_fast.engine.cascade import Cascade
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.scan import Scan, build_scan
from skillsight_fast.errors import IndexFormatError, QueryError, SkillsightError


@dataclass(frozen=True)
class ArraySpec:
    """dtype and number of dimensions of one stored array; ``optional`` arrays may be absent."""

    dtype: str
    ndim: int
    optional: bool = False


@dataclass(frozen=True)
class SkillMeta:
    """What the index keeps of each skill besides its vectors.

    ``tags`` (what ``find_skills(tags=...)`` filters on) and ``when_to_use`` (part of a host's
    skill listing, which ``doctor`` measures) are stored only when the skill has them.
    """

    id: str
    name: str
    description: str
    path: str
    sha256: str
    tags: tuple[str, ...] = ()
    when_to_use: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.tags, tuple):
            object.__setattr__(self, "tags", tuple(self.tags))

    @classmethod
    def of(cls, skill: Any) -> SkillMeta:
        """From a :class:`~skillsight_fast.library.skills.Skill`."""
        return cls(skill.id, skill.name, skill.description, skill.path, skill.sha256,
                   tuple(getattr(skill, "tags", ())), getattr(skill, "when_to_use", ""))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dataclasses.asdict(self)
        if not self.tags:
            del out["tags"]
        else:
            out["tags"] = list(self.tags)
        if not self.when_to_use:
            del out["when_to_use"]
        return out


def remove_background(vectors: np.ndarray, basis: np.ndarray, renormalize: bool,
                      project: Callable[..., np.ndarray] | None = None) -> np.ndarray:
    """v − B Bᵀ v, float32 (n, d); ``vectors`` themselves when there is nothing to remove.

    With SBC off (r = 0, no re-normalising) the projection is the identity: sharing the array
    spares a copy of the document matrix and a kernel launch per query batch. Nothing in the
    index writes into either array. ``project`` replaces the kernel
    (:func:`skillsight_fast.kernels.twins.project_out_background` for the NumPy engine).
    """
    if basis.shape[0] == 0 and not renormalize:
        return vectors
    return (project or kernels.project_out_background)(vectors, basis, renormalize=renormalize)


def scored_rows(embeddings: np.ndarray, basis: np.ndarray, renormalize: bool,
                namedesc: np.ndarray | None = None) -> np.ndarray:
    """The matrix the dense stage scores: e⊥, or (e⊥ + e_nd⊥) / 2 with the name + description
    vectors. Row by row, so any slice of rows gives the same bytes as the whole (a shard writer's)."""
    perp = remove_background(embeddings, basis, renormalize)
    if namedesc is not None:
        perp = (0.5 * (perp + remove_background(namedesc, basis, renormalize))).astype(np.float32)
    return perp


@dataclass(frozen=True)
class DenseState:
    """The dense side of an index.

    Attributes
    ----------
    embeddings : float32 (N, d)
        Raw document embeddings (unit rows).
    embeddings_perp : float32 (N, d)
        Documents with the background removed (the same array as ``embeddings`` when r = 0).
    basis : float32 (r, d)
        Orthonormal background basis B (r = 0 rows when background removal is off).
    singular_values : float32 (m,)
        Singular values of the token-direction matrix (for the effective rank and the plots).
    query_map : float32 (d_s + 1, d), optional
        The static-mapped tier's map from static task vectors into this space (last row the bias;
        :func:`skillsight_fast.models.static.fit_query_map`); None for the other tiers.
    query_table_ids, query_table : int32 (m,), float32 (m, d), optional
        The contextual tier's token table (:func:`skillsight_fast.models.contextual.contextual_table`):
        the token ids seen in the library's texts, ascending, and their mean token states.
    namedesc : float32 (N, d), optional
        Raw embeddings of each skill's ``name + "\n" + description`` (unit rows), when the index
        scores the ``text+namedesc`` document vector; ``embeddings_perp`` is then
        (e⊥ + e_nd⊥) / 2, so q⊥ᵀ d⊥ is the mean of the two background-removed cosines.
    """

    embeddings: np.ndarray
    embeddings_perp: np.ndarray
    basis: np.ndarray
    singular_values: np.ndarray
    query_map: np.ndarray | None = None
    namedesc: np.ndarray | None = None
    query_table_ids: np.ndarray | None = None
    query_table: np.ndarray | None = None

    ARRAYS: ClassVar[dict[str, ArraySpec]] = {
        "embeddings": ArraySpec("float32", 2),
        "embeddings_perp": ArraySpec("float32", 2),
        "basis": ArraySpec("float32", 2),
        "singular_values": ArraySpec("float32", 1),
        "query_map": ArraySpec("float32", 2, optional=True),
        "namedesc": ArraySpec("float32", 2, optional=True),
        "query_table_ids": ArraySpec("int32", 1, optional=True),
        "query_table": ArraySpec("float32", 2, optional=True),
    }

    @classmethod
    def build(cls, embeddings: np.ndarray, basis: np.ndarray, singular_values: np.ndarray, *,
              renormalize: bool = False, query_map: np.ndarray | None = None,
              namedesc: np.ndarray | None = None,
              query_table: tuple[np.ndarray, np.ndarray] | None = None) -> DenseState:
        """Project the background ``basis`` out of ``embeddings`` (shared when r = 0).

        With ``namedesc`` (float32 (N, d)), the scored matrix is the mean of the two
        background-removed matrices, (e⊥ + e_nd⊥) / 2.
        """
        basis = np.ascontiguousarray(basis, dtype=np.float32)
        qmap = None if query_map is None else np.ascontiguousarray(query_map, dtype=np.float32)
        if namedesc is not None:
            namedesc = np.ascontiguousarray(namedesc, dtype=np.float32)
        perp = scored_rows(embeddings, basis, renormalize, namedesc)
        ids, table = (None, None) if query_table is None else (
            np.ascontiguousarray(query_table[0], dtype=np.int32), np.ascontiguousarray(query_table[1], dtype=np.float32))
        return cls(embeddings, perp, basis, np.ascontiguousarray(singular_values, dtype=np.float32), qmap,
                   namedesc, ids, table)

    @property
    def document_vector(self) -> str:
        """``text+namedesc`` when the name + description vectors are part of the scored matrix."""
        return "text" if self.namedesc is None else "text+namedesc"

    @property
    def n_docs(self) -> int:
        return int(self.embeddings.shape[0])

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def arrays(self) -> dict[str, np.ndarray]:
        """name → array, as saved (the query map only when the index has one)."""
        return {name: getattr(self, name) for name in self.ARRAYS if getattr(self, name) is not None}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], n_docs: int, dim: int) -> DenseState:
        """Inverse of :meth:`arrays`, with the shapes checked (IndexFormatError)."""
        state = cls(**{name: arrays.get(name) for name in cls.ARRAYS})
        qmap = state.query_map
        for name, ok in (("embeddings", state.embeddings.shape == (n_docs, dim)),
                         ("namedesc", state.namedesc is None or state.namedesc.shape == (n_docs, dim)),
                         ("embeddings_perp", state.embeddings_perp.shape == (n_docs, dim)),
                         ("basis", state.basis.shape[1:] == (dim,)),
                         ("query_map", qmap is None or (qmap.shape[0] >= 2 and qmap.shape[1] == dim
                                                        and bool(np.isfinite(qmap).all()))),
                         ("query_table", _table_ok(state.query_table_ids, state.query_table, dim))):
            if not ok:
                raise IndexFormatError(f"array {name} {getattr(state, name).shape} does not match "
                                       f"{n_docs} skills of dimension {dim}")
        return state


def _table_ok(ids: np.ndarray | None, table: np.ndarray | None, dim: int) -> bool:
    """Both or neither; ids ascending and non-negative, one finite row of dimension ``dim`` each."""
    if ids is None or table is None:
        return ids is None and table is None
    return (table.shape == (ids.shape[0], dim) and bool(np.isfinite(table).all())
            and (ids.size == 0 or (int(ids[0]) >= 0 and bool((np.diff(ids) > 0).all()))))


@dataclass(frozen=True)
class LexicalState:
    """The lexical side of an index.

    Attributes
    ----------
    lexicon : Lexicon
        Vocabulary, document→terms and term→documents CSR, term frequencies and lengths.
    idf : float32 (V,)
        idf(t) = ln((N + 1)/(df + 1)) + 1.
    weights : float32 (V,)
        LEC weights w(t) = idf(t)·(1 − df/N)^β.
    generic : bool (V,)
        The generic tokens T_g (df ≥ 2 and idf ≤ Otsu's threshold), never evidence.
    """

    lexicon: Lexicon
    idf: np.ndarray
    weights: np.ndarray
    generic: np.ndarray

    ARRAYS: ClassVar[dict[str, ArraySpec]] = {
        "idf": ArraySpec("float32", 1),
        "weights": ArraySpec("float32", 1),
        "generic": ArraySpec("bool", 1),
        "doc_indptr": ArraySpec("int64", 1),
        "doc_terms": ArraySpec("int32", 1),
        "post_indptr": ArraySpec("int64", 1),
        "post_docs": ArraySpec("int32", 1),
        "doc_tf": ArraySpec("uint16", 1, optional=True),
        "doc_len": ArraySpec("int32", 1, optional=True),
    }
    _LEXICON_ARRAYS: ClassVar[tuple[str, ...]] = (
        "doc_indptr", "doc_terms", "post_indptr", "post_docs", "doc_tf", "doc_len")

    @classmethod
    def build(cls, lexicon: Lexicon, *, beta: float = 1.0, otsu_weighted: bool = False
              ) -> tuple[LexicalState, float]:
        """Per-term statistics of ``lexicon``; returns the state and Otsu's threshold τ."""
        n = lexicon.n_docs
        df = lexicon.df()
        idf = idf_from_df(df, n)
        eligible = df >= 2
        tau = otsu_threshold(idf[eligible], df[eligible] if otsu_weighted else None)
        generic = eligible & (idf <= tau)
        return cls(lexicon, idf, lec_weights(idf, df, n, beta), generic), tau

    @cached_property
    def generic_flags(self) -> bytes:
        """``generic`` as one byte per token (what :meth:`Lexicon.query_terms` reads per query token;
        indexing bytes is several times cheaper than indexing a NumPy array from Python)."""
        return np.ascontiguousarray(self.generic, dtype=bool).tobytes()

    @cached_property
    def stopword(self) -> np.ndarray:
        """bool (V,): the vocabulary's English function words (:data:`~skillsight_fast.engine.lexicon.STOPWORDS`)."""
        from skillsight_fast.engine.lexicon import stopword_mask

        return stopword_mask(self.lexicon.vocab, self.lexicon.term_ids)

    @cached_property
    def stopword_flags(self) -> bytes:
        """``stopword`` as one byte per token (the mask of ``lexical_evidence="all"``)."""
        return np.ascontiguousarray(self.stopword, dtype=bool).tobytes()

    @cached_property
    def evidence_flags(self) -> bytes:
        """One byte per token, set for the tokens that are never evidence: the generic tokens T_g and
        the stop-words, whatever the size of the library (a 14-tool library has no T_g to speak of)."""
        return np.ascontiguousarray(self.generic | self.stopword, dtype=bool).tobytes()

    @cached_property
    def bm25(self) -> tuple[np.ndarray, float]:
        """(Lucene idf float32 (V,), mean document length) of the BM25 side, derived on first use."""
        lens = self.lexicon.doc_len
        avgdl = float(np.mean(lens)) if lens is not None and len(lens) else 1.0
        return bm25_idf(self.lexicon.df(), self.lexicon.n_docs), avgdl if avgdl > 0 else 1.0

    def arrays(self) -> dict[str, np.ndarray]:
        """name → array, as saved (the term frequencies only when the lexicon has them)."""
        lex = self.lexicon
        out = {"idf": self.idf, "weights": self.weights, "generic": self.generic}
        for name in self._LEXICON_ARRAYS:
            value = getattr(lex, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], vocab: list[str], n_docs: int) -> LexicalState:
        """Inverse of :meth:`arrays`, with the shapes checked (IndexFormatError)."""
        if ("doc_tf" in arrays) != ("doc_len" in arrays):
            raise IndexFormatError("doc_tf and doc_len must be stored together")
        v = len(vocab)
        checks = [
            ("doc_indptr", arrays["doc_indptr"].shape == (n_docs + 1,)),
            ("post_indptr", arrays["post_indptr"].shape == (v + 1,)),
            ("idf", arrays["idf"].shape == (v,)),
            ("weights", arrays["weights"].shape == (v,)),
            ("generic", arrays["generic"].shape == (v,)),
            ("doc_tf", "doc_tf" not in arrays or arrays["doc_tf"].shape == arrays["doc_terms"].shape),
            ("doc_len", "doc_len" not in arrays or arrays["doc_len"].shape == (n_docs,)),
        ]
        for name, ok in checks:
            if not ok:
                raise IndexFormatError(f"array {name} does not match {n_docs} skills / {v} terms")
        lexicon = Lexicon(vocab, *(arrays.get(name) for name in cls._LEXICON_ARRAYS))
        return cls(lexicon, arrays["idf"], arrays["weights"], arrays["generic"])


@dataclass(frozen=True)
class Decisions:
    """What the build decided, and the defaults of the query-time knobs.

    A search reads these and nothing else of the configuration; each knob can be overridden per
    :meth:`~skillsight_fast.engine.index.SkillIndex.search` call.

    Attributes
    ----------
    background : bool
        Whether the background subspace is removed (SBC applied; the stored basis has r = 0 rows
        when not).
    lexical : str
        Lexical side fused with the dense score: ``lec`` or ``bm25``.
    lexical_weight : float
        Weight of the lexical term in the fusion.
    fusion : str
        Fusion mode (see :data:`skillsight_fast.config.FUSIONS`).
    candidates : int
        Dense candidate depth K.
    lexical_candidates : int
        Lexical top documents also admitted into the candidate set (0 = off).
    rrf_k : float
        Constant of reciprocal rank fusion.
    rule : str
        Who decided: ``adaptive`` (label-free rules, docs/ADAPTIVE.md) or ``config`` (as configured).
    lexical_evidence : str
        Which task tokens the BM25 side scores: ``masked`` (Q', generic tokens excluded; what an
        index saved without this field does) or ``all`` (every known token); LEC scores Q'.
    document_vector : str
        The dense side's document vector (:data:`~skillsight_fast.config.DOCUMENT_VECTORS`):
        ``text``, or ``text+namedesc`` (the mean of the text's and the name + description's
        cosines, docs/ADAPTIVE.md); fixed at build time (``DenseState.namedesc``), not a knob.
    continuation : str
        How the ranking continues past its first ``DEPTH_HEAD`` positions
        (:data:`~skillsight_fast.config.CONTINUATIONS`): ``fused`` (Eq. 15 to the end) or ``rrf`` (RRF of
        the candidates' dense and lexical ranks, :mod:`skillsight_fast.engine.depth`). Decisions saved
        without it get :func:`~skillsight_fast.config.default_continuation` of their lexical evidence.
    """

    background: bool
    lexical: str
    lexical_weight: float
    fusion: str = "eq15"
    candidates: int = 300
    lexical_candidates: int = 0
    rrf_k: float = 60.0
    rule: str = "config"
    document_vector: str = "text"
    lexical_evidence: str = "masked"
    continuation: str = "fused"

    def __post_init__(self) -> None:
        if self.continuation not in CONTINUATIONS:
            raise SkillsightError(f"unknown continuation {self.continuation!r} (expected one of {CONTINUATIONS})")
        if self.lexical not in LEXICAL_SIDES:
            raise SkillsightError(f"unknown lexical side {self.lexical!r} (expected one of {LEXICAL_SIDES})")
        if self.fusion not in FUSIONS:
            raise SkillsightError(f"unknown fusion {self.fusion!r} (expected one of {FUSIONS})")
        if self.candidates < 1 or self.lexical_candidates < 0:
            raise SkillsightError("candidates must be >= 1 and lexical_candidates >= 0")
        if not math.isfinite(self.lexical_weight) or not math.isfinite(self.rrf_k):
            raise SkillsightError("lexical_weight and rrf_k must be finite")
        if self.lexical_evidence not in LEXICAL_EVIDENCE:
            raise SkillsightError(f"unknown lexical evidence {self.lexical_evidence!r} (expected one of "
                                  f"{LEXICAL_EVIDENCE})")
        if self.document_vector not in DOCUMENT_VECTORS:
            raise SkillsightError(f"unknown document vector {self.document_vector!r} (expected one of "
                                  f"{DOCUMENT_VECTORS})")

    @classmethod
    def of_config(cls, config: IndexConfig, *, background: bool = True, lexical_weight: float | None = None,
                  rule: str = "config") -> Decisions:
        """The config's query-time defaults, with the build's decisions (the adaptive None fields decided)."""
        config = config.settled(can_fit=False)  # the tier does not matter to these fields
        return cls(background=background, lexical=config.scoring.lexical,
                   lexical_weight=config.scoring.lexical_weight if lexical_weight is None else lexical_weight,
                   fusion=config.scoring.fusion, candidates=config.scoring.candidates,
                   lexical_candidates=config.scoring.lexical_candidates, rrf_k=config.scoring.rrf_k, rule=rule,
                   document_vector=config.encoder.document_vector, lexical_evidence=config.scoring.lexical_evidence,
                   continuation=config.scoring.continuation)

    def replace(self, **changes: Any) -> Decisions:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decisions:
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            raise IndexFormatError(f"unknown decision fields: {sorted(set(data) - names) if isinstance(data, dict) else data!r}")
        if "continuation" not in data:  # saved before the continuation was recorded
            data = {**data, "continuation": default_continuation(data.get("lexical_evidence"))}
        return cls(**data)


@dataclass(frozen=True, kw_only=True)
class IndexStats:
    """Corpus statistics recorded at build time (information; a search does not read them)."""

    n_docs: int
    dim: int
    vocab_size: int
    otsu_tau: float
    n_generic: int
    n_background_terms: int
    effective_rank: int
    #: rows of the background basis in use (0 when background removal is off)
    rank: int
    #: mean share of a document's distinct tokens that are generic (adaptive Rule 1)
    generic_share: float | None = None
    #: mean background energy of the documents (adaptive Rule 1)
    doc_background_energy: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not math.isfinite(out["otsu_tau"]):
            out["otsu_tau"] = None  # JSON has no infinity: None = no threshold (one class)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IndexStats:
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            raise IndexFormatError("unknown or malformed stats in the manifest")
        data = dict(data)
        if data.get("otsu_tau") is None:
            data["otsu_tau"] = math.inf
        return cls(**data)


@dataclass(frozen=True)
class ModelInfo:
    """The document encoder an index was built with (queries must come from the same one)."""

    id: str = "unknown"
    checksum: str = ""
    #: The static query encoder of the static-mapped tier ("" = queries use the document encoder).
    query_id: str = ""
    query_checksum: str = ""


@dataclass
class IndexState:
    """Everything an index holds; what :mod:`skillsight_fast.engine.io` saves and loads.

    ``bodies`` (the skills' Markdown bodies, saved as ``texts.jsonl``) are kept when the index was
    built from :class:`~skillsight_fast.library.skills.Skill` objects; a loaded index leaves them on disk.
    ``scan`` is the dense candidate stage over ``dense.embeddings_perp`` (exact unless built
    otherwise, :mod:`skillsight_fast.engine.scan`); ``roots`` the absolute folders the SKILL.md files were
    read from (files are served only below them); ``flags`` per skill the reasons the
    prompt-injection scan flagged it (:mod:`skillsight_fast.library.screen`; [] = clean); ``pins`` the
    ids of the skills every answer of :func:`~skillsight_fast.agents.find.find_skills` starts with.
    """

    skills: list[SkillMeta]
    dense: DenseState
    lexical: LexicalState
    decisions: Decisions
    stats: IndexStats
    config: IndexConfig
    model: ModelInfo = field(default_factory=ModelInfo)
    bodies: list[str] | None = None
    scan: Scan | None = None
    roots: list[str] = field(default_factory=list)
    flags: list[list[str]] | None = None
    #: Ids of the skills every answer starts with (``find_skills``), in order.
    pins: list[str] = field(default_factory=list)
    #: The label-free abstention rule derived at build (:func:`skillsight_fast.engine.abstention.derive_abstention`;
    #: manifest key ``abstention``), or None (an index built without an encoder, or before the rule).
    abstention: dict[str, Any] | None = None
    #: A loaded format-3 index: the bodies as a string column on disk (skillsight_fast.engine.columns).
    stored_texts: Any = field(default=None, compare=False, repr=False)
    #: A load that deferred checks: their state (skillsight_fast.io.Verification), else None.
    verification: Any = field(default=None, compare=False, repr=False)
    #: The default lookup-first cascade of a search (:mod:`skillsight_fast.engine.cascade`; manifest key
    #: ``cascade``); no cascade unless the build or the caller gives one.
    cascade: Cascade = field(default_factory=Cascade)
    #: The folder a loaded index was read from (its bodies stay there; a save carries them over), else None.
    source_dir: Path | None = field(default=None, compare=False, repr=False)
    #: Why a loaded index answers every task with the transformer instead of its lookup (the static
    #: model it refers to is missing from this user's cache: skillsight_fast.engine.io_shared), else None.
    fallback: str | None = field(default=None, compare=False, repr=False)
    #: sha256 of the texts.jsonl loaded with the index (bodies of another version are refused).
    texts_sha256: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.skills)
        if self.config.encoder.query_encoder != "auto":  # an index saved before settled() decided them
            self.config = self.config.settled(can_fit=False)  # its adaptive None fields, as its search did
        if self.scan is None:
            self.scan = build_scan("exact", self.dense.embeddings_perp)
        if self.scan.docs is not self.dense.embeddings_perp:
            raise SkillsightError("the scan must be built over the index's background-removed matrix")
        if self.flags is None:
            self.flags = [[] for _ in range(n)]
        if len(self.flags) != n:
            raise SkillsightError(f"{n} skills but {len(self.flags)} injection-scan entries")
        if self.dense.n_docs != n or self.lexical.lexicon.n_docs != n:
            raise SkillsightError(f"{n} skills but {self.dense.n_docs} embeddings and "
                                  f"{self.lexical.lexicon.n_docs} lexicon rows")
        if self.decisions.lexical == "bm25" and not self.lexical.lexicon.has_tf:
            raise SkillsightError("the BM25 lexical side needs term frequencies and document lengths "
                                  "in the lexicon (Lexicon.build keeps them); rebuild the index")
        tier = self.config.encoder.query_encoder
        mapped = tier in ("static-mapped", "contextual", "fitted")
        if mapped != (self.dense.query_map is not None):
            raise SkillsightError(f"a {tier} index needs a query map, and only the mapped tiers have one"
                                  if mapped else f"the index has a query map but its query encoder is {tier!r}")
        if (tier in ("contextual", "fitted")) != (self.dense.query_table is not None):
            raise SkillsightError(f"a {tier} index needs its token table, and only it has one"
                                  if tier in ("contextual", "fitted") else
                                  f"the index has a contextual token table but its query encoder is {tier!r}")
        if not self.decisions.background and self.dense.basis.shape[0]:
            raise SkillsightError("background removal is off but the basis has rows")

    def arrays(self) -> dict[str, tuple[str, np.ndarray, ArraySpec]]:
        """name → (bundle, array, spec) of every stored array."""
        out: dict[str, tuple[str, np.ndarray, ArraySpec]] = {}
        for bundle, part in (("dense", self.dense), ("lexical", self.lexical)):
            for name, arr in part.arrays().items():
                out[name] = (bundle, arr, type(part).ARRAYS[name])
        return out


#: Every array the format knows, by bundle.
BUNDLES: dict[str, type[DenseState | LexicalState]] = {"dense": DenseState, "lexical": LexicalState}

def query_decisions(index: Any, **knobs: Any) -> Decisions:
    """``index``'s decisions with per-call knobs applied (None = the index's value).

    Raises
    ------
    QueryError
        An unknown knob or value, or a lexical side the index cannot score.
    """
    changes = {name: value for name, value in knobs.items() if value is not None}
    try:
        decisions = index.decisions.replace(**changes) if changes else index.decisions
    except TypeError as exc:
        raise QueryError(f"unknown search setting ({exc})") from None
    except SkillsightError as exc:
        raise QueryError(str(exc)) from None
    if decisions.lexical == "bm25" and not index.lexical.lexicon.has_tf:
        raise QueryError("this index stores no term frequencies, so it cannot score BM25: use lexical='lec'")
    return decisions
