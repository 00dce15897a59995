"""Abstention: picking --min-score from answerable vs off-topic queries, and using it by default."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex, models
from skillsight_fast.cli import main
from skillsight_fast.engine.abstention import (
    Abstention,
    QueryScores,
    parse_min_score,
    pick_threshold,
    read_calibration,
    resolve_abstention,
    tradeoff,
)
from skillsight_fast.errors import SkillsightError
from skillsight_fast.library.queries import read_queries

ANSWERABLE = [
    ("merge split pdf pages", "pdf-tools"), ("extract tables text from pdf", "pdf-tools"),
    ("clean csv columns dedupe rows", "csv-clean"), ("docker image build deploy", "docker-deploy"),
    ("git rebase merge conflicts", "git-helper"), ("stl mesh volume triangles", "mesh-analysis"),
    ("email draft polite reply", "email-writer"), ("sql query join postgres", "sql-query"),
    ("resize crop png thumbnails", "image-resize"), ("pytest fixtures coverage mocking", "unit-tests"),
    ("scrape html pages crawl links", "web-scraper"), ("kubernetes compose container", "docker-deploy"),
]
OFFTOPIC = ["what should I cook tonight with rice", "tell me a joke about penguins", "how tall is everest",
            "best beach town in portugal", "how many bones in the human body", "a haiku about snow"]


def test_pick_threshold_and_tradeoff():
    top1 = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05])
    assert pick_threshold(top1, 0.0) == 0.05
    assert pick_threshold(top1, 0.1) == 0.1 and pick_threshold(top1, 0.25) == 0.2
    with pytest.raises(SkillsightError):
        pick_threshold(top1, 1.0)
    with pytest.raises(SkillsightError):
        pick_threshold(np.array([-np.inf]), 0.05)
    scores = np.array([[0.9, 0.1], [0.3, 0.2], [0.15, 0.05]], np.float32)
    gold = np.array([[True, False], [False, True], [True, False]])
    cosines = scores + 0.5
    qs = QueryScores(scores, cosines, gold)
    row = tradeoff(qs, np.array([0.1, 0.25, 0.05, 0.5]), 0.2)
    assert row["offtopic_rejected"] == 0.5 and row["answerable_lost"] == pytest.approx(1 / 3)
    assert row["hit_at_k_before"] == 1.0 and row["hit_at_k"] == pytest.approx(2 / 3)
    assert tradeoff(qs, np.zeros(0), 0.7, "cosine")["hit_at_k"] == pytest.approx(2 / 3)


def test_abstention_rule():
    rule = Abstention("cosine", 0.4)
    assert rule.keep(score=-1.0, cosine=0.5) and not rule.keep(score=9.0, cosine=0.3)
    assert Abstention("score", 0.4).keep(score=0.5, cosine=0.0)
    with pytest.raises(SkillsightError):
        Abstention("bm25", 0.1)


def test_min_score_argument_and_resolution(tmp_path):
    assert parse_min_score("0.25") == 0.25 and parse_min_score("none") == -math.inf
    with pytest.raises(ValueError):
        parse_min_score("abc")
    (tmp_path / "manifest.json").write_text("{}")
    assert resolve_abstention(tmp_path) is None
    (tmp_path / "calibration.json").write_text(json.dumps({"signal": "cosine", "threshold": 0.3}))
    assert resolve_abstention(tmp_path) == Abstention("cosine", 0.3)
    assert resolve_abstention(tmp_path, min_score=0.5) == Abstention("score", 0.5)
    assert resolve_abstention(tmp_path, min_score=0.5, min_cosine=0.2) == Abstention("cosine", 0.2)
    assert resolve_abstention(tmp_path, min_score=-math.inf) is None
    (tmp_path / "calibration.json").write_text("{broken")
    with pytest.raises(SkillsightError, match="calibration"):
        resolve_abstention(tmp_path)


def test_read_queries_formats(tmp_path):
    (tmp_path / "q.txt").write_text("# comment\n\nfirst task\n  second task  \n")
    assert [q.text for q in read_queries(tmp_path / "q.txt")] == ["first task", "second task"]
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "a", "text": "x", "gold": ["g"]}) + "\n")
    assert read_queries(tmp_path / "q.jsonl")[0].gold == ("g",)
    with pytest.raises(SkillsightError):
        read_queries(tmp_path / "missing.txt")


def test_calibrate_cli_then_search_abstains(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    idx = tmp_path / "idx"
    SkillIndex.build(toy_skills(n_extra=10), HashEncoder()).save(idx)
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "text": t, "gold": [g]}) + "\n"
                            for i, (t, g) in enumerate(ANSWERABLE)))
    off = tmp_path / "off.txt"
    off.write_text("\n".join(OFFTOPIC) + "\n")

    assert main(["-c", f"offtopic={off}", "-c", "max-loss=0.1", "calibrate", "-i", str(idx), "--data", str(data),
                 "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert read_calibration(idx) is None and dry["n_answerable"] == len(ANSWERABLE)
    assert dry["n_offtopic"] == len(OFFTOPIC) and dry["answerable_lost"] <= 0.1
    assert dry["signal"] in ("cosine", "score") and set(dry["signals"]) == {"cosine", "score"}
    chosen = dry["signals"][dry["signal"]]
    assert all(chosen["offtopic_rejected"] >= s["offtopic_rejected"] for s in dry["signals"].values())
    assert [r["target_loss"] for r in chosen["table"]][:2] == [0.0, 0.01]

    assert main(["-c", f"offtopic={off}", "-c", "max-loss=0.1", "-c", "signal=score", "calibrate", "-i", str(idx),
                 "--data", str(data)]) == 0
    text = capsys.readouterr().out
    assert "chosen: score >=" in text and "off-topic rejected" in text
    cal = read_calibration(idx)
    assert cal["signal"] == "score" and cal["threshold"] == dry["signals"]["score"]["threshold"]
    threshold = cal["threshold"]

    # search applies the stored threshold by default; --min-score none turns it off
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join([*OFFTOPIC, "merge split pdf pages"])))
    assert main(["search", "-i", str(idx), "--json", "-k", "3", "-"]) == 0  # one task per line
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(r["hits"][0]["score"] >= threshold for r in rows if r["hits"])  # decided on the best hit
    assert rows[-1]["hits"][0]["id"] == "pdf-tools"
    rejected = sum(not r["hits"] for r in rows[:-1])
    assert rejected == round(dry["signals"]["score"]["offtopic_rejected"] * len(OFFTOPIC))
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(OFFTOPIC)))
    assert main(["search", "-i", str(idx), "--json", "--min-score", "none", "-"]) == 0
    assert all(json.loads(line)["hits"] for line in capsys.readouterr().out.splitlines())
    assert main(["search", "-i", str(idx), "--min-score", "100", "merge pdf"]) == 0
    assert "no skill fits" in capsys.readouterr().out
    assert main(["-c", "min-cosine=0.99", "search", "-i", str(idx), "merge pdf"]) == 0
    assert "cosine is below 0.9900" in capsys.readouterr().out


def test_calibrate_needs_matching_gold(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    SkillIndex.build(toy_skills(), HashEncoder()).save(tmp_path / "idx")
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "a", "text": "x", "gold": ["not-there"]}) + "\n")
    assert main(["calibrate", "-i", str(tmp_path / "idx"), "--data", str(tmp_path / "q.jsonl")]) == 1
    assert "no query" in capsys.readouterr().err


def test_default_offtopic_queries_are_found_in_a_checkout():
    """calibrate's default off-topic list must resolve to the bundled file (it moved with cli/)."""
    from skillsight_fast.cli.agents import DEFAULT_OFFTOPIC

    assert DEFAULT_OFFTOPIC.is_file() and DEFAULT_OFFTOPIC.stat().st_size > 0
