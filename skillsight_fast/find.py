"""The one "find skills" use case: search, abstention and hit records.

Every surface (the CLI, the HTTP and MCP servers, the prompt hook, the tool proxy, the framework
retrievers) calls :func:`find_skills` and only translates its :class:`Answer` into its own shape;
no surface decides what a hit is or when to abstain.

Examples
--------
>>> from skillsight_fast import SkillIndex
>>> from skillsight_fast.find import find_skills
>>> index = SkillIndex.load("my-index")                            # doctest: +SKIP
>>> answer = find_skills(index, ["merge two PDF files"], k=3)[0]   # doctest: +SKIP
>>> [h.id for h in answer.hits]                                    # doctest: +SKIP
['pdf', 'pdf-merge', 'docx']
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.calibrate import Abstention, hit_cosines, task_passes

if TYPE_CHECKING:
    from skillsight_fast.index import SearchResult, SkillIndex


@dataclass(frozen=True)
class Hit:
    """One skill found for a task.

    Attributes
    ----------
    id, name, description, path : str
        What the index stores of the skill.
    score : float
        Fused score (the ranking key).
    cosine : float
        Raw dense similarity qᵀd (what a cosine abstention threshold reads).
    dense, lexical : float
        The background-calibrated dense score and the lexical score of the fusion.
    evidence : list of str
        The task's distinctive tokens that the skill contains.
    """

    id: str
    name: str
    description: str
    path: str
    score: float
    cosine: float
    dense: float
    lexical: float
    evidence: list[str] = field(default_factory=list)

    def to_dict(self, digits: int | None = None) -> dict[str, Any]:
        """JSON-able dict; scores rounded to ``digits`` when given."""
        out = asdict(self)
        if digits is not None:
            for key in ("score", "cosine", "dense", "lexical"):
                out[key] = round(out[key], digits)
        return out


@dataclass(frozen=True)
class Answer:
    """The hits for one task, and whether the abstention rule dropped them all."""

    query: str
    hits: list[Hit]
    abstained: bool = False
    abstention: dict[str, Any] | None = None

    def to_dict(self, digits: int | None = 6) -> dict[str, Any]:
        """``{"query", "abstention", "hits": [...]}`` as the servers return it."""
        return {"query": self.query, "abstention": self.abstention,
                "hits": [h.to_dict(digits) for h in self.hits]}


def hits_of(index: "SkillIndex", result: "SearchResult", row: int, cosines: np.ndarray) -> list[Hit]:
    """The real (non-padding) hits of one result row, best first."""
    hits = []
    for rank, j in enumerate(result.ids[row].tolist()):
        if j < 0:
            continue
        meta = index.skills[j]
        hits.append(Hit(
            id=meta.id, name=meta.name, description=meta.description, path=meta.path,
            score=float(result.scores[row, rank]), cosine=float(cosines[row, rank]),
            dense=float(result.dense[row, rank]), lexical=float(result.lexical[row, rank]),
            evidence=list(result.evidence[row][rank]) if result.evidence else [],
        ))
    return hits


def find_skills(index: "SkillIndex", tasks: str | Sequence[str], k: int = 5, *,
                abstention: Abstention | None = None, lock: threading.Lock | None = None,
                allow_flagged: bool = False, **knobs: Any) -> list[Answer]:
    """Search, apply the abstention rule, and build the hit records of each task.

    Parameters
    ----------
    index : SkillIndex
    tasks : str or sequence of str
        Validated with :meth:`SkillIndex.check_queries` (QueryError on bad input).
    k : int
        Hits per task (capped at the library size).
    abstention : Abstention, optional
        A task whose best hit falls below its threshold gets no hits (``abstained=True``).
    lock : threading.Lock, optional
        Held around the encoder (servers share one encoder between request threads).
    allow_flagged : bool
        False (default) leaves out the skills the index-time scan flagged (``index.flags``,
        :mod:`skillsight_fast.injection`): what a hook or proxy injects into a prompt must use False.
    **knobs
        Query-time settings passed to :meth:`SkillIndex.search_vectors` (``candidates``,
        ``fusion``, ``lexical_weight``, ...).

    Returns
    -------
    list of Answer, one per task
    """
    texts = index.check_queries(tasks)
    k = min(index.check_k(k), max(len(index), 1))
    with lock if lock is not None else contextlib.nullcontext():
        vectors = index.encode(texts)
        result = index.search_vectors(vectors, texts, k, **knobs)
    cosines = hit_cosines(index, vectors, result.ids)
    passes = task_passes(result, cosines, abstention)
    rule = abstention.to_dict() if abstention is not None else None
    if not allow_flagged:
        flags = getattr(index, "flags", None) or []
        flagged = np.array([bool(f) for f in flags] + [False], dtype=bool)  # index -1 (padding) -> False
        if flagged[:-1].any():
            drop = flagged[np.where(result.ids >= 0, result.ids, -1)]
            result.ids = np.where(drop, -1, result.ids)
    return [Answer(query=t, hits=hits_of(index, result, i, cosines) if passes[i] else [],
                   abstained=not bool(passes[i]), abstention=rule)
            for i, t in enumerate(texts)]
