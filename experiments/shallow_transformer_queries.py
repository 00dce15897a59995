"""Question: can a shallow transformer task encoder (the first one or two layers of MiniLM, int8, with or
without a linear map fitted on the library's own texts to the full transformer's task vectors) match
fp32 transformer tasks closely enough to become the default query encoder, or give a better speed/accuracy
trade than today's tiers (int8 transformer, the lookup tiers static-mapped / contextual / fitted)?

Anchor: a 2-layer BERT query encoder paired with a full document encoder keeps 92.5% of the full
model's quality (arXiv 2306.11550). Issue 29, item 4. Declared before running.

Graphs (no torch, nothing downloaded): ``build_bert_onnx`` (skillsight_fast/models/export.py) is called on
the packaged all-MiniLM-L6-v2 ``config.json`` with ``num_hidden_layers`` set to 1 or 2 and the packaged
``model.safetensors`` weights, so the graph holds the embeddings and ``encoder.layer.0`` (and ``.1``)
exactly as the full export does (same tokenizer, 256-token budget, output = the hidden state after the
last kept layer, no extra LayerNorm, as BERT has none); then ``quantize_onnx_int8`` (dynamic, per-channel
int8 weights of every constant-weight MatMul: how the default ``model.int8.onnx`` is made). The task
vector is the mean over the real tokens of that state, L2-normalised (``OnnxEncoder``).

Arms (each searched by the default skillsight index over fp32 skill vectors, ``IndexConfig()``; every
task of every dataset; reference: fp32 transformer tasks):
  - ``transformer-int8``: today's default task encoder (orientation);
  - ``L1-int8``, ``L2-int8``: the shallow graph's normalised mean-pooled vector used as the task vector
    as is (a: raw);
  - ``L1-int8+map``, ``L2-int8+map``: (b) that vector x followed by an affine map W fitted in closed form
    (ridge, NumPy): min_W (1/n) sum |[x 1] W - t|^2 + lam |W_x|^2 (bias not penalised), t the fp32
    transformer's unit vector of the same text. The map's output is the task vector, NOT re-normalised:
    the index removes the background (q_perp = P q, P = I - B B^T) and, ridge being linear in the
    targets, P [x 1] W(t) = [x 1] W(P t): the scored part of the output IS the ridge fit to the
    background-removed teacher vector, with the teacher's scale (the fusion reads the dense score's
    scale); the background part, fitted too, only feeds the hits' raw cosines;
  - ``L1-int8+map-norm``, ``L2-int8+map-norm``: the same output L2-normalised (diagnostic: no other cost).
  Training texts, never a task: per skill ``training_pieces`` (description, when_to_use, two examples,
  triggers, up to three two-sentence body windows, the ``task_template`` question), plus each skill's
  name + description and whole text (the texts whose fp32 vectors the index already holds); teacher =
  the fp32 transformer. lam: one value per depth, the same for every dataset, picked from
  {1e-5, 1e-4, 1e-3, 1e-2} by the held-out error |P (y_hat - t)|^2 summed over the three fit sets'
  library texts, 5 folds split by skill (no task text involved), before any R@10 is computed.

Measured: R@10 and nDCG@10, paired bootstrap 95% intervals of the difference to fp32 transformer tasks
(``bootstrap_diff``, 2,000 resamples, seed 0) on skillsbench, sra_theoremqa, bfcl (fit sets), metatool
(its 2,000-query subset) and gorilla_hf. Speed, one thread, arms interleaved in one process, medians, load
average recorded before and after each block: encode p50 of short tasks (fit-set tasks under 20 tokens, 10
per set) and long tasks (the 73 skillsbench tasks, median 256 tokens), 3 rounds; end-to-end p50
(``SkillIndex.search`` of one task, k = 10, exact scan) on the skillsbench index (3,434 skills) and on the
bench's 26,000-skill corpus (``benchmark.synthetic.scale_up`` of it, seed 0, as ``skillsight bench``
makes it), long tasks, against the transformer (fp32, int8) and the lookup tiers (static-mapped,
contextual; the fitted tier searches with the contextual tier's encoder on a table of the same shape, so
its speed is contextual's). The existing lookup tiers' accuracy is results/experiments/fitted_query_table.json (same
reference vectors, same index, same bootstrap).

Adoption rule (issue 29): the best arm becomes the default task encoder only if its mean R@10 loss
against fp32 transformer tasks is <= 1 point over the fit sets AND <= 3 points on every shared dataset.
Otherwise it is offered as a tier (``--query-encoder shallow``) only if it is clearly a better
speed/accuracy trade than the existing tiers: (i) its mean R@10 loss over the fit sets is at least 1 point
below the fitted tier's (4.9, the most accurate lookup tier) and on no shared dataset larger than the
fitted tier's, and (ii) its end-to-end p50 at 26,000 skills (long tasks, one thread) is at most half of
the int8 transformer's (today's default), measured in the same run. Else it is dropped and documented.

Result (23:10-23:33 UTC, 4 Dec 2026, branch shallow-arm at 755e7b7, load 6-12 from other jobs;
results/experiments/shallow_transformer_queries.json and .txt; docs/ENCODERS.md, "A shallow transformer as the task
encoder"). lam: 1e-5 for both depths (held-out |P(y - t)|^2 summed over the fit sets 1.230 / 1.248 / 1.487 /
1.991 for L1 at 1e-5 / 1e-4 / 1e-3 / 1e-2; L2 1.214 / 1.236 / 1.477 / 1.981; a post-hoc check (``--posthoc``) at 1e-6
and 1e-7 gave higher held-out errors: 1e-5 is an interior optimum; R@10 there moves by -0.9 to +1.2 on
skillsbench and sra_theoremqa, nowhere near the gap). R@10 / nDCG@10 in %, in brackets the R@10
difference to fp32 transformer tasks with its paired bootstrap 95% interval; metatool on its 2,000-query
subset; rows marked 1 are results/experiments/fitted_query_table.json (main at ce68afb; same index, same reference
vectors on the fit sets; the reference moved by 0.05 on metatool and 0.24 on gorilla_hf since):

| task encoder | skillsbench | sra_theoremqa | bfcl | metatool | gorilla_hf | mean loss, fit sets |
|---|---:|---:|---:|---:|---:|---:|
| transformer (fp32) | 82.1 / 77.7 | 80.9 / 66.6 | 91.2 / 77.4 | 82.0 / 67.0 | 43.9 / 28.2 | 0 |
| transformer-int8 (default) | 82.1 / 78.0 (+0.0 [+0.0, +0.0]) | 80.9 / 66.4 (+0.0 [-0.5, +0.5]) | 91.4 / 77.3 (+0.1 [-0.2, +0.5]) | 81.5 / 66.8 (-0.4 [-0.8, -0.1]) | 44.0 / 28.0 (+0.1 [-1.0, +1.2]) | 0.0 |
| L1-int8 | 29.0 / 28.0 (-53.1 [-61.6, -44.5]) | 31.7 / 20.3 (-49.1 [-52.9, -45.4]) | 62.1 / 48.1 (-29.2 [-31.0, -27.4]) | 58.8 / 44.8 (-23.2 [-25.4, -21.1]) | 18.0 / 11.8 (-25.9 [-29.4, -22.8]) | 43.8 |
| L1-int8+map | 72.1 / 68.2 (-10.1 [-15.7, -5.2]) | 62.8 / 46.5 (-18.1 [-21.0, -15.1]) | 88.3 / 74.4 (-3.0 [-4.0, -1.9]) | 70.4 / 54.7 (-11.5 [-13.4, -9.8]) | 31.9 / 20.4 (-12.0 [-14.6, -9.4]) | 10.4 |
| L2-int8 | 39.4 / 34.3 (-42.8 [-51.6, -34.3]) | 36.1 / 24.1 (-44.7 [-48.3, -41.1]) | 67.7 / 52.9 (-23.6 [-25.2, -21.8]) | 61.9 / 47.1 (-20.1 [-22.2, -18.1]) | 20.4 / 12.9 (-23.5 [-26.6, -20.5]) | 37.0 |
| L2-int8+map | 72.0 / 65.0 (-10.1 [-15.4, -5.6]) | 64.1 / 47.0 (-16.7 [-19.7, -13.8]) | 87.2 / 73.5 (-4.1 [-5.2, -3.0]) | 69.7 / 54.2 (-12.2 [-14.1, -10.5]) | 32.5 / 20.5 (-11.4 [-14.3, -8.6]) | 10.3 |
| static-mapped 1 | 74.1 / 70.4 (-8.0) | 71.8 / 54.7 (-9.1) | 88.5 / 74.0 (-2.7) | 69.3 / 51.9 (-12.6) | 21.7 / 13.3 (-22.4) | 6.6 |
| contextual 1 | 75.3 / 70.1 (-6.9) | 68.9 / 53.5 (-11.9) | 90.9 / 76.3 (-0.4) | 61.9 / 49.0 (-20.0) | 29.4 / 19.0 (-14.7) | 6.4 |
| fitted 1 | 77.9 / 73.9 (-4.2) | 70.1 / 56.2 (-10.7) | 91.4 / 77.6 (+0.1) | 65.6 / 52.4 (-16.2) | 37.2 / 24.1 (-7.0) | 4.9 |

The ``+map-norm`` arms give exactly the ``+map`` rankings on every dataset: the default fusion (eq15) adds
the standardised lexical term scaled by the dense scores' own spread, so a per-task scale of the vector
never changes the order.

Speed, one thread, ms p50 (CPU "AMD EPYC", onnxruntime 1.32.0; load 7.1 during encode, 6.1-7.1 during
end to end; 20 short tasks x 3 rounds, 73 long tasks x 3 rounds, 146 end-to-end searches per arm and size):

| task encoder | encode short | encode long | end to end, 3,434 | end to end, 26,000 |
|---|---:|---:|---:|---:|
| transformer (fp32) | 5.54 | 39.9 | 33.6 | 43.5 |
| transformer-int8 (default) | 1.80 | 23.9 | 21.0 | 28.4 |
| L1-int8+map | 0.38 | 4.37 | 5.20 | 7.76 |
| L2-int8+map | 0.59 | 8.40 | 8.71 | 12.6 |
| static-mapped | 0.13 | 0.52 | 1.06 | 2.48 |
| contextual (fitted: same encoder and table shape) | 0.05 | 0.19 | 0.73 | 2.28 |

Verdict under the declared rule: neither depth becomes the default (mean loss over the fit sets 10.4 / 10.3,
not <= 1; more than 3 on every dataset but L1's bfcl, 2.95). Neither is offered as a tier: the speed half
holds (end to end at 26,000 skills 7.76 / 12.6 ms, 0.27x / 0.44x of the int8 transformer's 28.4 ms) but the
accuracy half fails (10.3-10.4 is not 1 point below fitted's 4.9; it is worse than every lookup tier's fit-set
mean, and on gorilla_hf worse than fitted's -7.0). Every lookup tier is both faster (3-6x end to end at
26,000) and more accurate on the fit-set mean: the shallow arms are dominated. Dropped, not wired.

Why: the map is linear and the pooling is a mean, so ``[mean_t h_t 1] W = mean_t (h_t W_x) + b``: the arm is
a per-token table of layer-1/2 states with ONE shared 384x384 map, whereas the fitted tier fits every
token's row freely. The map explains half of the teacher's scored energy on the library's own texts (training
error |P(y - t)|^2 0.40 against |P t|^2 0.82 on skillsbench; held-out 0.43; the same map from the full int8
model's vectors: held-out 0.011, so the pipeline is sound) and less on tasks (median cosine of the mapped
task to its fp32 vector 0.63 on skillsbench, 0.47 on sra_theoremqa, 0.40 on metatool). The second layer
adds almost nothing over the first (held-out 1.214 vs 1.230). The one place the arm helps is metatool
(-11.5, better than every lookup tier: -12.6 to -20.0), whose 199-tool library leaves the tables many
unseen task tokens; the transformer's own word-piece embeddings cover them.

Run: python experiments/shallow_transformer_queries.py [--json results/experiments/shallow_transformer_queries.json]
     [--skip-accuracy] [--skip-timing] [--datasets NAME ...]
     python experiments/shallow_transformer_queries.py --posthoc --json results/experiments/shallow_transformer_queries.json
"""

# ruff: noqa: B023  (the per-dataset helper is a closure used only within its own loop iteration)
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.files import atomic_write_bytes
from skillsight_fast.lab.evaluation.cache import EmbeddingCache
from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.library.skills import namedesc_text
from skillsight_fast.metrics import DEPTH, bootstrap_diff, per_query
from skillsight_fast.models import cache_root, load_encoder
from skillsight_fast.models.encoder import OnnxEncoder
from skillsight_fast.models.export import (
    build_bert_onnx,
    load_bert_weights,
    quantize_onnx_int8,
    read_bert_config,
)
from skillsight_fast.models.fitted import training_pieces
from skillsight_fast.models.registry import DEFAULT_MODEL, find_model_dir, get_spec

DATA_ROOT = Path(__file__).parents[1] / "data"
LAYERS = (1, 2)
LAMBDAS = (1e-5, 1e-4, 1e-3, 1e-2)
FOLDS = 5
SHORT_TOKENS = 20
METRICS = ("recall@10", "ndcg@10")


# ---------------------------------------------------------------------------------------------- graphs
def shallow_graph(layers: int) -> Path:
    """The int8 graph of MiniLM's first ``layers`` layers, built once from the packaged weights."""
    spec = get_spec(DEFAULT_MODEL)
    assert spec is not None
    folder = cache_root() / "experiments" / f"shallow-{spec.name}-{spec.sha256[:12]}"
    fp32, int8 = folder / f"model.L{layers}.onnx", folder / f"model.L{layers}.int8.onnx"
    if int8.is_file():
        return int8
    import onnx

    model_dir = find_model_dir(spec.name)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "tokenizer.json").is_file():
        shutil.copyfile(model_dir / "tokenizer.json", folder / "tokenizer.json")
    cfg = dict(read_bert_config(model_dir), num_hidden_layers=layers)
    model = build_bert_onnx(cfg, load_bert_weights(model_dir),
                            metadata={"skillsight.source_sha256": spec.sha256, "skillsight.layers": str(layers)})
    onnx.checker.check_model(model)
    atomic_write_bytes(fp32, model.SerializeToString())
    quantize_onnx_int8(fp32, int8)
    return int8


def shallow_encoder(layers: int, threads: int | None) -> OnnxEncoder:
    spec = get_spec(DEFAULT_MODEL)
    assert spec is not None
    path = shallow_graph(layers)
    return OnnxEncoder(path, path.parent / "tokenizer.json", model_id=f"{spec.name}-L{layers}-int8",
                       checksum=spec.sha256, max_length=spec.max_length, threads=threads)


class MappedEncoder:
    """A shallow encoder followed by the affine map (``normalise``: L2-normalise the output)."""

    def __init__(self, base: OnnxEncoder, w: np.ndarray, normalise: bool = False) -> None:
        self.base, self.w, self.normalise = base, w.astype(np.float32), normalise
        self.model_id, self.checksum, self.dim = base.model_id, base.checksum, int(w.shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        y = apply_map(self.base.encode(texts), self.w)
        if self.normalise:
            y /= np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
        return y


# -------------------------------------------------------------------------------------------------- map
def fit_map(x: np.ndarray, t: np.ndarray, lam: float) -> np.ndarray:
    """(d_x + 1, d_t) float64: min (1/n) |[x 1] W - t|^2 + lam |W[:-1]|^2 (closed form)."""
    x = np.asarray(x, np.float64)
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    a = xb.T @ xb / n
    a[:d, :d] += lam * np.eye(d)
    return np.linalg.solve(a, xb.T @ np.asarray(t, np.float64) / n)


def apply_map(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, np.float32) @ w[:-1].astype(np.float32) + w[-1].astype(np.float32))


def heldout_error(x: np.ndarray, t: np.ndarray, owner: np.ndarray, basis: np.ndarray, lam: float) -> float:
    """Mean |P (y_hat - t)|^2 of texts predicted by a map fitted without their skill's texts."""
    rng = np.random.default_rng(0)
    fold_of_skill = rng.permutation(int(owner.max()) + 1) % FOLDS
    fold = fold_of_skill[owner]
    err = np.zeros(len(t))
    for f in range(FOLDS):
        test = fold == f
        w = fit_map(x[~test], t[~test], lam)
        d = apply_map(x[test], w) - t[test]
        d = d - (d @ basis.T) @ basis
        err[test] = np.sum(d * d, axis=1)
    return float(err.mean())


# ---------------------------------------------------------------------------------------------- data
class Library:
    """One dataset: its default index, the fp32 teacher and each shallow encoder's vectors (cached)."""

    def __init__(self, name: str, enc: OnnxEncoder, shallow: dict[int, OnnxEncoder]) -> None:
        self.name = name
        self.ds = load_dataset(DATA_ROOT / name)
        self.ctx = EvalContext(self.ds, query_int8=False, encoder=enc)
        self.index = self.ctx.index(IndexConfig())
        self.basis = self.index.dense.basis
        pieces, owner = training_pieces(self.ds.docs)
        n = len(self.ds.docs)
        self.nd = [namedesc_text(d.name, d.description) for d in self.ds.docs]
        self.pieces = pieces
        self.owner = np.concatenate([owner, np.arange(n), np.arange(n)])
        cache = self.ctx.cache
        piece_t = EmbeddingCache(cache, enc.model_id, enc.checksum, "fitpiece").get(pieces, enc.encode)
        self.targets = np.vstack([piece_t, self.ctx.namedesc_emb, self.ctx.doc_emb]).astype(np.float32)
        self.shallow = shallow

    def features(self, layers: int) -> np.ndarray:
        e = self.shallow[layers]
        def get(kind, texts):
            return EmbeddingCache(self.ctx.cache, e.model_id, e.checksum, kind).get(list(texts), e.encode)

        return np.vstack([get("fitpiece", self.pieces), get("namedesc", self.nd), get("doc", self.ds.texts)])

    def task_features(self, layers: int) -> np.ndarray:
        e = self.shallow[layers]
        return EmbeddingCache(self.ctx.cache, e.model_id, e.checksum, "query").get(list(self.ds.query_texts), e.encode)


def choose_lambdas(libs: dict[str, Library], out: dict) -> dict[int, float]:
    chosen: dict[int, float] = {}
    for layers in LAYERS:
        errs = {lam: 0.0 for lam in LAMBDAS}
        per: dict[str, dict[str, float]] = {}
        for name in FIT_DATASETS:
            lib = libs[name]
            x = lib.features(layers)
            per[name] = {}
            for lam in LAMBDAS:
                e = heldout_error(x, lib.targets, lib.owner, lib.basis, lam)
                per[name][str(lam)] = round(e, 5)
                errs[lam] += e
        chosen[layers] = min(LAMBDAS, key=lambda lam: errs[lam])
        out[f"L{layers}"] = {"heldout_error": per, "sum": {str(k): round(v, 5) for k, v in errs.items()},
                             "lambda": chosen[layers]}
        print(f"L{layers}: held-out |P(y - t)|^2 by lambda {json.dumps(out[f'L{layers}']['sum'])} -> "
              f"lambda {chosen[layers]}", flush=True)
    return chosen


# ------------------------------------------------------------------------------------------ accuracy
def accuracy(names: list[str], libs: dict[str, Library], lambdas: dict[int, float], n_boot: int) -> dict:
    result: dict[str, dict] = {}
    for name in names:
        lib = libs[name]
        qtexts = list(lib.ds.query_texts)
        rows: dict[str, dict] = {}
        base: dict[str, np.ndarray] = {}

        def score(arm: str, qv: np.ndarray) -> None:
            per = per_query(lib.index.search_vectors(qv, qtexts, DEPTH, explain=False).ids, lib.ds.gold)
            row: dict[str, object] = {m: 100 * float(per[m].mean()) for m in METRICS}
            if not base:
                base.update(per)
            else:
                for m in METRICS:
                    row[f"{m}_diff"] = [100 * v for v in bootstrap_diff(per[m], base[m], n_boot=n_boot, seed=0)]
            rows[arm] = row
            d = row.get("recall@10_diff")
            print(f"{name:14s} {arm:18s} R@10 {row['recall@10']:5.1f} nDCG@10 {row['ndcg@10']:5.1f}"
                  + (f"  R@10 {d[0]:+.1f} [{d[1]:+.1f}, {d[2]:+.1f}]" if d else ""), flush=True)

        score("transformer", lib.ctx.query_emb)
        score("transformer-int8", lib.ctx.int8_query_emb)
        meta: dict[str, object] = {"n_train": len(lib.targets), "n_pieces": len(lib.pieces), "n_tasks": len(qtexts)}
        for layers in LAYERS:
            x, q = lib.features(layers), lib.task_features(layers)
            w = fit_map(x, lib.targets, lambdas[layers])
            y = apply_map(q, w)
            cos = np.sum(y * lib.ctx.query_emb, axis=1) / np.linalg.norm(y, axis=1)
            meta[f"L{layers}_task_cosine_to_fp32_median"] = round(float(np.median(cos)), 4)
            meta[f"L{layers}_task_norm_median"] = round(float(np.median(np.linalg.norm(y, axis=1))), 4)
            score(f"L{layers}-int8", q)
            score(f"L{layers}-int8+map", y)
            score(f"L{layers}-int8+map-norm", y / np.linalg.norm(y, axis=1, keepdims=True))
        rows["_meta"] = meta
        result[name] = rows
    return result


# ------------------------------------------------------------------------------------------ post hoc
def posthoc(libs: dict[str, Library]) -> dict:
    """After the run (not part of the rule): lam below the grid, the scored energy the map explains, and the
    pipeline check (the same map from the full int8 model's vectors of the pieces, cached)."""
    enc8 = load_encoder(int8=True)
    out: dict[str, dict] = {}
    for name in ("skillsbench", "sra_theoremqa"):
        lib = libs[name]
        n = len(lib.pieces)

        def proj(d: np.ndarray) -> np.ndarray:
            return d - (d @ lib.basis.T) @ lib.basis

        pt = proj(lib.targets)
        row: dict[str, object] = {"target_scored_energy": round(float(np.mean(np.sum(pt * pt, 1))), 4)}
        x8 = EmbeddingCache(lib.ctx.cache, f"{enc8.model_id}-int8", enc8.checksum, "fitpiece").get(lib.pieces, enc8.encode)
        row["full_int8_pieces_heldout"] = round(heldout_error(x8, lib.targets[:n], lib.owner[:n], lib.basis, 1e-5), 4)
        for layers in LAYERS:
            x, q = lib.features(layers), lib.task_features(layers)
            for lam in (1e-7, 1e-6, 1e-5):
                w = fit_map(x, lib.targets, lam)
                d = proj(apply_map(x, w) - lib.targets)
                ranked = lib.index.search_vectors(apply_map(q, w), list(lib.ds.query_texts), DEPTH, explain=False).ids
                row[f"L{layers}_lam{lam:g}"] = {
                    "train": round(float(np.mean(np.sum(d * d, 1))), 4),
                    "heldout": round(heldout_error(x, lib.targets, lib.owner, lib.basis, lam), 4),
                    "recall@10": round(100 * float(per_query(ranked, lib.ds.gold)["recall@10"].mean()), 1)}
        out[name] = row
        print(name, json.dumps(row), flush=True)
    return out


# -------------------------------------------------------------------------------------------- timing
def timing(libs: dict[str, Library], lambdas: dict[int, float], rounds: int, reps: int) -> dict:
    from skillsight_fast import SkillIndex
    from skillsight_fast.lab.benchmark.driver import tier_views
    from skillsight_fast.lab.benchmark.runner import cpu_name
    from skillsight_fast.lab.benchmark.synthetic import scale_up
    from skillsight_fast.models.distill import resolve_static_model
    from skillsight_fast.models.static import fit_query_map, load_static_encoder

    lib = libs["skillsbench"]
    enc = load_encoder(threads=1)
    enc8 = load_encoder(threads=1, int8=True)
    static = load_static_encoder(resolve_static_model(None, enc.model_id, teacher=enc))
    shallow = {layers: shallow_encoder(layers, threads=1) for layers in LAYERS}
    maps = {layers: fit_map(lib.features(layers), lib.targets, lambdas[layers]) for layers in LAYERS}
    mapped = {layers: MappedEncoder(shallow[layers], maps[layers]) for layers in LAYERS}
    long_tasks = list(lib.ds.query_texts)
    short_tasks: list[str] = []
    for name in FIT_DATASETS:
        texts = list(libs[name].ds.query_texts)
        short_tasks += [t for t, ids in zip(texts, enc.tokenize(texts)) if len(ids) < SHORT_TOKENS][:10]
    out: dict[str, object] = {"cpu": cpu_name(), "onnxruntime": __import__("onnxruntime").__version__, "threads": 1,
                              "short_tasks": len(short_tasks), "long_tasks": len(long_tasks),
                              "long_tokens_median": float(np.median([len(x) for x in enc.tokenize(long_tasks)]))}

    def views_of(index) -> dict[str, object]:
        st = index.state
        index.state = dataclasses.replace(st, config=st.config.replace(query_int8=False))
        index.encoders.reset_query()
        index.encoders.attach(enc, check=False)
        doc_texts = list(lib.ds.texts)
        s_docs = EmbeddingCache(cache_root(), static.model_id, static.checksum, "doc").get(doc_texts, static.encode)
        qmap = fit_query_map(s_docs, lib.index.dense.embeddings)
        v = {"transformer": index}
        v |= {k: x for k, x in tier_views(index, static, qmap, enc8, lib.ctx.contextual_table).items() if k != "static"}
        st = index.state
        for layers in LAYERS:
            v[f"L{layers}-int8+map"] = SkillIndex(dataclasses.replace(st, config=st.config.replace(query_int8=True)),
                                                  enc, mapped[layers])
        return v

    base_views = views_of(lib.index)
    # encode p50: short and long tasks, every arm interleaved
    encoders = {"transformer": enc.encode, "transformer-int8": enc8.encode,
                **{f"L{k}-int8": shallow[k].encode for k in LAYERS}, **{f"L{k}-int8+map": mapped[k].encode for k in LAYERS},
                "static-mapped": base_views["static-mapped"].encode, "contextual": base_views["contextual"].encode}
    for label, tasks in (("short", short_tasks), ("long", long_tasks)):
        load0 = os.getloadavg()
        times: dict[str, list[float]] = {a: [] for a in encoders}
        for f in encoders.values():
            f(tasks[:2])
        for _ in range(rounds):
            for text in tasks:
                for arm, f in encoders.items():
                    t0 = time.perf_counter()
                    f([text])
                    times[arm].append(time.perf_counter() - t0)
        out[f"encode_{label}"] = {a: round(1000 * float(np.median(v)), 3) for a, v in times.items()}
        out[f"encode_{label}_load"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
        print(f"encode p50 {label} ({len(tasks)} x {rounds}), load {out[f'encode_{label}_load']}: "
              + ", ".join(f"{a} {v:.3f} ms" for a, v in out[f"encode_{label}"].items()), flush=True)  # type: ignore[union-attr]
    # end to end p50 at 3,434 and 26,000 skills, long tasks
    for n in (len(lib.index), 26_000):
        if n == len(lib.index):
            views = base_views
        else:
            big, _ = scale_up(lib.index, n, seed=0)
            views = views_of(big)
        load0 = os.getloadavg()
        times = {a: [] for a in views}
        for v in views.values():
            v.search([long_tasks[0]], 10)
        for r in range(reps):
            text = long_tasks[r % len(long_tasks)]
            for arm, v in views.items():
                t0 = time.perf_counter()
                v.search([text], 10)
                times[arm].append(time.perf_counter() - t0)
        out[f"end_to_end_{n}"] = {a: round(1000 * float(np.median(v)), 3) for a, v in times.items()}
        out[f"end_to_end_{n}_load"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
        print(f"end to end p50 at {n} skills ({reps} long tasks), load {out[f'end_to_end_{n}_load']}: "
              + ", ".join(f"{a} {v:.3f} ms" for a, v in out[f"end_to_end_{n}"].items()), flush=True)  # type: ignore[union-attr]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--datasets", nargs="+", default=list(SHARED_DATASETS))
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3, help="encode timing rounds over the tasks")
    ap.add_argument("--reps", type=int, default=146, help="end-to-end timed searches per arm and size")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--posthoc", action="store_true", help="only the post-hoc checks (skillsbench, sra_theoremqa)")
    args = ap.parse_args()
    out: dict = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).is_file() else {}
    enc = load_encoder()
    shallow = {layers: shallow_encoder(layers, threads=None) for layers in LAYERS}
    names = list(dict.fromkeys([*FIT_DATASETS, *args.datasets]))
    if args.posthoc:
        out["posthoc"] = posthoc({n: Library(n, enc, shallow) for n in ("skillsbench", "sra_theoremqa")})
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
        return
    libs: dict[str, Library] = {}
    for name in names:
        t0 = time.perf_counter()
        libs[name] = Library(name, enc, shallow)
        for layers in LAYERS:
            libs[name].features(layers)
            libs[name].task_features(layers)
        print(f"{name}: {len(libs[name].targets)} training texts, vectors ready in {time.perf_counter() - t0:.0f} s",
              flush=True)
    out["lambda"] = {}
    lambdas = choose_lambdas(libs, out["lambda"])

    def save() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")

    save()
    if not args.skip_accuracy:
        out["accuracy"] = {**out.get("accuracy", {}), **accuracy(args.datasets, libs, lambdas, args.bootstrap)}
        save()
        acc = out["accuracy"]
        for arm in ["transformer-int8", *[f"L{k}-int8{s}" for k in LAYERS for s in ("", "+map", "+map-norm")]]:
            fit = [-acc[n][arm]["recall@10_diff"][0] for n in FIT_DATASETS if n in acc]
            every = {n: round(-acc[n][arm]["recall@10_diff"][0], 1) for n in acc}
            print(f"{arm}: mean R@10 loss over the fit sets {np.mean(fit):.2f}; per dataset {every}", flush=True)
    if not args.skip_timing:
        out["timing"] = timing(libs, lambdas, args.rounds, args.reps)
        save()


if __name__ == "__main__":
    main()
