"""Label-free build decisions of the default index (IndexConfig.adaptive, docs/ADAPTIVE.md).

The paper's method removes the whole background subspace from every corpus and adds the
standardised LEC score with weight 1. Measured on four corpora with MiniLM (docs/RESULTS.md),
that helps skill libraries whose documents share long boilerplate, and hurts corpora where the
"background" is not boilerplate. Two rules decide from unlabelled corpus statistics only:

Rule 1 (background removal on or off). With g the mean share of a document's distinct tokens that
are generic (in T_g), and e_D the mean background energy ‖Bᵀd‖² of the documents:

    SBC is applied  iff  g ≥ 0.5  and  e_D ≤ 0.5.

g < 0.5: most of a typical document's vocabulary is specific, so the generic tokens are ordinary
function words of short texts, not shared boilerplate (tool one-liners); the directions they induce
carry topic, and removing them removes signal. e_D > 0.5: the background holds most of each
document's energy (documents that are instances of one template, e.g. JSON records of one schema);
what is left after projection is small and noisy, so raw cosine ranks better. Both thresholds are
the midpoints of their [0, 1] ranges, not tuned.

Rule 2 (lexical weight). The Eq. 15 lexical term is scaled by 0.25 (``LEXICAL_SCALE``): on both fit
datasets the paper's weight 1 over-rides a strong dense ranking, 0.25 was best of {0.25, 0.5, 1}.
This is a re-fitted constant, not a statistic-driven rule.

Rule 3 (lexical side, ``config.ADAPTIVE_LEXICAL``). The lexical score fused by Eq. 15 is BM25 with
term frequencies (Lucene idf, k1 = 1.2, b = 0.75, the standard constants) over the same evidence
tokens Q' as LEC, instead of LEC's binary weighted coverage: documents whose decisive tokens repeat
(API records, long skill bodies) are then told apart from ones that mention a token once. It was
chosen on the two fit datasets from a pre-declared grid (docs/ADAPTIVE.md); it is a fixed choice, not
a corpus statistic. The index stores per-document term frequencies and lengths for it
(``Lexicon.doc_tf`` / ``doc_len``).

Everything is computed once at build time and recorded in the index
as a :class:`~skillsight_fast.engine.state.Decisions` record (what Rule 1 read goes into IndexStats); the
stored basis has r = 0 rows when SBC is off.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.state import Decisions

#: Rule 1: SBC needs at least this share of generic tokens in a typical document ...
GENERIC_SHARE_MIN = 0.5
#: ... and at most this mean background energy of the documents.
BACKGROUND_ENERGY_MAX = 0.5
#: Rule 2: multiplier of the Eq. 15 lexical weight.
LEXICAL_SCALE = 0.25


def generic_share(lexicon: Lexicon, generic: np.ndarray) -> float:
    """Mean over documents of |distinct generic tokens| / |distinct tokens| (empty documents skipped)."""
    lengths = np.diff(lexicon.doc_indptr)
    if lexicon.doc_terms.size == 0 or not lengths.any():
        return 0.0
    flags = np.asarray(generic, bool)[lexicon.doc_terms].astype(np.float64)
    rows = np.repeat(np.arange(lengths.size), lengths)
    per_doc = np.bincount(rows, weights=flags, minlength=lengths.size)
    keep = lengths > 0
    return float((per_doc[keep] / lengths[keep]).mean())


def background_energy(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """e_B(v) = ‖B v‖² per row, float64 (n,) (basis rows orthonormal)."""
    if basis.size == 0 or vectors.size == 0:
        return np.zeros(vectors.shape[0])
    c = vectors.astype(np.float64) @ basis.astype(np.float64).T
    return (c * c).sum(1)


def decide(embeddings: np.ndarray, basis: np.ndarray, lexicon: Lexicon, generic: np.ndarray,
           config: IndexConfig) -> tuple[Decisions, np.ndarray, dict[str, Any]]:
    """Apply the rules to one corpus.

    Parameters
    ----------
    embeddings : float32 (N, d)
        Document embeddings (unit rows).
    basis : float32 (r, d)
        The paper's background basis.
    lexicon : Lexicon
    generic : bool (V,)
        T_g flags.
    config : IndexConfig

    Returns
    -------
    decisions : Decisions
        Background removal on or off (Rule 1), the lexical side (Rule 3) and weight (Rule 2), and
        the config's query-time defaults.
    basis : float32 (r, d)
        The basis to use: the same, or (0, d) when background removal is off.
    statistics : dict
        What Rule 1 read (``generic_share``, ``doc_background_energy``), for IndexStats.
    """
    g = generic_share(lexicon, generic)
    e_d = float(background_energy(embeddings, basis).mean()) if len(embeddings) else 0.0
    return decide_from_statistics(g, e_d, basis, config)


def decide_from_statistics(g: float, e_d: float, basis: np.ndarray, config: IndexConfig
                           ) -> tuple[Decisions, np.ndarray, dict[str, Any]]:
    """:func:`decide` from the two statistics Rule 1 reads, however they were computed.

    A build that sums its statistics over shards (:mod:`skillsight_fast.indexing`) has g and e_D
    without the whole embedding matrix in memory, and finishes here.

    Parameters
    ----------
    g : float
        Mean generic-token share of the documents (:func:`generic_share`).
    e_d : float
        Mean background energy ‖B d‖² of the documents (:func:`background_energy`).
    basis : float32 (r, d)
    config : IndexConfig
    """
    sbc = bool(g >= GENERIC_SHARE_MIN and e_d <= BACKGROUND_ENERGY_MAX and basis.shape[0] > 0)
    weight = config.scoring.lexical_weight * (LEXICAL_SCALE if config.scoring.fusion == "eq15" else 1.0)
    out_basis = basis if sbc else np.zeros((0, basis.shape[1]), np.float32)
    decisions = Decisions.of_config(config, background=sbc, lexical_weight=float(weight), rule="adaptive")
    return decisions, out_basis, {"generic_share": round(g, 6), "doc_background_energy": round(e_d, 6)}
