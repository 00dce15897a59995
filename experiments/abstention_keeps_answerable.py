"""Can a label-free abstention rule keep >= 95 % of off-topic prompts silent and silence <= 5 % of answerable tasks?

Question (issue 44, items 4 and 6)
    With the rule an index derives at build (``engine.abstention.derive_abstention``: min of the
    upper fence of the shipped off-topic tasks and the balanced threshold against the library's
    pseudo-tasks, on the best cosine), 8.1 % of skillsbench's and 13.4 % of metatool's on-topic
    tasks get nothing, and 14.5 % of gorilla_hf's first 200 tasks. Measured here as shipped (the
    dataset kind's config, the cascade's task vectors, ``find_skills`` with k = 3 and the per-hit
    cut as the hook and the proxy's ``search_tools`` apply it): what reaches a prompt (R@3 and
    precision@3), the share of answerable tasks silenced and the share of off-topic prompts silent.

Rules compared (declared 08:40 UTC, 5 Dec 2026, before any run of this file)
    ``derived``   what ships (the rule above).
    ``off-q95``   threshold = the 95th percentile of the shipped off-topic tasks' values (the 106
                  prompts of ``skillsight_fast/data/offtopic_queries.txt``; each value the best
                  cosine among its top 10 hits, as ``derive_abstention`` reads them). Label-free and
                  per library: it aims at the off-topic target directly instead of balancing it
                  against pseudo-tasks, which score far above real tasks (the first round's finding).
    ``oracle``    for information only, never adoptable: whether *any* threshold on the best cosine
                  meets both targets on the dataset's own labelled tasks and off-topic prompts (the
                  smallest threshold silencing >= 95 % of them, and the share of answerable tasks it
                  silences). If none does, the best cosine alone cannot carry the rule there and a
                  signal beyond it is needed.
    Off-topic prompts (never read by a rule): data/abstention/skillsbench_offtopic.jsonl for
    skillsbench, data/abstention/metatool_offtopic.jsonl for metatool and metatool_multi, and the
    72 off-topic prompts of all three data/abstention files for the other datasets. Answerable
    tasks: every task of the dataset (metatool: its 2,000-task subset).

Adoption rule (declared before the run)
    Fit sets skillsbench, sra_theoremqa, bfcl; confirm sets metatool, gorilla_hf. ``off-q95``
    replaces ``derived`` if on every fit set its off-topic silence is >= 95 % and its answerable
    silenced share <= 5 % (point estimates; Wilson 95 % intervals reported), and the same holds on
    both confirm sets. Otherwise nothing changes and the table says what each rule does.

Result (09:18-09:23 UTC, 5 Dec 2026, load ~20; results/experiments/abstention_keeps_answerable.json; run on
bfcl, metatool and gorilla_hf only: the skill sets' embeddings could not be computed in the time
the machine's load left, so the rule's fit sets skillsbench and sra_theoremqa are not measured and
nothing can be adopted). k = 3, per-hit cut, answerable silenced = tasks left with no hit:

    | dataset | rule | threshold | R@3 | P@3 | answerable silenced [Wilson 95 %] | off-topic silent [Wilson 95 %] |
    | bfcl | none | - | 79.1 | 28.9 | 0.0 [0.0, 0.2] | 0.0 [0.0, 5.1] of 72 |
    | bfcl | derived | 0.422 | 40.7 | 55.7 | 49.7 [47.8, 51.7] | 100.0 [94.9, 100.0] |
    | bfcl | off-q95 | 0.384 | 52.0 | 50.4 | 35.4 [33.6, 37.3] | 97.2 [90.4, 99.2] |
    | metatool | none | - | 69.4 | 23.2 | 0.0 [0.0, 0.2] | 0.0 [0.0, 13.3] of 25 |
    | metatool | derived | 0.382 | 40.1 | 61.7 | 46.0 [43.8, 48.1] | 100.0 [86.7, 100.0] |
    | metatool | off-q95 | 0.401 | 36.0 | 66.7 | 53.0 [50.9, 55.2] | 100.0 [86.7, 100.0] |
    | gorilla_hf | none | - | 27.1 | 9.0 | 0.0 [0.0, 0.5] | 0.0 [0.0, 5.1] of 72 |
    | gorilla_hf | derived | 0.290 | 24.7 | 10.4 | 10.7 [8.8, 13.0] | 100.0 [94.9, 100.0] |
    | gorilla_hf | off-q95 | 0.296 | 24.7 | 10.7 | 11.8 [9.7, 14.1] | 100.0 [94.9, 100.0] |

    ``off-q95`` misses the target everywhere it ran (not adopted). The oracle (the first hit's cosine,
    thresholded with the labels to silence 95 % of the dataset's own off-topic prompts) still silences
    29.3 % of bfcl's, 32.6 % of metatool's and 10.8 % of gorilla_hf's answerable tasks: on these tool
    catalogues no threshold on the best cosine meets both targets, so a rule that does needs a signal
    beyond it (the issue's "signal beyond the best cosine"); none was declared in time to test. The
    derived rule's pseudo-tasks score far above real tasks (bfcl quartiles 0.55/0.62/0.69 against
    real tasks silenced half the time at 0.42), which is why it sits at the balanced threshold.

Run
    PYTHONPATH=. nice python experiments/abstention_keeps_answerable.py [--datasets NAME ...]
    [--out results/experiments/abstention_keeps_answerable.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.agents.find import find_skills  # noqa: E402
from skillsight_fast.engine.abstention import Abstention, derive_abstention, offtopic_prompts  # noqa: E402
from skillsight_fast.lab.evaluation.abstention import read_prompts, wilson  # noqa: E402
from skillsight_fast.lab.evaluation.cache import EmbeddingCache  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import EvalContext, shipped_config  # noqa: E402
from skillsight_fast.models import load_encoder  # noqa: E402

FIT, CONFIRM = ("skillsbench", "sra_theoremqa", "bfcl"), ("metatool", "gorilla_hf")
OFFTOPIC_FILES = {"skillsbench": ("skillsbench_offtopic.jsonl",), "metatool": ("metatool_offtopic.jsonl",)}
ALL_OFFTOPIC = ("skillsbench_offtopic.jsonl", "metatool_offtopic.jsonl", "mcp_reference_prompts.jsonl")
K = 3


class VectorTable:
    """An encoder that answers from precomputed vectors (text -> float32 (d,)), so an index built
    from cached embeddings can be asked through ``find_skills`` as a host asks it."""

    def __init__(self, table: dict[str, np.ndarray], like: Any) -> None:
        self.table = table
        self.model_id, self.checksum = like.model_id, like.checksum
        self.dim = int(next(iter(table.values())).shape[0])

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def offtopic_for(name: str) -> list[str]:
    files = OFFTOPIC_FILES.get(name, ALL_OFFTOPIC)
    return [p for f in files for p, g in read_prompts(ROOT / "data" / "abstention" / f) if not g]


def ask(index: Any, texts: list[str], rule: Abstention | None) -> list[list[int]]:
    rows = {sid: i for i, sid in enumerate(index.ids)}
    answers = find_skills(index, texts, K, abstention=rule, cut="hit", pins=[])
    return [[rows[h.id] for h in a.hits] for a in answers]


def measure(hits: list[list[int]], gold: list[frozenset[int]], off_hits: list[list[int]]) -> dict[str, Any]:
    n, n_off = len(gold), len(off_hits)
    silent = sum(not h for h in hits)
    off_silent = sum(not h for h in off_hits)
    recall = np.array([len(set(h) & g) / len(g) for h, g in zip(hits, gold)])
    answered = [(h, g) for h, g in zip(hits, gold) if h]
    precision = np.array([len(set(h) & g) / len(h) for h, g in answered]) if answered else np.zeros(0)
    return {"R@3": float(recall.mean()), "P@3": float(precision.mean()) if precision.size else math.nan,
            "answerable_silenced": silent / n, "answerable_silenced_ci": wilson(silent, n),
            "offtopic_silent": off_silent / n_off, "offtopic_silent_ci": wilson(off_silent, n_off),
            "n_tasks": n, "n_offtopic": n_off}


def run(name: str, enc: Any) -> dict[str, Any]:
    ds = load_dataset(ROOT / "data" / name)
    ctx = EvalContext(dataset=ds, encoder=enc)
    index = ctx.index(shipped_config(ds))
    tasks = ctx.shipped_vectors(index)
    off_eval = offtopic_for(name)
    bodies = [d.body for d in ds.docs]
    from skillsight_fast.engine.abstention import pseudo_tasks

    pseudo, _ = pseudo_tasks(index.skills, bodies)
    extra = list(dict.fromkeys([*offtopic_prompts(), *off_eval, *pseudo]))
    qenc = load_encoder(ctx.model, int8=True)  # short prompts: the cascade's int8 transformer
    extra_vecs = EmbeddingCache(ctx.cache, f"{qenc.model_id}-int8", qenc.checksum, "query").get(extra, qenc.encode)
    table = dict(zip(extra, extra_vecs)) | dict(zip(ds.query_texts, tasks))
    # the attribute the index's search reads (this file set ``index.query_encoder`` before the engine's
    # refactor; experiments/abstention_second_signal.py checked the numbers were the same)
    index.encoders.query_encoder = VectorTable(table, ctx.enc)
    derived = derive_abstention(index, bodies)
    index.state.abstention = derived  # find_skills reads its duplicate cosine from there
    # the shipped off-topic tasks' values, as derive_abstention reads them
    res = index.search_vectors(index.encode(offtopic_prompts()), offtopic_prompts(), min(10, len(index)), explain=False)
    shipped_off = np.nan_to_num(res.cosine, nan=-np.inf).max(axis=1)
    rules = {"none": None, "derived": Abstention.of_rule(derived),
             "off-q95": Abstention("cosine", float(np.quantile(shipped_off, 0.95)))}
    out: dict[str, Any] = {"derived_rule": derived, "thresholds": {}}
    texts = list(ds.query_texts)
    for r, rule in rules.items():
        out["thresholds"][r] = None if rule is None else rule.threshold
        out[r] = measure(ask(index, texts, rule), ds.gold, ask(index, off_eval, rule))
    # oracle (information): best cosine of each task's and prompt's first hit without a rule
    best_on = index.search_vectors(tasks, texts, 1, explain=False).cosine[:, 0]
    off_vec = index.encode(off_eval)
    best_off = index.search_vectors(off_vec, off_eval, 1, explain=False).cosine[:, 0]
    t = float(np.sort(best_off)[math.ceil(0.95 * best_off.size) - 1]) + 1e-6 if best_off.size else math.nan
    out["oracle"] = {"threshold": t, "offtopic_silent": float(np.mean(best_off < t)),
                     "answerable_silenced": float(np.mean(best_on < t)),
                     "feasible": bool(np.mean(best_on < t) <= 0.05)}
    out["cascade"] = ctx.notes.get("cascade")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(FIT + CONFIRM))
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "abstention_keeps_answerable.json"))
    args = ap.parse_args()
    enc = load_encoder()
    out: dict[str, Any] = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    for name in args.datasets:
        out[name] = run(name, enc)
        for r in ("none", "derived", "off-q95"):
            m = out[name][r]
            lo, hi = m["answerable_silenced_ci"]
            olo, ohi = m["offtopic_silent_ci"]
            print(f"{name:14s} {r:8s} t={out[name]['thresholds'][r]}  R@3 {100 * m['R@3']:.1f}  P@3 {100 * m['P@3']:.1f}  "
                  f"answerable silenced {100 * m['answerable_silenced']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]  "
                  f"off-topic silent {100 * m['offtopic_silent']:.1f}% [{100 * olo:.1f}, {100 * ohi:.1f}] "
                  f"of {m['n_offtopic']}", flush=True)
        o = out[name]["oracle"]
        print(f"{name:14s} oracle t={o['threshold']:.3f}: off-topic silent {100 * o['offtopic_silent']:.1f}%, "
              f"answerable silenced {100 * o['answerable_silenced']:.1f}% (feasible: {o['feasible']})", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=float) + "\n", encoding="utf-8")

    def ok(n: str) -> bool:
        m = out[n]["off-q95"]
        return m["offtopic_silent"] >= 0.95 and m["answerable_silenced"] <= 0.05

    if all(n in out for n in FIT + CONFIRM):
        out["adopted"] = "off-q95" if all(ok(n) for n in FIT + CONFIRM) else None
        print(f"adopted: {out['adopted']}")
        Path(args.out).write_text(json.dumps(out, indent=1, default=float) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
