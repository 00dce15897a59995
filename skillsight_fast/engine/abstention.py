"""Abstention: a threshold below which a hit is dropped, calibrated on labelled queries.

A task that no skill fits should get no hit. Two signals can carry the threshold:

* ``score``: the fused score S = s⊥ + [s̃_lex]₊. Its lexical part is standardised over the
  candidate set, so it is relative: the best candidate of an off-topic task still gets a bonus.
* ``cosine``: the raw dense similarity qᵀd of the hit, an absolute measure of fit.

Neither has a fixed scale across corpora, so ``calibrate`` picks, per index, the largest threshold
that loses at most ``max_loss`` of the answerable queries (a dataset's labelled queries) and measures
how many off-topic queries (``skillsight_fast/data/offtopic_queries.txt`` and other datasets' queries) it rejects;
by default it keeps the signal that rejects more. The result is stored in ``calibration.json``
beside the index manifest and used by ``skillsight search`` and ``skillsight serve`` by default.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.engine.cascade import answering_vectors
from skillsight_fast.engine.io import write_index_file
from skillsight_fast.errors import SkillsightError

if TYPE_CHECKING:
    from skillsight_fast.library.queries import Task

CALIBRATION = "calibration.json"
#: Largest calibration.json read (bytes); a real one is a few KB.
MAX_CALIBRATION_BYTES = 1 << 20


SIGNALS = ("cosine", "score")


@dataclass(frozen=True)
class Abstention:
    """Return no hit for a task whose best hit has ``signal`` below ``threshold``.

    The decision is per task, not per hit: a task that passes keeps all its k hits in their order
    (dropping single hits would only remove correct skills ranked below a better-scoring wrong one).
    ``signal`` is ``cosine`` (the raw dense similarity qᵀd of the hit, an absolute measure of fit)
    or ``score`` (the fused SkillSight score, which is relative to the candidate set).
    """

    signal: str
    threshold: float

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise SkillsightError(f"abstention signal must be one of {SIGNALS}, got {self.signal!r}")

    def keep(self, score: float, cosine: float) -> bool:
        """Whether a task whose best hit has this fused score and cosine gets its hits."""
        value = cosine if self.signal == "cosine" else score
        return bool(value >= self.threshold)

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "threshold": self.threshold}

    @classmethod
    def of_rule(cls, rule: dict[str, Any] | None) -> Abstention | None:
        """The rule of a stored dict (the index's derived ``abstention``, or ``calibration.json``);
        None when there is none or its threshold is None (the two sides did not separate)."""
        if not isinstance(rule, dict) or rule.get("threshold") is None:
            return None
        return cls(str(rule.get("signal", "cosine")), float(rule["threshold"]))


def read_calibration(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The calibration stored with an index, or None."""
    path = Path(directory).expanduser() / CALIBRATION
    if not path.exists() and not path.is_symlink():
        return None
    from skillsight_fast.limits import load_json, read_regular_file

    hint = "delete it or run calibrate"
    try:  # bounded: a FIFO, a huge or a deeply nested file gives one line, not a hang or a traceback
        data = load_json(read_regular_file(path, MAX_CALIBRATION_BYTES, error=SkillsightError,
                                           what="calibration"), error=SkillsightError, what=str(path))
    except SkillsightError as exc:
        raise SkillsightError(f"{exc}; {hint}") from None
    threshold = data.get("threshold") if isinstance(data, dict) else None
    if (not isinstance(data, dict) or data.get("signal") not in SIGNALS
            or isinstance(threshold, bool) or not isinstance(threshold, (int, float))
            or not math.isfinite(threshold)):
        raise SkillsightError(f"{path}: no valid 'signal' and finite numeric 'threshold'; {hint}")
    return data


def calibration_bytes(data: dict[str, Any]) -> bytes:
    """The bytes of ``calibration.json`` (shared by ``write_calibration`` and ``update``'s swap)."""
    try:
        return json.dumps(data, indent=2, allow_nan=False).encode("utf-8")
    except ValueError:  # NaN or inf would make a file that no reader accepts
        raise SkillsightError("the calibration holds NaN or an infinite number; refusing to store it") from None


def write_calibration(directory: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    """Write ``calibration.json`` into an index folder atomically, under the index's save lock."""
    return write_index_file(Path(directory), CALIBRATION, calibration_bytes(data))


def parse_min_score(value: str) -> float:
    """argparse type of ``--min-score``/``--min-cosine``: a number, or ``none``/``off`` (-inf: no threshold)."""
    if value.strip().lower() in ("none", "off", "-inf"):
        return -math.inf
    try:
        out = float(value)
    except ValueError:
        raise ValueError(f"expected a number or 'none', got {value!r}") from None
    if math.isnan(out):
        raise ValueError("the threshold must not be NaN")
    return out


def resolve_abstention(directory: str | os.PathLike[str], min_score: float | None = None,
                       min_cosine: float | None = None) -> Abstention | None:
    """The abstention rule to apply.

    An explicit ``min_cosine`` or ``min_score`` wins (``-inf`` = no abstention); otherwise the
    index's ``calibration.json`` (written by ``calibrate`` from labelled tasks); otherwise the rule
    the index derived at build without labels (manifest key ``abstention``); otherwise None (keep
    every hit: an index built before the rule existed).
    """
    if min_cosine is not None:
        return None if min_cosine == -math.inf else Abstention("cosine", float(min_cosine))
    if min_score is not None:
        return None if min_score == -math.inf else Abstention("score", float(min_score))
    cal = read_calibration(directory) if str(directory) else None
    if cal is not None:
        return Abstention(cal["signal"], float(cal["threshold"]))
    if not str(directory):
        return None
    from skillsight_fast.engine.io import read_manifest

    try:
        manifest = read_manifest(Path(directory).expanduser())
    except (OSError, SkillsightError):
        return None  # no index there (yet): the caller's own load reports it
    return Abstention.of_rule(manifest.get("abstention"))


# ---------------------------------------------------------------------- measuring


@dataclass
class QueryScores:
    """Top-k hits of a batch of queries: both abstention signals and the gold flags."""

    scores: np.ndarray  # float32 (n, k) fused, -inf padded
    cosines: np.ndarray  # float32 (n, k) raw qᵀd, -inf padded
    gold_hit: np.ndarray  # bool (n, k): the hit is a gold skill of its query

    def signal(self, name: str) -> np.ndarray:
        return self.cosines if name == "cosine" else self.scores

    def best(self, name: str) -> np.ndarray:
        """Largest value of the signal among a query's hits, float64 (n,): no hit survives above it."""
        return self.signal(name).max(axis=1).astype(np.float64) if self.scores.size else np.zeros(0)


def score_queries(index: Any, queries: Sequence[Task], k: int = 10,
                  batch: int = 256) -> QueryScores:
    """Search ``queries`` (in batches) and keep the top-k signals and gold flags."""
    k = min(k, max(len(index), 1))
    scores = np.full((len(queries), k), -np.inf, np.float32)
    cosines = np.full((len(queries), k), -np.inf, np.float32)
    gold = np.zeros((len(queries), k), bool)
    for start in range(0, len(queries), batch):
        part = list(queries[start : start + batch])
        texts = [q.text for q in part]
        vectors = index.encode(texts)
        res = index.search_vectors(vectors, texts, k, explain=False)
        scores[start : start + len(part)] = res.scores
        cosines[start : start + len(part)] = np.nan_to_num(res.cosine, nan=-np.inf)
        for i, q in enumerate(part):
            gs = set(q.gold)
            gold[start + i] = [sid in gs for sid in res.skill_ids[i]]
    return QueryScores(scores, cosines, gold)


def tradeoff(answerable: QueryScores, offtopic: np.ndarray, threshold: float,
             signal: str = "score") -> dict[str, float]:
    """What a threshold on ``signal`` does.

    Parameters
    ----------
    answerable : QueryScores
    offtopic : float64 (m,)
        Best value of the signal per off-topic query (:meth:`QueryScores.best`).
    threshold : float
    signal : str

    Returns
    -------
    dict
        ``offtopic_rejected``: share of off-topic queries left with no hit;
        ``answerable_lost``: share of answerable queries left with no hit;
        ``hit_at_k``: share of answerable queries that keep their hits and have a gold skill among
        them (``hit_at_k_before``: without threshold).
    """
    best = answerable.best(signal)
    keep = (best >= threshold)[:, None]
    return {
        "threshold": float(threshold),
        "offtopic_rejected": float(np.mean(offtopic < threshold)) if offtopic.size else float("nan"),
        "answerable_lost": float(np.mean(best < threshold)) if best.size else float("nan"),
        "hit_at_k": float(np.mean((answerable.gold_hit & keep).any(axis=1))),
        "hit_at_k_before": float(np.mean(answerable.gold_hit.any(axis=1))),
    }


def pick_threshold(answerable_best: np.ndarray, max_loss: float) -> float:
    """Largest threshold that leaves at most ``max_loss`` of the answerable queries without a hit."""
    if not 0 <= max_loss < 1:
        raise SkillsightError(f"max_loss must be in [0, 1), got {max_loss}")
    s = np.sort(np.asarray(answerable_best, np.float64))
    s = s[np.isfinite(s)]
    if s.size == 0:
        raise SkillsightError("no answerable query got any hit; cannot calibrate")
    allowed = math.floor(max_loss * s.size + 1e-9)
    return float(s[min(allowed, s.size - 1)])


def refine_threshold(answerable_best: np.ndarray, offtopic_best: np.ndarray, max_loss: float) -> float:
    """The labelled threshold: the smallest one minimising (share of off-topic tasks kept) + (share of
    answerable tasks lost) (:func:`balanced_threshold` on the labelled tasks), raised no further than
    :func:`pick_threshold` allows (at most ``max_loss`` of the answerable tasks lost).

    Being the smallest minimiser, it loses an answerable task only for a strictly larger share of
    off-topic tasks rejected: on a small labelled file it never gives one away for no gain.
    """
    cap = pick_threshold(answerable_best, max_loss)
    t, _ = balanced_threshold(answerable_best, offtopic_best)
    if not math.isfinite(t):  # nothing separates: keep every answerable task
        s = np.asarray(answerable_best, np.float64)
        return float(s[np.isfinite(s)].min())
    return min(t, cap)


LOSSES = (0.0, 0.01, 0.02, 0.05, 0.10, 0.20, 0.30)


def calibrate(index: Any, answerable: Sequence[Task],
              offtopic: Sequence[Task] | dict[str, Sequence[Task]], *,
              max_loss: float = 0.05, k: int = 10, signal: str | None = None) -> dict[str, Any]:
    """Pick the abstention signal and threshold, and describe the trade-off.

    Parameters
    ----------
    index : SkillIndex
    answerable : sequence of Task
        Labelled queries whose gold skills are in the index.
    offtopic : sequence of Task, or dict of source name -> sequence of Task
        Tasks no skill of the index should answer (grouped: also reported per source).
    max_loss : float
        Largest share of answerable queries that may lose all their hits.
    k : int
        Depth of the hit@k columns.
    signal : str, optional
        ``cosine`` or ``score``; default: whichever rejects more off-topic queries at ``max_loss``.

    Returns
    -------
    dict
        ``signal``, ``threshold`` and the chosen trade-off, plus ``signals``: for each signal its
        threshold, trade-off and a ``table`` at other losses.
    """
    if not answerable:
        raise SkillsightError("calibration needs labelled (answerable) queries")
    if signal is not None and signal not in SIGNALS:
        raise SkillsightError(f"signal must be one of {SIGNALS}")
    t0 = time.perf_counter()
    groups = dict(offtopic) if isinstance(offtopic, dict) else {"offtopic": offtopic}
    if not any(groups.values()):  # nothing to measure the threshold against (it would store NaN)
        raise SkillsightError("calibration needs off-topic queries: the off-topic list is empty, or every "
                              "query in it has a gold skill in this index")
    ans = score_queries(index, answerable, k)
    off_scores = {name: score_queries(index, qs, k) for name, qs in groups.items() if qs}

    def row(sig: str, t: float) -> dict[str, Any]:
        off = np.concatenate([q.best(sig) for q in off_scores.values()]) if off_scores else np.zeros(0)
        out = tradeoff(ans, off, t, sig)
        out["offtopic_rejected_by_source"] = {name: float(np.mean(q.best(sig) < t))
                                              for name, q in off_scores.items()}
        return out

    per_signal = {}
    for sig in SIGNALS:
        t = refine_threshold(ans.best(sig), np.concatenate([q.best(sig) for q in off_scores.values()]), max_loss)
        per_signal[sig] = row(sig, t) | {
            "table": [row(sig, pick_threshold(ans.best(sig), loss)) | {"target_loss": loss} for loss in LOSSES],
            "answerable_median": float(np.median(ans.best(sig))),
            "offtopic_median": float(np.median(np.concatenate([q.best(sig) for q in off_scores.values()])))
            if off_scores else float("nan"),
        }
    chosen = signal or max(SIGNALS, key=lambda s: (np.nan_to_num(per_signal[s]["offtopic_rejected"]),
                                                   s == "cosine"))
    best = per_signal[chosen]
    return {
        "signal": chosen,
        **{key: best[key] for key in ("threshold", "offtopic_rejected", "answerable_lost", "hit_at_k",
                                      "hit_at_k_before", "offtopic_rejected_by_source")},
        "max_loss": max_loss,
        "k": k,
        "n_answerable": len(answerable),
        "n_offtopic": int(sum(len(qs) for qs in groups.values())),
        "n_offtopic_by_source": {name: len(qs) for name, qs in groups.items()},
        "index_n_skills": len(index),
        "signals": per_signal,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def sample(queries: list[Task], n: int | None, seed: int = 0) -> list[Task]:
    """At most ``n`` queries, a seeded random subset in file order (all when n is None)."""
    if n is None or len(queries) <= n:
        return queries
    keep = np.sort(np.random.default_rng(seed).choice(len(queries), size=n, replace=False))
    return [queries[i] for i in keep]


# ---------------------------------------------------------------------- label-free rule

#: Most skills whose own fields become pseudo-tasks when a rule is derived (a seeded sample beyond).
MAX_PSEUDO_SKILLS = 200
#: Most rows whose nearest-neighbour cosine the duplicate rule reads (a seeded sample beyond).
MAX_NEIGHBOUR_ROWS = 512
#: Most columns those rows are compared with (a seeded sample beyond; the rule reads a distribution).
MAX_NEIGHBOUR_COLUMNS = 50_000
#: Depth of the hits whose cosine an off-topic task's best value is read from (the cut reads the hits).
DERIVE_K = 10
#: What the stored rule says it is.
DERIVED_SOURCE = "derived"


def offtopic_prompts() -> list[str]:
    """The off-topic tasks the package ships (``skillsight_fast/data/offtopic_queries.txt``)."""
    from importlib.resources import files

    text = files("skillsight_fast").joinpath("data/offtopic_queries.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _seeded_rows(ids: Sequence[str], limit: int, seed: int = 0) -> list[int]:
    """All rows when there are at most ``limit``, else the ``limit`` with the smallest sha256 of
    ``"<seed>:<id>"`` (a sample that does not move when other skills are added), in row order."""
    import hashlib

    if len(ids) <= limit:
        return list(range(len(ids)))
    keyed = sorted(range(len(ids)), key=lambda j: hashlib.sha256(f"{seed}:{ids[j]}".encode()).digest())
    return sorted(keyed[:limit])


def _first_sentence(body: str) -> str:
    """The first prose sentence of a Markdown body ("" when there is none): headings, code fences,
    code, tables and lines of fewer than four words are skipped."""
    import re

    fence = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            fence = not fence
            continue
        if fence or not line or line.startswith(("#", "|", "<", "---", ">")):
            continue
        line = re.sub(r"^([-*+]|\d+[.)])\s+", "", line)
        if len(line.split()) < 4:
            continue
        sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
        return sentence[:300]
    return ""


def pseudo_tasks(skills: Sequence[Any], bodies: Sequence[str] | None = None,
                 limit: int = MAX_PSEUDO_SKILLS) -> tuple[list[str], np.ndarray]:
    """On-topic tasks made from the skills' own fields, and the row each belongs to.

    Per skill (all of them, or a seeded sample of ``limit``): its name with ``-``, ``_``, ``/``,
    ``.`` and ``:`` read as spaces, its description, its ``when_to_use`` (when it has one) and the
    first prose sentence of its body (when ``bodies`` are given and it has one). Empty and repeated
    texts of one skill are left out.
    """
    import re

    texts: list[str] = []
    rows: list[int] = []
    for j in _seeded_rows([m.id for m in skills], limit):
        m = skills[j]
        fields = [re.sub(r"[-_/.:]+", " ", str(m.name)).strip(), str(m.description).strip()[:500],
                  str(getattr(m, "when_to_use", "") or "").strip()[:500],
                  _first_sentence(bodies[j]) if bodies is not None and j < len(bodies) else ""]
        for text in dict.fromkeys(f for f in fields if f):
            texts.append(text)
            rows.append(j)
    return texts, np.asarray(rows, np.int64)


def balanced_threshold(on: np.ndarray, off: np.ndarray) -> tuple[float, float]:
    """The smallest threshold minimising (share of ``off`` at or above it) + (share of ``on`` below it).

    Returns ``(threshold, error)``; ``(-inf, 1.0)`` when no threshold does better than keeping
    everything (the two samples do not separate).
    """
    on = np.sort(np.asarray(on, np.float64)[np.isfinite(on)])
    off = np.sort(np.asarray(off, np.float64)[np.isfinite(off)])
    if on.size == 0 or off.size == 0:
        return -math.inf, 1.0
    values = np.unique(np.concatenate([on, off]))
    cands = np.unique(np.concatenate([values, np.nextafter(values, np.inf)]))
    off_pass = 1.0 - np.searchsorted(off, cands, side="left") / off.size  # share of off >= t
    on_cut = np.searchsorted(on, cands, side="left") / on.size  # share of on < t
    err = off_pass + on_cut
    best = int(np.argmin(err))  # first minimiser: the smallest threshold
    if err[best] >= 1.0:
        return -math.inf, 1.0
    return float(cands[best]), float(err[best])


def upper_fence(values: np.ndarray) -> float:
    """Tukey's upper outlier fence Q3 + 1.5 IQR of ``values`` (-inf when empty)."""
    x = np.asarray(values, np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return -math.inf
    q1, q3 = np.quantile(x, [0.25, 0.75])
    return float(q3 + 1.5 * (q3 - q1))


def label_free_threshold(on: np.ndarray, off: np.ndarray) -> tuple[float, float, float]:
    """The threshold of the label-free rule (second round): ``min(upper_fence(off), balanced)``.

    The off-topic side's upper fence leaves out the few shipped off-topic tasks that a library is
    in fact about (a time server and "convert 72 degrees Fahrenheit to Celsius"); the balanced
    threshold (:func:`balanced_threshold`) caps it where most off-topic tasks score like the
    library's own pseudo-tasks. Returns ``(threshold, balanced, fence)``; threshold -inf: the two
    sides do not separate, no abstention.
    """
    balanced, _ = balanced_threshold(on, off)
    if not math.isfinite(balanced):
        return -math.inf, balanced, upper_fence(off)
    fence = upper_fence(off)
    return min(fence, balanced), balanced, fence


def nearest_neighbour_cosines(embeddings: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """Each sampled skill's largest cosine with another skill, float64 (at most
    :data:`MAX_NEIGHBOUR_ROWS` rows against at most :data:`MAX_NEIGHBOUR_COLUMNS` columns)."""
    n = len(ids)
    if n < 2:
        return np.zeros(0)
    rows = np.asarray(_seeded_rows(ids, MAX_NEIGHBOUR_ROWS, seed=1), np.int64)
    cols = np.asarray(_seeded_rows(ids, MAX_NEIGHBOUR_COLUMNS, seed=2), np.int64)
    a = np.asarray(embeddings[rows], np.float32)
    best = np.full(rows.size, -np.inf)
    for start in range(0, cols.size, 8192):
        c = cols[start : start + 8192]
        s = (a @ np.asarray(embeddings[c], np.float32).T).astype(np.float64)
        s[rows[:, None] == c[None, :]] = -np.inf
        best = np.maximum(best, s.max(axis=1))
    return best[np.isfinite(best)]


def duplicate_threshold(embeddings: np.ndarray, ids: Sequence[str]) -> float | None:
    """The cosine from which two skills count as copies: the upper outlier fence (Tukey: Q3 + 1.5 IQR)
    of the library's nearest-neighbour cosines under its own document encoder; None when it is
    above 1 or the library is too small to say (fewer than 4 skills): then only same-name skills and
    identical vectors are folded (:data:`skillsight_fast.agents.find.IDENTICAL_COSINE`)."""
    nn = nearest_neighbour_cosines(embeddings, ids)
    if nn.size < 4:
        return None
    fence = upper_fence(nn)
    return fence if fence <= 1.0 else None


def derive_abstention(index: Any, bodies: Sequence[str] | None = None,
                      offtopic: Sequence[str] | None = None) -> dict[str, Any]:
    """Derive the abstention rule of an index from the index alone (no labels).

    The rule, written down before it met the evaluation libraries
    (``experiments/label_free_abstention.py``):

    * on-topic side: every pseudo-task of :func:`pseudo_tasks`, its value the cosine qᵀd of its
      vector (the index's own query encoder) with its own skill;
    * off-topic side: every shipped off-topic task (:func:`offtopic_prompts`), its value the largest
      cosine among its top :data:`DERIVE_K` hits;
    * the threshold is the smaller of the off-topic side's upper fence (Q3 + 1.5 IQR) and the
      smallest one minimising (share of off-topic tasks at or above it) + (share of pseudo-tasks
      below it) (:func:`label_free_threshold`; the first round used the second alone); the signal
      is ``cosine``.

    Also derives the duplicate-collapse cosine (:func:`duplicate_threshold`). Returns the dict
    stored in the index (manifest key ``abstention``): ``signal``, ``threshold`` (None: the two sides
    do not separate, no abstention), ``source`` (``derived``), ``duplicate_cosine`` and what the
    rule read (``n_pseudo``, ``n_offtopic``, the error and the quartiles of both sides).
    """
    metas = index.skills
    texts, rows = pseudo_tasks(metas, bodies)
    off_texts = list(offtopic) if offtopic is not None else offtopic_prompts()
    emb = index.dense.embeddings
    on = np.zeros(0)
    if texts:  # the vectors that answer them (a lookup-first cascade: the lookup's or the transformer's)
        vectors = answering_vectors(index, texts)
        on = np.einsum("ij,ij->i", np.asarray(emb[rows], np.float32), vectors).astype(np.float64)
    off = np.zeros(0)
    if off_texts and len(index):
        res = index.encode_search(off_texts, min(DERIVE_K, len(index)), explain=False)[1]
        cos = np.nan_to_num(res.cosine, nan=-np.inf)  # the search carries each hit's qᵀd
        off = cos.max(axis=1).astype(np.float64)
    threshold, balanced, fence = label_free_threshold(on, off)
    error = float(np.mean(off >= threshold) + np.mean(on < threshold)) if on.size and off.size else 1.0
    dup = duplicate_threshold(emb, [m.id for m in metas])
    tier = index.config.encoder.query_encoder

    def quartiles(x: np.ndarray) -> list[float]:
        return [round(float(v), 4) for v in np.quantile(x, [0.25, 0.5, 0.75])] if x.size else []

    return {
        "signal": "cosine",
        "threshold": threshold if math.isfinite(threshold) else None,
        "source": DERIVED_SOURCE,
        "rule": "min(upper fence of the shipped off-topic tasks, balanced vs the skills' pseudo-tasks)",
        "balanced": balanced if math.isfinite(balanced) else None,
        "fence": fence if math.isfinite(fence) else None,
        "query_encoder": tier,
        "duplicate_cosine": dup,
        "error": round(error, 4),
        "n_pseudo": int(on.size),
        "n_offtopic": int(off.size),
        "offtopic_passing": float(np.mean(off >= threshold)) if off.size else None,
        "pseudo_cut": float(np.mean(on < threshold)) if on.size else None,
        "pseudo_quartiles": quartiles(on),
        "offtopic_quartiles": quartiles(off),
    }
