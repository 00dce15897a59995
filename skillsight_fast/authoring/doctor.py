"""The library doctor: why a skill is not found, in numbers an author can act on.

:func:`diagnose` runs four checks on an index:

* **self-retrieval**: each skill's own description (plus ``when_to_use``) is the task; a skill that
  is not the first hit (its own copies aside) is reported with its rank and the skills above it.
  A skill its own description does not find is one a user's paraphrase will rarely find.
* **confusable pairs**: A and B where A's description puts B at the top and B's puts A at the top
  (each is the other's best hit besides itself, and at least one of them ranks the other above
  itself). Either description should say what tells the two apart.
* **duplicate names**: skills whose names are equal up to case and punctuation
  (:func:`~skillsight_fast.agents.find.name_key`), and skills of different names whose embeddings are
  near-identical (cosine ≥ :data:`~skillsight_fast.agents.find.DUPLICATE_COSINE`).
* **listing budget**: hosts list skills by description; Claude Code (2.1.105 and later) cuts each
  skill's ``description`` + ``when_to_use`` at :data:`CLAUDE_CODE_LISTING_CHARS` characters, the
  Agent Skills specification allows :data:`SPEC_DESCRIPTION_CHARS` for ``description``
  (docs/FRONT_MATTER.md has the sources).

The self-retrieval search is the index's own ranking (fused score, no abstention, no collapse).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.agents.find import DUPLICATE_COSINE, name_key

if TYPE_CHECKING:
    from skillsight_fast.engine.index import SkillIndex

logger = logging.getLogger(__name__)

#: Claude Code's cap on one skill's listing (``description`` + ``when_to_use``), since 2.1.105.
CLAUDE_CODE_LISTING_CHARS = 1536
#: The Agent Skills specification's limit on ``description``.
SPEC_DESCRIPTION_CHARS = 1024
#: Claude Code's whole skill listing at a 200k context: 1% of it at 4 characters per token.
CLAUDE_CODE_TOTAL_LISTING_CHARS = 8000
#: Depth of the self-retrieval search.
DOCTOR_K = 10


@dataclass
class Report:
    """What :func:`diagnose` found (every list best-to-act-on first)."""

    n_skills: int
    k: int
    #: Skills not first for their own description: {id, name, rank (None: not in the top k), above}.
    not_self: list[dict[str, Any]] = field(default_factory=list)
    #: {a, b, a_rank_of_b, b_rank_of_a, margin_a, margin_b}
    confusable: list[dict[str, Any]] = field(default_factory=list)
    #: {name, ids}
    duplicate_names: list[dict[str, Any]] = field(default_factory=list)
    #: {a, b, cosine}
    near_identical: list[dict[str, Any]] = field(default_factory=list)
    #: {id, name, description_chars, when_to_use_chars, listing_chars, over}
    too_long: list[dict[str, Any]] = field(default_factory=list)
    listing_chars: int = 0
    self_rank_counts: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The counts."""
        return {
            "n_skills": self.n_skills, "k": self.k,
            "self_first": self.self_rank_counts.get("1", 0),
            "self_in_top_k": self.n_skills - sum(1 for s in self.not_self if s["rank"] is None),
            "not_self_first": len(self.not_self),
            "not_in_top_k": sum(1 for s in self.not_self if s["rank"] is None),
            "confusable_pairs": len(self.confusable),
            "duplicate_name_groups": len(self.duplicate_names),
            "skills_in_duplicate_name_groups": sum(len(g["ids"]) for g in self.duplicate_names),
            "near_identical_pairs": len(self.near_identical),
            "over_claude_code_listing_cap": sum(1 for t in self.too_long if "claude-code" in t["over"]),
            "over_spec_description_limit": sum(1 for t in self.too_long if "agent-skills-spec" in t["over"]),
            "listing_chars": self.listing_chars,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the summary and every finding."""
        return {"summary": self.summary(), "not_self": self.not_self, "confusable": self.confusable,
                "duplicate_names": self.duplicate_names, "near_identical": self.near_identical,
                "too_long": self.too_long}


def listing_chars(meta: Any) -> int:
    """Characters of a skill's entry in a host's listing: ``description`` + ``when_to_use``."""
    extra = getattr(meta, "when_to_use", "") or ""
    return len(meta.description) + (len(extra) + 1 if extra else 0)


def self_queries(index: SkillIndex) -> list[str]:
    """The task each skill is checked with: its description and ``when_to_use`` (its name when
    both are empty)."""
    out = []
    for m in index.skills:
        text = " ".join(t for t in (m.description, getattr(m, "when_to_use", "")) if t).strip()
        out.append(text or m.name)
    return out


def diagnose(index: SkillIndex, *, k: int = DOCTOR_K, batch: int = 256,
             duplicate_cosine: float = DUPLICATE_COSINE) -> Report:
    """Run the four checks (see the module docstring).

    Parameters
    ----------
    index : SkillIndex
    k : int
        Depth of the self-retrieval search; a skill below it is "not in the top k".
    batch : int
        Descriptions encoded and searched at once.
    duplicate_cosine : float
        Embedding cosine from which two skills count as near-identical.
    """
    metas = index.skills
    n = len(metas)
    k = max(1, min(k, n))
    report = Report(n_skills=n, k=k)
    if n == 0:
        return report
    keys = [name_key(m.name) for m in metas]
    groups: dict[str, list[int]] = {}
    for j, key in enumerate(keys):
        groups.setdefault(key, []).append(j)
    emb = np.asarray(index.dense.embeddings, dtype=np.float32)

    # copies of each skill: same name, or near-identical embedding (one pass in blocks of rows)
    near: dict[int, set[int]] = {}
    for start in range(0, n, 1024):
        block = emb[start : start + 1024] @ emb.T
        for a, b in zip(*np.nonzero(block >= duplicate_cosine)):
            i, j = start + int(a), int(b)
            if i < j:
                near.setdefault(i, set()).add(j)
                near.setdefault(j, set()).add(i)
                if keys[i] != keys[j]:
                    report.near_identical.append({"a": metas[i].id, "b": metas[j].id,
                                                  "cosine": round(float(block[a, b]), 4)})
    report.near_identical.sort(key=lambda r: -r["cosine"])

    def copies(j: int) -> set[int]:
        return set(groups[keys[j]]) | near.get(j, set())

    # self-retrieval: the top k (+ room for the skill's copies) of each skill's own description
    texts = self_queries(index)
    depth = min(n, k + 1 + max(len(groups[key]) for key in keys)
                + max((len(v) for v in near.values()), default=0))
    top_other: list[int] = [-1] * n
    self_rank: list[int | None] = [None] * n
    scores_self: list[float] = [float("nan")] * n
    scores_other: list[float] = [float("nan")] * n
    for start in range(0, n, batch):
        part = texts[start : start + batch]
        res = index.search_vectors(index.encode(part), part, depth, explain=False)
        for r, ids in enumerate(res.ids.tolist()):
            j = start + r
            mine = copies(j) - {j}
            ranked = [(h, float(res.scores[r, pos])) for pos, h in enumerate(ids) if h >= 0 and h not in mine]
            order = [h for h, _ in ranked]
            if j in order and order.index(j) < k:
                self_rank[j] = order.index(j) + 1
                scores_self[j] = ranked[order.index(j)][1]
            others = [(h, sc) for h, sc in ranked if h != j]
            if others:
                top_other[j], scores_other[j] = others[0]
            if self_rank[j] != 1:
                above = order[: self_rank[j] - 1] if self_rank[j] else [h for h, _ in others[:3]]
                report.not_self.append({"id": metas[j].id, "name": metas[j].name, "rank": self_rank[j],
                                        "above": [metas[h].id for h in above[:3]]})
    counts: dict[str, int] = {}
    for r in self_rank:
        label = str(r) if r is not None else f">{k}"
        counts[label] = counts.get(label, 0) + 1
    report.self_rank_counts = dict(sorted(counts.items(),
                                          key=lambda kv: (kv[0].startswith(">"), len(kv[0]), kv[0])))
    report.not_self.sort(key=lambda s: (s["rank"] is not None, -(s["rank"] or 0)))

    # confusable: each is the other's best hit besides itself, and one of them outranks the other
    for a in range(n):
        b = top_other[a]
        if b <= a or top_other[b] != a:
            continue
        if self_rank[a] == 1 and self_rank[b] == 1:
            continue
        report.confusable.append({
            "a": metas[a].id, "b": metas[b].id, "a_self_rank": self_rank[a], "b_self_rank": self_rank[b],
            "margin_a": _margin(scores_self[a], scores_other[a]),
            "margin_b": _margin(scores_self[b], scores_other[b])})
    report.confusable.sort(
        key=lambda c: min(x if x is not None else -1e9 for x in (c["margin_a"], c["margin_b"])))

    for key, rows in groups.items():
        if len(rows) > 1 and key:
            report.duplicate_names.append({"name": metas[rows[0]].name, "ids": [metas[j].id for j in rows]})
    report.duplicate_names.sort(key=lambda g: (-len(g["ids"]), g["name"]))

    total = 0
    for m in metas:
        chars = listing_chars(m)
        total += chars
        caps = (("claude-code", CLAUDE_CODE_LISTING_CHARS, chars),
                ("agent-skills-spec", SPEC_DESCRIPTION_CHARS, len(m.description)))
        over = [host for host, limit, value in caps if value > limit]
        if over:
            report.too_long.append({"id": m.id, "name": m.name, "description_chars": len(m.description),
                                    "when_to_use_chars": len(getattr(m, "when_to_use", "") or ""),
                                    "listing_chars": chars, "over": over})
    report.too_long.sort(key=lambda t: -t["listing_chars"])
    report.listing_chars = total
    return report


def _margin(own: float, other: float) -> float | None:
    """Fused score of the skill for its own description minus its best rival's (None: not found)."""
    if np.isnan(own) or np.isnan(other):
        return None
    return round(own - other, 4)


def format_report(report: Report, limit: int = 10) -> str:
    """A plain-text report: the counts, then the first ``limit`` findings of each check."""
    s = report.summary()
    n = max(s["n_skills"], 1)
    lines = [
        f"library of {s['n_skills']} skills",
        (f"self-retrieval (own description as the task, top {s['k']}): {s['self_first']} first "
         f"({100 * s['self_first'] / n:.1f}%), {s['not_in_top_k']} not in the top {s['k']}"),
    ]
    for item in report.not_self[:limit]:
        where = f"rank {item['rank']}" if item["rank"] else f"not in the top {report.k}"
        lines.append(f"  {item['id']}: {where}; above it: {', '.join(item['above']) or '-'}")
    lines.append(f"confusable pairs (each the other's best hit): {s['confusable_pairs']}")
    for c in report.confusable[:limit]:
        lines.append(f"  {c['a']} <-> {c['b']}  "
                     f"(self ranks {c['a_self_rank'] or '-'} / {c['b_self_rank'] or '-'}, "
                     f"score margins {c['margin_a']} / {c['margin_b']})")
    lines.append(f"duplicate names: {s['duplicate_name_groups']} names shared by "
                 f"{s['skills_in_duplicate_name_groups']} skills")
    for g in report.duplicate_names[:limit]:
        lines.append(f"  {g['name']}: {', '.join(g['ids'][:6])}" + (" ..." if len(g["ids"]) > 6 else ""))
    lines.append(f"near-identical texts under different names (cosine >= {DUPLICATE_COSINE}): "
                 f"{s['near_identical_pairs']} pairs")
    for p in report.near_identical[:limit]:
        lines.append(f"  {p['a']} ~ {p['b']}  cosine {p['cosine']}")
    lines.append(f"listing budget: {s['over_claude_code_listing_cap']} skills over Claude Code's "
                 f"{CLAUDE_CODE_LISTING_CHARS}-character cap, "
                 f"{s['over_spec_description_limit']} over the spec's "
                 f"{SPEC_DESCRIPTION_CHARS}-character description limit; the whole listing is "
                 f"{s['listing_chars']:,} characters (Claude Code lists ~{CLAUDE_CODE_TOTAL_LISTING_CHARS:,} "
                 "at a 200k context)")
    for t in report.too_long[:limit]:
        lines.append(f"  {t['id']}: {t['listing_chars']} characters ({', '.join(t['over'])})")
    return "\n".join(lines)

