"""skillsight analyze: the plots and the report, on a toy corpus with the hashing encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex, models
from skillsight_fast.cli import main
from skillsight_fast.lab.analyze import gold_ranks

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def index_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    SkillIndex.build(toy_skills(n_extra=40), HashEncoder()).save(tmp_path / "idx")
    return tmp_path / "idx"


def test_analyze_with_labelled_queries(index_dir, tmp_path, capsys):
    data = tmp_path / "q.jsonl"
    rows = [("merge pdf pages", "pdf-tools"), ("docker compose deploy", "docker-deploy"),
            ("stl mesh volume", "mesh-analysis"), ("unknown gold", "nope")]
    data.write_text("".join(json.dumps({"id": f"q{i}", "text": t, "gold": [g]}) + "\n"
                            for i, (t, g) in enumerate(rows)))
    out = tmp_path / "out"
    assert main(["-c", f"data={data}", "-c", "json=true", "analyze", "-i", str(index_dir), "-o",
                 str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_queries"] == 3 and summary["n_docs"] == 50  # the query without gold is dropped
    for name in summary["plots"]:
        assert (out / name).read_bytes()[:8] == PNG
    report = (out / "report.md").read_text()
    assert "![energy](energy.png)" in report and "corpus ranked ahead of gold" in report
    for m in ("dense", "sbc", "skillsight"):
        assert 0 <= summary["recall"][m]["R@1"] <= summary["recall"][m]["R@10"] <= 100
    split = summary["score_split"]["gold"]
    assert set(split) == {"background", "task"}


def test_analyze_without_data_uses_descriptions(index_dir, tmp_path, capsys):
    assert main(["analyze", "-i", str(index_dir), "-o", str(tmp_path / "o")]) == 0
    assert "energy.png" in capsys.readouterr().out
    assert (tmp_path / "o" / "report.md").is_file()


def test_gold_ranks_match_a_brute_force_ranking():
    index = SkillIndex.build(toy_skills(n_extra=30), HashEncoder())
    texts = ["merge pdf pages", "git rebase"]
    gold = [np.array([0, 1]), np.array([3])]
    q = index.encode(texts)
    ranks = gold_ranks(index, q, texts, gold)
    raw = q @ index.dense.embeddings.T
    for i, g in enumerate(gold):
        order = np.argsort(-raw[i], kind="stable")
        expected = [int(np.nonzero(order == j)[0][0]) + 1 for j in g]
        assert list(ranks["dense"][i]) == expected  # no ties in this toy corpus
    fused = index.search(texts, k=len(index))
    for i, g in enumerate(gold):
        assert ranks["skillsight"][i][0] == fused.ids[i].tolist().index(g[0]) + 1
