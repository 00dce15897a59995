"""The fitted query table (skillsight_fast/models/fitted.py) against NumPy references."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from skillsight_fast.errors import ModelError
from skillsight_fast.models.fitted import (
    Bags,
    FitConfig,
    bags_of_slots,
    batch_loss,
    encode_bags,
    fit_query_table,
    task_template,
    training_pieces,
)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _problem(seed: int = 0, n: int = 40, m: int = 12, d: int = 8, r: int = 2):
    rng = np.random.default_rng(seed)
    rows = [rng.integers(0, m, size=rng.integers(2, 7)) for _ in range(n)]
    slot_of = np.arange(m, dtype=np.int64)
    bags = bags_of_slots(rows, slot_of)
    basis = np.linalg.qr(rng.normal(size=(d, r)))[0].T.astype(np.float32)
    prior = rng.normal(size=(m, d)).astype(np.float32)
    docs = _unit(rng.normal(size=(6, d)))
    docs_perp = (docs - docs @ basis.T @ basis).astype(np.float32)
    return rng, bags, prior, basis, docs_perp


def _reference_fit(bags: Bags, targets, prior, basis, config: FitConfig, docs_perp=None, owner=None):
    """Full-batch Adam on dense NumPy matrices: what fit_query_table does when batch >= n."""
    m = prior.shape[0]
    c = bags.dense(m).astype(np.float64)
    scale = float(np.median(np.linalg.norm(prior, axis=1)))
    e0 = prior.astype(np.float64) / scale
    table, logw = e0.copy(), np.zeros(m)
    p = np.eye(prior.shape[1]) - basis.T.astype(np.float64) @ basis
    n = c.shape[0]
    lam = config.prior / n
    m1 = v1 = np.zeros_like(table)
    m2 = v2 = np.zeros(m)
    cands = None
    if config.objective != "mse":
        s = (targets @ p) @ docs_perp.T
        cands = np.zeros((n, docs_perp.shape[0]), np.int64)
        for i in range(n):
            others = [j for j in np.argsort(-s[i], kind="stable") if j != owner[i]]
            cands[i] = [owner[i], *others]
    for step in range(1, config.steps + 1):
        w = np.exp(logw)
        u = c @ (w[:, None] * table)
        nu = np.linalg.norm(u, axis=1, keepdims=True)
        q = u / nu
        g = np.zeros_like(q)
        if config.objective in ("mse", "mse+kl"):
            g += 2 * (q - targets) @ p / n
        if cands is not None:
            dv = docs_perp[cands].astype(np.float64)
            z = np.einsum("bd,bkd->bk", q, dv) / config.temperature
            ps = np.exp(z - z.max(1, keepdims=True))
            ps /= ps.sum(1, keepdims=True)
            if config.objective == "ctr":
                pt = np.zeros_like(ps)
                pt[:, 0] = 1
            else:
                zt = np.einsum("bd,bkd->bk", targets @ p, dv) / config.temperature
                pt = np.exp(zt - zt.max(1, keepdims=True))
                pt /= pt.sum(1, keepdims=True)
            g += np.einsum("bk,bkd->bd", ps - pt, dv) / config.temperature / n
        gu = (g - np.sum(g * q, 1, keepdims=True) * q) / nu
        gt = (c.T @ gu) * w[:, None] + 2 * lam * (table - e0)
        ga = w * np.sum((c.T @ gu) * table, 1) + 2 * config.weight_prior * logw
        m1 = 0.9 * m1 + 0.1 * gt
        v1 = 0.999 * v1 + 0.001 * gt * gt
        table = table - config.lr * (m1 / (1 - 0.9 ** step)) / (np.sqrt(v1 / (1 - 0.999 ** step)) + 1e-8)
        if config.learn_weights:
            m2 = 0.9 * m2 + 0.1 * ga
            v2 = 0.999 * v2 + 0.001 * ga * ga
            logw = logw - config.lr_weights * (m2 / (1 - 0.9 ** step)) / (
                np.sqrt(v2 / (1 - 0.999 ** step)) + 1e-8)
    return table * np.exp(logw)[:, None] * scale


def test_bags_and_pooling_match_numpy():
    _rng, bags, prior, _, _ = _problem()
    c = bags.dense(prior.shape[0])
    ref = _unit(c @ prior)
    np.testing.assert_allclose(encode_bags(bags, prior), ref, atol=1e-5)
    # ids outside the table are dropped
    b = bags_of_slots([np.array([0, 5, 5, 9])], np.array([0, -1, -1, -1, -1, 1, -1, -1, -1, -1]))
    assert b.slots.tolist() == [0, 1] and b.counts.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("objective", ["mse", "ctr", "kl", "mse+kl"])
def test_fit_matches_numpy_reference(objective):
    rng, bags, prior, basis, docs_perp = _problem(1)
    targets = _unit(rng.normal(size=(len(bags), prior.shape[1])))
    owner = rng.integers(0, docs_perp.shape[0], size=len(bags))
    cfg = FitConfig(objective=objective, steps=15, batch=10_000, lr=1e-2, lr_weights=2e-2, prior=3.0,
                    weight_prior=1e-2, temperature=0.5, candidates=docs_perp.shape[0] - 1)
    got = fit_query_table(bags, targets, prior, basis, docs_perp=docs_perp, owner=owner, config=cfg)
    ref = _reference_fit(bags, targets, prior, basis, cfg, docs_perp, owner)
    np.testing.assert_allclose(got.table, ref, rtol=2e-3, atol=2e-4)
    assert len(got.history) == 15


def test_gradient_matches_finite_differences():
    rng, _bags, prior, basis, docs_perp = _problem(2, n=5)
    cfg = FitConfig(objective="mse+kl", temperature=0.5)
    u = rng.normal(size=(3, prior.shape[1])).astype(np.float64)
    t = _unit(rng.normal(size=(3, prior.shape[1]))).astype(np.float64)
    cd = docs_perp[rng.integers(0, 6, size=(3, 4))].astype(np.float64)
    _, g = batch_loss(u, t, basis.astype(np.float64), cfg, cd)
    eps = 1e-6
    for i, j in [(0, 0), (1, 3), (2, 7)]:
        up, dn = u.copy(), u.copy()
        up[i, j] += eps
        dn[i, j] -= eps
        num = (batch_loss(up, t, basis.astype(np.float64), cfg, cd)[0]
               - batch_loss(dn, t, basis.astype(np.float64), cfg, cd)[0]) / (2 * eps)
        assert num == pytest.approx(g[i, j], rel=1e-3, abs=1e-6)


def test_loss_decreases_to_known_solution():
    """Targets made by a hidden table and hidden weights: the fit, started from a perturbed table,
    gets the pooled vectors back (the loss falls by orders of magnitude)."""
    rng, bags, _, _, _ = _problem(3, n=400, m=30, d=16)
    basis = np.zeros((0, 16), np.float32)
    truth = rng.normal(size=(30, 16)).astype(np.float32)
    w_true = np.exp(rng.normal(scale=0.3, size=30)).astype(np.float32)
    targets = encode_bags(bags, truth * w_true[:, None])
    start = truth + 0.8 * rng.normal(size=truth.shape).astype(np.float32)
    cfg = FitConfig(objective="mse", steps=600, batch=128, lr=1e-2, prior=1e-3, weight_prior=0.0)
    res = fit_query_table(bags, targets, start, basis, config=cfg)
    before = np.mean(np.sum((encode_bags(bags, start) - targets) ** 2, 1))
    after = np.mean(np.sum((encode_bags(bags, res.table) - targets) ** 2, 1))
    assert after < before / 20
    assert np.mean(res.history[-20:]) < np.mean(res.history[:20]) / 10


def test_bad_inputs_are_refused():
    rng, bags, prior, basis, _docs_perp = _problem()
    with pytest.raises(ModelError):
        fit_query_table(bags, np.zeros((3, prior.shape[1]), np.float32), prior, basis)
    with pytest.raises(ModelError):
        fit_query_table(bags, _unit(rng.normal(size=(len(bags), prior.shape[1]))), prior, basis,
                        config=FitConfig(objective="kl"))
    with pytest.raises(ValueError):
        FitConfig(objective="nope")


def test_training_pieces():
    skills = [SimpleNamespace(name="pdf-merge", description="Merge PDF files into one. Use for reports.",
                              body="# PDF\nThis skill merges many files. It keeps the page order intact.\n"
                                   "Run the script with two paths. The output is written next to them.",
                              when_to_use="When the user has several PDF files",
                              examples=("merge a.pdf and b.pdf",),
                              triggers=()),
              SimpleNamespace(name="x", description="Merge PDF files into one. Use for reports.", body="",
                              when_to_use="", examples=(), triggers=())]
    texts, owner = training_pieces(skills)
    assert texts[0] == skills[0].description
    assert "How do I merge PDF files into one? (pdf merge)" in texts
    assert "This skill merges many files. It keeps the page order intact." in texts
    assert texts.count(skills[0].description) == 1  # duplicates dropped
    assert owner.tolist() == [0] * len(texts) or set(owner.tolist()) <= {0, 1}
    assert task_template("a", "") == ""
