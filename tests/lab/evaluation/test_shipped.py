"""``skillsight eval`` measures what ships: the config of the dataset's kind and the cascade's tasks."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

QUERIES = [
    ("q1", "merge pdf pages and extract tables", ["pdf-tools"]),
    ("q2", "dedupe csv rows with pandas", ["csv-clean"]),
    ("q3", "build a docker image and deploy with compose", ["docker-deploy"]),
]


def _dataset(tmp_path, monkeypatch, kind):
    folder = tmp_path / f"tiny-{kind}"
    folder.mkdir()
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as fh:
        for s in toy_skills(n_extra=20, seed=1):
            fh.write(json.dumps({"id": s.id, "name": s.name, "description": s.description,
                                 "body": s.body}) + "\n")
    with gzip.open(folder / "queries.jsonl.gz", "wt", encoding="utf-8") as fh:
        for i, t, g in QUERIES:
            fh.write(json.dumps({"id": i, "text": t, "gold": g}) + "\n")
    (folder / "meta.json").write_text(json.dumps({"name": f"tiny-{kind}", "kind": kind, "distractors": None}))
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(tmp_path / "cache"))
    enc = HashEncoder(dim=64)
    from skillsight_fast.lab.evaluation import methods

    monkeypatch.setattr(methods, "load_encoder", lambda *a, **k: enc)
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    return load_dataset(folder)


@pytest.mark.parametrize("kind, evidence", [("tools", "all"), ("apis", "all"), ("skills", "masked")])
def test_skillsight_uses_the_config_of_the_datasets_kind(tmp_path, monkeypatch, kind, evidence):
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext, shipped_config

    ds = _dataset(tmp_path, monkeypatch, kind)
    assert shipped_config(ds).settled(can_fit=False).scoring.lexical_evidence == evidence
    ctx = EvalContext(ds)
    ranked = METHODS["skillsight"](ctx)
    assert ctx.notes["adaptive"]["decisions"]["lexical_evidence"] == evidence
    assert ctx.notes["measured"].startswith("as shipped")
    # the ranking is the shipped index's own search over the shipped task vectors
    index = ctx.index(shipped_config(ds))
    again = index.search_vectors(ctx.shipped_vectors(index), ds.query_texts, ranked.shape[1],
                                 explain=False).ids
    assert np.array_equal(ranked, again)


def test_shipped_false_keeps_the_former_measurement(tmp_path, monkeypatch):
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext

    ds = _dataset(tmp_path, monkeypatch, "tools")
    ctx = EvalContext(ds, shipped=False)
    ranked = METHODS["skillsight"](ctx)
    assert ctx.notes["adaptive"]["decisions"]["lexical_evidence"] == "masked"
    index = ctx.index(IndexConfig())
    assert np.array_equal(ranked, ctx.search(index))


def test_a_fake_encoder_settles_on_the_transformer(tmp_path, monkeypatch):
    """Without an ONNX graph a build cannot fit the lookup table: the cascade is the transformer."""
    from skillsight_fast.lab.evaluation.methods import EvalContext, shipped_config

    ds = _dataset(tmp_path, monkeypatch, "skills")
    ctx = EvalContext(ds)
    index = ctx.index(shipped_config(ds))
    assert np.array_equal(ctx.shipped_vectors(index), ctx.task_vectors(index.config))
    assert ctx.notes["cascade"]["lookup_answers"] == 0.0


def test_recall_curve_and_the_depths_where_it_loses():
    from skillsight_fast.lab.evaluation.tool_search import curve_losses, depth_metrics, recall_curve

    ranked = np.full((2, 50), -1, np.int64)
    ranked[0, [0, 4]] = [1, 2]  # task 0: its two tools at ranks 1 and 5
    ranked[1, 2] = 5  # task 1: its tool at rank 3
    gold = [frozenset({1, 2}), frozenset({5})]
    curve = recall_curve(ranked, gold)
    assert curve.shape == (2, 50)
    assert curve[0, :5].tolist() == [0.5, 0.5, 0.5, 0.5, 1.0] and curve[1, :3].tolist() == [0.0, 0.0, 1.0]
    m = depth_metrics(ranked, gold)
    assert m["R@3"].tolist() == [0.5, 1.0] and m["C@3"].tolist() == [0.0, 1.0]
    assert m["C@50"].tolist() == [1.0, 1.0]
    rng = np.random.default_rng(0)
    good = (rng.random((300, 50)) < 0.8).astype(float)
    worse = good.copy()
    worse[:, 20:] = 0.0  # loses from depth 21 on
    assert curve_losses(worse, good, n_boot=300) == list(range(21, 51))
    assert curve_losses(good, good, n_boot=300) == []
