"""Does a second signal beside the best cosine let a label-free rule keep answerable tasks?

Question (issue 44, item 6)
    ``abstention_keeps_answerable.py`` found that no threshold on the best cosine alone, not even one
    chosen with the labels, keeps >= 95 % of off-topic prompts silent while silencing <= 5 % of
    answerable tasks on the tool catalogues (bfcl 29.3 %, metatool 32.6 %, gorilla_hf 10.8 % at the
    oracle threshold). Looking at bfcl (a fit set; skillsbench's and sra_theoremqa's runs had not
    finished, metatool and gorilla_hf never looked at) before writing this: off-topic prompts
    that pass a cosine threshold do so with a vague fit to a broad tool ("what should I have for
    lunch?" -> ``restaurant_search``, "sorry, wrong chat" -> ``chat_with_friend``) and share few
    of the tool's words, while the answerable tasks such a threshold silences often name the
    tool's terms ("Delete the release RL50" -> ``delete_release``). Two signals beyond the best
    cosine, both read from the index alone:

    ``lex``     lexical evidence of a hit: the sum of idf(t) = ln((N + 1)/(df + 1)) + 1 (the index's
                own idf) over the task's known non-stop-word terms (the index's analyzer) found in
                the hit's document.
    ``docrel``  the hit's cosine minus the 90th percentile of its skill's cosines with the shipped
                off-topic tasks (a skill that every vague prompt lands on, such as ``help_me``,
                must be reached by more than a vague fit): a per-library calibration from the
                library's own documents and the shipped list, no labels.

    (Also looked at on bfcl and dropped before declaring: the gap between the best and the 2nd,
    3rd or 10th cosine, the z-score of the best cosine against the task's cosines over the whole
    library, the fused score, the share of the task's idf mass matched: none separates better
    than the cosine itself.)

Rules compared (declared 11:44 UTC, 5 Dec 2026, before any run of this file; none of them reads a label)
    Every rule is per hit, as the hook and the proxy's ``search_tools`` cut: a task's first 10 hits
    (``find_skills``, k = 10, no rule, duplicates collapsed) are filtered and the first 3 kept hits
    reach the prompt; a task with no kept hit is silent. Each threshold t_s of a signal s is the
    q-th quantile, over the 104 off-topic tasks the package ships
    (``skillsight_fast/data/offtopic_queries.txt``), of the largest value of s among their first 3
    hits. A hit is kept when ANY of the rule's signals reaches its threshold (so a task is silent
    only when all its signals are low).

    ``none``             no rule (reference).
    ``derived``          what ships: ``derive_abstention``'s cosine threshold (``find_skills`` with
                         the index's rule, k = 3, per-hit cut).
    ``cos-q95``          cosine alone, q = 0.95 (the previous round's ``off-q95``, per hit).
    ``cos+lex-q95``      cosine or lexical evidence, q = 0.95.
    ``cos+lex-q90``      cosine or lexical evidence, q = 0.90.
    ``docrel+lex-q95``   doc-relative cosine or lexical evidence, q = 0.95.
    ``docrel+lex-q90``   doc-relative cosine or lexical evidence, q = 0.90.

    Off-topic prompts measured (never read by a rule): ``data/abstention/skillsbench_offtopic.jsonl``
    for skillsbench, ``metatool_offtopic.jsonl`` for metatool, the 72 off-topic prompts of all
    three ``data/abstention`` files for sra_theoremqa, bfcl and gorilla_hf (as the previous round).
    Answerable tasks: every task of the dataset (metatool: its 2,000-task subset). Measures per
    dataset and rule: answerable silenced (tasks left with no hit; bootstrap 95 % interval),
    answerable lost (tasks whose 3 hits without a rule held a gold skill and now hold none), R@3,
    P@3, off-topic silent (bootstrap and Wilson 95 % intervals), and the paired bootstrap of each
    arm's answerable silenced minus the derived rule's.

Adoption rule (declared with the rules, before the run)
    An arm passes a dataset when its off-topic silent share is >= 95 % and its answerable silenced
    share <= 5 % (point estimates, the issue's target). Among the arms passing all three fit sets,
    the one with the smallest largest answerable silenced share over them is carried to the
    confirm sets (metatool, gorilla_hf), run once; it is adopted (wired into
    ``engine/abstention.py`` as the rule an index derives at build) if it passes both. If no arm
    passes the fit sets, nothing is adopted, and the table says per dataset how far each arm is
    from the target (answerable silenced - 5 points, 95 - off-topic silent points); the confirm
    sets are still run so the table is complete.

Result (12:22-12:26 UTC, 5 Dec 2026, load 4; results/experiments/abstention_second_signal.json)
    Nothing passes; nothing is adopted. No arm passes a single fit set (skillsbench: the second
    signal lets 2-5 of the 25 off-topic prompts through; sra_theoremqa and bfcl: >= 12 % of
    answerable tasks silenced at q = 0.95, < 95 % off-topic silence or > 5 % silenced at q = 0.90).
    Answerable silenced / off-topic silent, in %:

    | dataset | derived | cos+lex-q95 | docrel+lex-q95 | docrel+lex-q90 |
    | skillsbench | 1.4 / 96.0 | 0.0 / 92.0 | 0.0 / 88.0 | 0.0 / 80.0 |
    | sra_theoremqa | 48.1 / 98.6 | 18.9 / 94.4 | 15.8 / 94.4 | 9.2 / 86.1 |
    | bfcl | 49.7 / 100.0 | 12.7 / 95.8 | 12.4 / 100.0 | 5.9 / 95.8 |
    | metatool | 46.0 / 100.0 | 42.1 / 100.0 | 26.9 / 96.0 | 6.1 / 64.0 |
    | gorilla_hf | 10.7 / 100.0 | 3.0 / 83.3 | 2.9 / 81.9 | 2.2 / 75.0 |

    The second signal moves the trade-off a long way where the derived rule silences most
    (docrel+lex-q95 minus derived, paired bootstrap: bfcl -37.3 [-39.1, -35.5] points,
    sra_theoremqa -32.3 [-35.6, -29.0], metatool -19.1 [-20.8, -17.4]) but lets off-topic prompts
    through where the derived rule is already near the target (gorilla_hf, skillsbench). Even with
    thresholds chosen on the labels (``oracle``, information), the best pair silences >= 95 % of the
    off-topic prompts only at 13.7 % (sra_theoremqa), 4.8 % (bfcl), 14.2 % (metatool) and 5.2 %
    (gorilla_hf, cos+lex) of answerable tasks silenced: these two signals cannot carry the target on
    sra_theoremqa, metatool or gorilla_hf whatever the thresholds.

    A first run (11:50-12:09, load 6-12) measured every dataset with the live int8 transformer's
    task vectors instead of the cascade's: the harness set ``index.query_encoder``, which the index
    no longer reads since the engine's refactor; it now sets ``index.encoders.query_encoder`` and
    checks that the index answers from the given vectors. Same verdict (no arm passes a fit set).

Run
    PYTHONPATH=. nice python experiments/abstention_second_signal.py [--datasets NAME ...] [--int8-tasks NAME ...]
    (``--int8-tasks``: those datasets' tasks all encoded by the int8 transformer, the cascade's
    fallback, when the lookup table cannot be fitted in the time there is.)
    [--out results/experiments/abstention_second_signal.json]
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
sys.path.insert(0, str(ROOT / "experiments"))

from abstention_keeps_answerable import VectorTable, offtopic_for  # noqa: E402

from skillsight_fast.agents.find import find_skills  # noqa: E402
from skillsight_fast.engine.abstention import (  # noqa: E402
    Abstention,
    derive_abstention,
    offtopic_prompts,
    pseudo_tasks,
)
from skillsight_fast.lab.evaluation.abstention import wilson  # noqa: E402
from skillsight_fast.lab.evaluation.cache import EmbeddingCache  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import EvalContext, shipped_config  # noqa: E402
from skillsight_fast.metrics import bootstrap_diff, bootstrap_mean  # noqa: E402
from skillsight_fast.models import load_encoder  # noqa: E402

FIT, CONFIRM = ("skillsbench", "sra_theoremqa", "bfcl"), ("metatool", "gorilla_hf")
K, DEPTH, READ = 3, 10, 3  # hits reaching the prompt, hits filtered, hits a threshold's value is read from
#: arm -> (signals, quantile over the shipped off-topic tasks)
ARMS: dict[str, tuple[tuple[str, ...], float]] = {
    "cos-q95": (("cos",), 0.95),
    "cos+lex-q95": (("cos", "lex"), 0.95),
    "cos+lex-q90": (("cos", "lex"), 0.90),
    "docrel+lex-q95": (("docrel", "lex"), 0.95),
    "docrel+lex-q90": (("docrel", "lex"), 0.90),
}
RULES = ("none", "derived", *ARMS)
N_BOOT = 2000


def hits(index: Any, texts: list[str], k: int, rule: Abstention | None = None) -> list[list[tuple[int, float]]]:
    """(row, cosine) of each task's hits, as ``find_skills`` returns them to a host (per-hit cut)."""
    rows = {sid: i for i, sid in enumerate(index.ids)}
    answers = find_skills(index, texts, k, abstention=rule, cut="hit", pins=[])
    return [[(rows[h.id], float(h.cosine)) for h in a.hits] for a in answers]


def signals(index: Any, texts: list[str], found: list[list[tuple[int, float]]],
            doc_q90: np.ndarray) -> dict[str, np.ndarray]:
    """Each signal of each task's first DEPTH hits, float64 (n, DEPTH), -inf where there is no hit."""
    n = len(texts)
    out = {s: np.full((n, DEPTH), -np.inf) for s in ("cos", "lex", "docrel")}
    lexical = index.lexical
    terms, ptr = index.evidence_tokens(texts, exclude=lexical.stopword)
    idf = np.asarray(lexical.idf, np.float64)
    for i, row in enumerate(found):
        q = terms[ptr[i] : ptr[i + 1]]
        for r, (j, cos) in enumerate(row[:DEPTH]):
            out["cos"][i, r] = cos
            out["docrel"][i, r] = cos - doc_q90[j]
            out["lex"][i, r] = float(idf[q[np.isin(q, lexical.lexicon.doc_term_ids(j))]].sum())
    return out


def apply(found: list[list[tuple[int, float]]], sig: dict[str, np.ndarray], names: tuple[str, ...],
          thresholds: dict[str, float]) -> list[list[int]]:
    """The first K hits that any of ``names`` keeps (value >= its threshold)."""
    keep = np.zeros(next(iter(sig.values())).shape, bool)
    for s in names:
        keep |= sig[s] >= thresholds[s]
    return [[j for r, (j, _) in enumerate(row[:DEPTH]) if keep[i, r]][:K] for i, row in enumerate(found)]


def pair_oracle(sig: dict[str, dict[str, np.ndarray]], names: tuple[str, str], gold3: np.ndarray) -> dict[str, Any]:
    """For information, never adoptable: thresholds chosen WITH the labels on two signals (a hit kept
    when either reaches its threshold) that silence >= 95 % of the dataset's own off-topic prompts
    while silencing the fewest answerable tasks; also those losing the fewest tasks whose first 3
    hits held a gold skill (``gold3``: bool (n, 3), hit r of the task is gold)."""
    a1, a2 = sig["ans"][names[0]], sig["ans"][names[1]]
    o1, o2 = sig["off"][names[0]], sig["off"][names[1]]
    best = {"silenced": (math.inf, None), "lost": (math.inf, None)}
    for t1 in np.append(np.unique(o1.max(axis=1)), -np.inf) + 1e-9:
        for t2 in np.append(np.unique(o2.max(axis=1)), -np.inf) + 1e-9:
            if np.mean(~((o1 >= t1) | (o2 >= t2)).any(axis=1)) < 0.95:
                continue
            keep = (a1 >= t1) | (a2 >= t2)
            silent = ~keep.any(axis=1)
            lost = float(np.mean(gold3.any(axis=1) & ~(keep[:, :K] & gold3).any(axis=1)))
            if silent.mean() < best["silenced"][0]:
                best["silenced"] = (float(silent.mean()), [float(t1), float(t2)])
            if lost < best["lost"][0]:
                best["lost"] = (lost, [float(t1), float(t2)])
    return {"signals": list(names), "min_silenced": best["silenced"][0], "at": best["silenced"][1],
            "min_lost": best["lost"][0], "lost_at": best["lost"][1]}


def measure(answer: list[list[int]], gold: list[frozenset[int]], off_answer: list[list[int]],
            base: list[list[int]], derived_silent: np.ndarray | None) -> dict[str, Any]:
    silent = np.array([not h for h in answer], float)
    off_silent = np.array([not h for h in off_answer], float)
    had = np.array([bool(set(h) & g) for h, g in zip(base, gold)])
    has = np.array([bool(set(h) & g) for h, g in zip(answer, gold)])
    lost = (had & ~has).astype(float)
    recall = np.array([len(set(h) & g) / len(g) for h, g in zip(answer, gold)])
    prec = [len(set(h) & g) / len(h) for h, g in zip(answer, gold) if h]
    out = {"R@3": float(recall.mean()), "P@3": float(np.mean(prec)) if prec else math.nan,
           "answerable_silenced": float(silent.mean()), "answerable_silenced_ci": bootstrap_mean(silent, n_boot=N_BOOT),
           "answerable_lost": float(lost.mean()), "answerable_lost_ci": bootstrap_mean(lost, n_boot=N_BOOT),
           "offtopic_silent": float(off_silent.mean()), "offtopic_silent_ci": bootstrap_mean(off_silent, n_boot=N_BOOT),
           "offtopic_silent_wilson": wilson(int(off_silent.sum()), off_silent.size),
           "n_tasks": len(gold), "n_offtopic": len(off_answer)}
    if derived_silent is not None:
        out["silenced_minus_derived"] = bootstrap_diff(silent, derived_silent, n_boot=N_BOOT)
    out["pass"] = bool(out["offtopic_silent"] >= 0.95 and out["answerable_silenced"] <= 0.05)
    out["distance"] = {"silenced_over_5": round(100 * out["answerable_silenced"] - 5, 1),
                       "silent_under_95": round(95 - 100 * out["offtopic_silent"], 1)}
    return out


def texts_of(ds: Any) -> list[str]:
    return list(ds.query_texts)


def run(name: str, enc: Any, int8_tasks: bool = False) -> dict[str, Any]:
    ds = load_dataset(ROOT / "data" / name)
    ctx = EvalContext(dataset=ds, encoder=enc)
    index = ctx.index(shipped_config(ds))
    # the lookup-first cascade's task vectors, or (int8_tasks) the int8 transformer's for every task,
    # the cascade's fallback, when its lookup table cannot be fitted in the time the machine leaves
    tasks = ctx.int8_query_emb if int8_tasks else ctx.shipped_vectors(index)
    off_eval = offtopic_for(name)
    shipped = offtopic_prompts()
    bodies = [d.body for d in ds.docs]
    pseudo, _ = pseudo_tasks(index.skills, bodies)
    extra = list(dict.fromkeys([*shipped, *off_eval, *pseudo]))
    qenc = load_encoder(ctx.model, int8=True)  # short prompts: the cascade's int8 transformer
    extra_vecs = EmbeddingCache(ctx.cache, f"{qenc.model_id}-int8", qenc.checksum, "query").get(extra, qenc.encode)
    table = dict(zip(extra, extra_vecs)) | dict(zip(ds.query_texts, tasks))
    # every text answered from the table (the attribute the index's search reads; setting
    # ``index.query_encoder``, as the previous round did, left the live int8 transformer answering)
    index.encoders.query_encoder = VectorTable(table, ctx.enc)
    probe = texts_of(ds)[:64]
    if not np.allclose(index.encode(probe), np.stack([table[t] for t in probe]), atol=1e-6):
        raise SystemExit("the index does not answer from the task vectors given to it")
    derived = derive_abstention(index, bodies)
    index.state.abstention = derived  # find_skills reads its duplicate cosine from there, as from a built index
    texts = list(ds.query_texts)

    emb = np.asarray(index.dense.embeddings, np.float32)
    doc_q90 = np.quantile(index.encode(shipped).astype(np.float32) @ emb.T, 0.9, axis=0).astype(np.float64)
    found = {g: hits(index, t, DEPTH) for g, t in (("ans", texts), ("off", off_eval), ("ship", shipped))}
    sig = {g: signals(index, t, found[g], doc_q90) for g, t in (("ans", texts), ("off", off_eval), ("ship", shipped))}
    base = {g: [[j for j, _ in row[:K]] for row in found[g]] for g in ("ans", "off")}

    out: dict[str, Any] = {"task_vectors": "int8 transformer" if int8_tasks else "cascade", "derived_rule": derived, "thresholds": {}, "cascade": ctx.notes.get("cascade"),
                           "n_docs": len(index), "offtopic_eval": len(off_eval)}
    answers = {"none": base}
    rule = Abstention.of_rule(derived)
    answers["derived"] = {"ans": [[j for j, _ in r] for r in hits(index, texts, K, rule)],
                          "off": [[j for j, _ in r] for r in hits(index, off_eval, K, rule)]}
    out["thresholds"]["derived"] = {"cos": derived.get("threshold")}
    for arm, (names, q) in ARMS.items():
        th = {s: float(np.quantile(sig["ship"][s][:, :READ].max(axis=1), q)) for s in names}
        out["thresholds"][arm] = th
        answers[arm] = {g: apply(found[g], sig[g], names, th) for g in ("ans", "off")}
    derived_silent = np.array([not h for h in answers["derived"]["ans"]], float)
    for r in RULES:
        out[r] = measure(answers[r]["ans"], ds.gold, answers[r]["off"], base["ans"],
                         None if r in ("none", "derived") else derived_silent)
        out[r]["offtopic_answered"] = [p for p, h in zip(off_eval, answers[r]["off"]) if h][:10]
    # for information (added after the first bfcl run, never adoptable): the same pairs with
    # thresholds chosen on the labels
    gold3 = np.array([[j in g for j in (h + [-1] * K)[:K]] for h, g in zip(base["ans"], ds.gold)])
    out["oracle"] = {"+".join(p): pair_oracle(sig, p, gold3) for p in (("cos", "lex"), ("docrel", "lex"))}
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def row(name: str, r: str, m: dict[str, Any], th: Any) -> str:
    lo, hi = m["answerable_silenced_ci"]
    llo, lhi = m["answerable_lost_ci"]
    olo, ohi = m["offtopic_silent_ci"]
    th_s = "-" if not th else ", ".join(f"{s} {v:.3f}" for s, v in th.items() if v is not None)
    return (f"| {name} | {r} | {th_s} | {pct(m['R@3'])} | {pct(m['P@3'])} | {pct(m['answerable_silenced'])} "
            f"[{pct(lo)}, {pct(hi)}] | {pct(m['answerable_lost'])} [{pct(llo)}, {pct(lhi)}] | "
            f"{pct(m['offtopic_silent'])} [{pct(olo)}, {pct(ohi)}] of {m['n_offtopic']} | {'yes' if m['pass'] else 'no'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(FIT + CONFIRM))
    ap.add_argument("--int8-tasks", nargs="*", default=[], metavar="NAME",
                    help="datasets whose tasks the int8 transformer encodes (the cascade's fallback) instead of "
                         "the cascade (no lookup table to fit)")
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "abstention_second_signal.json"))
    args = ap.parse_args()
    enc = load_encoder()
    path = Path(args.out)
    out: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    for name in args.datasets:
        out[name] = run(name, enc, name in args.int8_tasks)
        for r in RULES:
            print(row(name, r, out[name][r], out[name]["thresholds"].get(r)), flush=True)
        for p, o in out[name]["oracle"].items():
            print(f"{name} oracle {p} (labels): fewest answerable silenced {pct(o['min_silenced'])} %, "
                  f"fewest with a gold hit lost {pct(o['min_lost'])} % at >= 95 % off-topic silent", flush=True)
        path.write_text(json.dumps(out, indent=1, default=float) + "\n", encoding="utf-8")

    if all(n in out for n in FIT):
        fit_pass = [a for a in ARMS if all(out[n][a]["pass"] for n in FIT)]
        chosen = min(fit_pass, key=lambda a: max(out[n][a]["answerable_silenced"] for n in FIT)) if fit_pass else None
        out["fit_choice"] = chosen
        if all(n in out for n in CONFIRM):
            out["adopted"] = chosen if chosen and all(out[n][chosen]["pass"] for n in CONFIRM) else None
        print(f"passing every fit set: {fit_pass or 'none'}; adopted: {out.get('adopted')}")
        path.write_text(json.dumps(out, indent=1, default=float) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
