"""Does a server-level signal bring the tools of one server (API family) up together?

Question
    An agent's task often needs several tools of one MCP server. MCP-Zero routes to a server first,
    then to its tools. Does adding a server-level score to the default tool score raise R@k and
    Completeness@k on catalogues whose tools come grouped by server?

Servers (none of the datasets has an MCP server field; derived honestly, nothing else)
    bfcl: the dotted prefix of a function name (``math.factorial`` -> ``math``,
    ``project_api.ProjectApi.get_project`` -> ``project_api.ProjectApi``); a name without a dot is
    its own one-tool server. This gives 1,220 servers for 1,437 functions (106 with several tools)
    and 38 of the 207 multi-tool tasks have all their tools in one server: a weak grouping.
    gorilla_hf: the API record's ``domain`` (40 task families, e.g. "Computer Vision Image
    Classification"), as a server groups tools by function. metatool: each tool is a ChatGPT
    plugin, i.e. its own server; the server signal is the tool signal, so it is not measured there.
    Skill corpora have no servers: the signal does not apply to them (they cannot change).

Variants (declared before the run; over the default index's candidate set and Eq. 15 score S)
    ``eq15``            the default (reference).
    ``server-text``     S + [z(c)]₊·σ(S), z and σ over the candidate set, c = cosine of the task
                        with the server's text (its name, then its tools' names, split on ``_``,
                        ``-``, ``.`` and camelCase), the same all-MiniLM-L6-v2 vectors.
    ``server-max``      S + [z(m)]₊·σ(S), m = the best S among the candidates of the tool's server
                        (a server is as good as its best tool; its other tools come with it).
    The weight 1 is Eq. 15's default lexical weight; nothing is fitted.

Adoption rule (declared before the run)
    A variant is adopted for tool catalogues with servers only if on bfcl (fit) it is not
    significantly worse than ``eq15`` on R@10, nDCG@10, R@50 and Completeness@10 (paired bootstrap
    95 %, 2,000 resamples, seed 0) and significantly better on at least one of them, and on
    gorilla_hf (confirm) it is not significantly worse than ``eq15`` on the same four. Of two that
    pass, the one with the higher bfcl Completeness@10. Results grouped by server in the proxy's
    ``search_tools`` are a presentation of the ranking and are built either way.

Result (results/experiments/tool_server_signal.json): not adopted.
    bfcl (fit): both variants are significantly worse than eq15 — server-text R@10 -1.3 [-2.1,
    -0.7], nDCG@10 -3.3 [-4.0, -2.7], C@10 -1.4 [-2.2, -0.6]; server-max R@10 -0.8 [-1.2, -0.4],
    nDCG@10 -0.4 [-0.5, -0.2], R@50 -0.2 [-0.4, -0.0], C@10 -0.8 [-1.2, -0.4]. The derived servers
    of bfcl are weak (1,220 for 1,437 tools), so a server boost mostly lifts a gold tool's
    unrelated same-prefix neighbours. gorilla_hf (40 task families as servers) shows what a real
    grouping can do at depth: server-max R@50 +4.4 [+2.5, +6.4], server-text +3.2 [+1.6, +5.0],
    R@10 +0.7 [-1.0, +2.3] / -0.6 [-2.4, +1.2] (not resolved). Measured only where servers could
    be derived; a catalogue of real MCP servers with multi-tool tasks is what would decide it.

Run
    PYTHONPATH=. python experiments/tool_server_signal.py [--out results/experiments/tool_server_signal.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.config import IndexConfig  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import Dataset, load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    DEPTH_METRICS,
    RULE_BASELINES,
    RULE_METRICS,
    depth_metrics,
    fmt_diff,
    not_worse,
    rule_check,
)
from skillsight_fast.metrics import DEPTH  # noqa: E402

VARIANTS = ("eq15", "server-text", "server-max")


def split_name(name: str) -> str:
    """``getCurrentWeather`` / ``get_current-weather.v2`` -> ``get current weather v2``."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", name)
    return " ".join(w for w in re.split(r"[\s_\-./:]+", name) if w)


def servers_of(ds: Dataset) -> list[str] | None:
    """The derived server of each document (see the module docstring), None without servers."""
    if ds.name == "bfcl":
        return [d.name.rsplit(".", 1)[0] if "." in d.name else d.name for d in ds.docs]
    if ds.name == "gorilla_hf":
        return [str(json.loads(d.body).get("domain", "")) for d in ds.docs]
    return None


def server_texts(ds: Dataset, servers: list[str]) -> tuple[list[str], np.ndarray]:
    """Unique server names, their texts, and the server row of each document."""
    names = list(dict.fromkeys(servers))
    row = {s: i for i, s in enumerate(names)}
    members: dict[str, list[str]] = {s: [] for s in names}
    for d, s in zip(ds.docs, servers):
        members[s].append(split_name(d.name.rsplit(".", 1)[-1] if ds.name == "bfcl" else d.name))
    texts = [f"{split_name(s)}\n" + ", ".join(members[s]) for s in names]
    return texts, np.array([row[s] for s in servers], np.int64)


def boosted(f: np.ndarray, signal: np.ndarray) -> np.ndarray:
    """f + [z(signal)]₊·σ(f) over one candidate row (float64)."""
    sd = signal.std()
    if sd <= 0:
        return f
    scale = f.std()
    return f + np.maximum((signal - signal.mean()) / sd, 0.0) * (scale if scale > 0 else 1.0)


def dataset_path(name: str) -> Path:
    for root in (ROOT / "data", Path("/work/shared/datasets")):
        if (root / name / "meta.json").is_file():
            return root / name
    raise SystemExit(f"dataset {name} not found")


def run(name: str) -> dict[str, dict[str, np.ndarray]]:
    from experiments.tool_depth_fusion import eq15, stage_arrays

    ds = load_dataset(dataset_path(name))
    servers = servers_of(ds)
    assert servers is not None
    ctx = EvalContext(dataset=ds)
    per = {b: depth_metrics(METHODS[b](ctx), ds.gold) for b in RULE_BASELINES}
    index = ctx.index(IndexConfig())
    cand, sd, sl = stage_arrays(ctx, index, 0)
    weight = index.decisions.lexical_weight
    texts, doc_server = server_texts(ds, servers)
    s_emb = ctx.embeddings("server", texts)
    q = ctx.task_vectors(index.config)
    srv_cos = q @ s_emb.T  # (n, n_servers)
    ranked = {v: np.full((cand.shape[0], DEPTH), -1, np.int64) for v in VARIANTS}
    for i in range(cand.shape[0]):
        cols = np.flatnonzero(cand[i] >= 0)
        docs = cand[i, cols]
        f = eq15(sd[i, cols].astype(np.float64), sl[i, cols].astype(np.float64), weight)
        srv = doc_server[docs]
        best = np.full(len(texts), -np.inf)
        np.maximum.at(best, srv, f)
        scores = {
            "eq15": f,
            "server-text": boosted(f, srv_cos[i, srv].astype(np.float64)),
            "server-max": boosted(f, best[srv]),
        }
        for v, s in scores.items():
            order = np.argsort(-s, kind="stable")[:DEPTH]
            ranked[v][i, : order.size] = docs[order]
    for v in VARIANTS:
        per[v] = depth_metrics(ranked[v], ds.gold)
    print(f"{name}: {len(texts)} servers;  " + "  ".join(f"{m:>8}" for m in DEPTH_METRICS))
    for meth, vals in per.items():
        print(f"  {meth:<12}" + "  ".join(f"{100 * vals[m].mean():8.1f}" for m in DEPTH_METRICS), flush=True)
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "tool_server_signal.json"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    res: dict[str, Any] = {}
    fit = run("bfcl")
    rec: dict[str, Any] = {}
    for v in VARIANTS[1:]:
        nw = not_worse(fit[v], fit["eq15"])
        better = any(nw[m]["low"] > 0 for m in RULE_METRICS)
        rec[v] = {
            "vs_eq15": nw,
            "better_somewhere": better,
            "pass_fit": nw["pass"] and better,
            "vs_best_baseline": rule_check(fit[v], {b: fit[b] for b in RULE_BASELINES}),
        }
        print(
            f"bfcl {v}: vs eq15 "
            + "  ".join(f"{m} {fmt_diff(nw[m])}" for m in RULE_METRICS)
            + f"  -> fit {'pass' if rec[v]['pass_fit'] else 'fail'}",
            flush=True,
        )
    conf = run("gorilla_hf")
    for v in VARIANTS[1:]:
        nw = not_worse(conf[v], conf["eq15"])
        rec[v]["confirm_vs_eq15"] = nw
        rec[v]["adopt"] = bool(rec[v]["pass_fit"] and nw["pass"])
        print(
            f"gorilla_hf {v}: vs eq15 " + "  ".join(f"{m} {fmt_diff(nw[m])}" for m in RULE_METRICS),
            flush=True,
        )
    passing = [v for v in VARIANTS[1:] if rec[v]["adopt"]]
    res["adopted"] = max(passing, key=lambda v: fit[v]["C@10"].mean()) if passing else None
    res["rule"] = rec
    res["means"] = {
        n: {meth: {m: float(x[m].mean()) for m in DEPTH_METRICS} for meth, x in per.items()}
        for n, per in (("bfcl", fit), ("gorilla_hf", conf))
    }
    print(f"adopted: {res['adopted']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
