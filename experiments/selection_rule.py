"""The fourth round's declared selection rule and its report table (shared by its experiments).

Declared in experiments/DECLARATIONS.md ("Fourth round") before any run:

- fit sets skillsbench, sra_theoremqa, bfcl; confirm sets metatool, gorilla_hf (reported, never
  used to choose);
- fit score of a variant on a dataset = (R@10 + nDCG@10) / 2 over the full query set;
- a variant replaces the default only if (a) its fit score is >= the default's on all three fit
  sets and (b) its mean fit score over the three is strictly higher; ties (all three within 0.05
  points) keep the default; among several passing variants the highest mean wins.

Not an experiment itself: ``from selection_rule import Report`` in an experiment file (run as
``python experiments/NAME.py``, so this folder is on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.lab.evaluation.datasets import load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import bootstrap_diff, ndcg_at_k, recall_at_k

DATA = Path(__file__).resolve().parent.parent / "data"
FIT = ("skillsbench", "sra_theoremqa", "bfcl")
CONFIRM = ("metatool", "gorilla_hf")
ALL = FIT + CONFIRM
DEFAULT = "default"
#: The default the round's variants were judged against (before it adopted the name + description
#: vector): the single text vector, everything else as the default.
BASELINE = IndexConfig(document_vector="text")
#: Ties: all three fit-set differences within this many points keep the default.
TIE = 0.05


def context(name: str) -> EvalContext:
    """The evaluation context of a vendored dataset (embeddings from the evaluation cache)."""
    return EvalContext(load_dataset(DATA / name))


def datasets(argv: Sequence[str]) -> list[str]:
    """Dataset names from ``argv[1]`` (comma-separated), default all five, fit sets first."""
    return argv[1].split(",") if len(argv) > 1 else list(ALL)


class Report:
    """Per-query R@10 and nDCG@10 of each variant on each dataset, and the rule's verdict."""

    def __init__(self) -> None:
        self.per: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        self.order: list[str] = []

    def add(self, dataset: str, variant: str, ids: np.ndarray, gold: Sequence[frozenset[int]]) -> None:
        """Record a ranking (int64 (n, >= 10)) of ``variant`` on ``dataset``."""
        r, n = recall_at_k(ids, gold, 10), ndcg_at_k(ids, gold, 10)
        self.per.setdefault(dataset, {})[variant] = (r, n)
        if variant not in self.order:
            self.order.append(variant)
        print(f"  {dataset:14s} {variant:34s} R@10 {100 * r.mean():5.1f}  nDCG@10 {100 * n.mean():5.1f}", flush=True)

    def fit_score(self, dataset: str, variant: str) -> float:
        r, n = self.per[dataset][variant]
        return 50.0 * (r.mean() + n.mean())

    def verdict(self, variant: str) -> str:
        """The declared rule applied to ``variant`` against the default (fit sets only)."""
        if not all(variant in self.per.get(d, {}) for d in FIT):
            return "not judged (a fit set is missing)"
        diffs = [self.fit_score(d, variant) - self.fit_score(d, DEFAULT) for d in FIT]
        if all(abs(x) <= TIE for x in diffs):
            return "TIE (keeps the default)"
        if min(diffs) >= 0 and np.mean(diffs) > 0:
            return "PASSES"
        worst = FIT[int(np.argmin(diffs))]
        return f"FAILS ({worst} {min(diffs):+.2f})" if min(diffs) < 0 else "FAILS (mean not higher)"

    def table(self) -> str:
        """Markdown: R@10 / nDCG@10 per dataset, fit score per fit set, mean, verdict; then the
        paired bootstrap 95% intervals of each variant minus the default."""
        names = [d for d in ALL if d in self.per]
        head = "| variant | " + " | ".join(names) + " | fit mean | verdict |"
        lines = [head, "|---|" + "---|" * len(names) + "---:|---|"]
        for v in self.order:
            cells = []
            for d in names:
                if v not in self.per[d]:
                    cells.append("–")
                    continue
                r, n = self.per[d][v]
                fit = f" ({self.fit_score(d, v):.2f})" if d in FIT else ""
                cells.append(f"{100 * r.mean():.1f} / {100 * n.mean():.1f}{fit}")
            have = all(v in self.per.get(d, {}) for d in FIT)
            mean = f"{np.mean([self.fit_score(d, v) for d in FIT]):.2f}" if have else "–"
            lines.append(f"| {v} | " + " | ".join(cells) + f" | {mean} | {'' if v == DEFAULT else self.verdict(v)} |")
        lines += ["", "Paired bootstrap 95% intervals, variant minus default, points (R@10; nDCG@10):", "",
                  "| variant | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for v in self.order:
            if v == DEFAULT:
                continue
            cells = []
            for d in names:
                if v not in self.per[d] or DEFAULT not in self.per[d]:
                    cells.append("–")
                    continue
                (r, n), (r0, n0) = self.per[d][v], self.per[d][DEFAULT]
                a, b = bootstrap_diff(r, r0), bootstrap_diff(n, n0)
                cells.append(f"{100 * a[0]:+.1f} [{100 * a[1]:+.1f}, {100 * a[2]:+.1f}]; "
                             f"{100 * b[0]:+.1f} [{100 * b[1]:+.1f}, {100 * b[2]:+.1f}]")
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def top_depth(s: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """A dense stage's answer from full scores s (n, N): the ``depth`` best ids and their scores,
    best first, ties by ascending id (what ``SkillIndex.dense_candidates`` returns)."""
    depth = min(depth, s.shape[1])
    part = np.argpartition(-s, depth - 1, axis=1)[:, :depth]
    order = np.argsort(-np.take_along_axis(s, part, 1), axis=1, kind="stable")
    ids = np.take_along_axis(part, order, 1).astype(np.int64)
    return ids, np.take_along_axis(s, ids, 1).astype(np.float32)
