"""skillsight doctor: self-retrieval, confusable pairs, duplicate names, listing budget."""

from __future__ import annotations

import json

import pytest
from fakes import HashEncoder

from skillsight_fast import SkillIndex
from skillsight_fast.authoring.doctor import (
    CLAUDE_CODE_LISTING_CHARS,
    SPEC_DESCRIPTION_CHARS,
    diagnose,
    format_report,
)
from skillsight_fast.library.skills import Skill


def _library():
    long_desc = "Convert images between formats. " + "Supports many options and flags. " * 50
    return [
        Skill("pdf", "pdf", "Merge and split PDF files with pypdf.", "pypdf merge split pages pdf documents"),
        Skill("copy/pdf", "PDF", "Merge and split PDF files with pypdf.",
              "pypdf merge split pages pdf documents."),
        # two skills whose descriptions say the same thing: each finds the other first or second
        Skill("csv-a", "csv-cleaner", "Clean tabular files: dedupe rows, fix columns.", "rows columns"),
        Skill("csv-b", "table-fixer", "Clean tabular files: dedupe rows, fix columns!", "columns rows"),
        Skill("mesh", "mesh", "Analyse STL meshes: volume and connected components.", "stl mesh volume"),
        Skill("img", "img", long_desc, "png jpeg resize"),
        Skill("docker", "docker", "Build Docker images and compose files.", "docker build compose",
              when_to_use="When a Dockerfile is present. " * 60),
    ]


@pytest.fixture
def index():
    return SkillIndex.build(_library(), HashEncoder())


def test_doctor_finds_each_kind_of_problem(index):
    report = diagnose(index, k=3)
    s = report.summary()
    assert s["n_skills"] == 7
    # duplicate names: pdf and PDF, one group; copies do not count against self-retrieval
    assert report.duplicate_names == [{"name": "pdf", "ids": ["pdf", "copy/pdf"]}]
    not_self = {x["id"] for x in report.not_self}
    assert "pdf" not in not_self and "copy/pdf" not in not_self
    # csv-a / csv-b: near-identical descriptions; one loses its own description to the other
    lost = [x for x in report.not_self if x["id"] in ("csv-a", "csv-b")]
    assert len(report.not_self) == 1 and lost[0]["rank"] == 2 and lost[0]["above"] == [
        ({"csv-a", "csv-b"} - {lost[0]["id"]}).pop()]
    (pair,) = report.confusable
    assert {pair["a"], pair["b"]} == {"csv-a", "csv-b"} and pair["margin_a"] == -pair["margin_b"]
    # listing budget: description alone over the spec, description + when_to_use over Claude Code's cap
    over = {t["id"]: t["over"] for t in report.too_long}
    assert "agent-skills-spec" in over["img"] and len(index.skills[5].description) > SPEC_DESCRIPTION_CHARS
    assert over["docker"] == ["claude-code"]
    docker = next(t for t in report.too_long if t["id"] == "docker")
    assert docker["listing_chars"] > CLAUDE_CODE_LISTING_CHARS
    assert s["listing_chars"] == sum(len(m.description) + (len(m.when_to_use) + 1 if m.when_to_use else 0)
                                     for m in index.skills)
    text = format_report(report)
    assert "confusable pairs" in text and "csv-a" in text and "listing budget" in text


def test_doctor_cli_json_and_text(index, tmp_path, capsys, monkeypatch):
    from skillsight_fast.cli import main

    index.save(tmp_path / "idx")
    real = SkillIndex.load.__func__

    def load(cls, directory, **kw):
        return real(cls, directory, **{"encoder": HashEncoder(), **kw})

    monkeypatch.setattr(SkillIndex, "load", classmethod(load))
    assert main(["-c", "k=3", "doctor", "-i", str(tmp_path / "idx"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["duplicate_name_groups"] == 1
    assert out["duplicate_names"][0]["ids"] == ["pdf", "copy/pdf"]
    assert {"not_self", "confusable", "near_identical", "too_long"} <= set(out)
    assert main(["doctor", "-i", str(tmp_path / "idx")]) == 0
    assert "self-retrieval" in capsys.readouterr().out
    assert main(["doctor", "-i", str(tmp_path / "missing")]) == 1
    assert main(["-c", "k=0", "doctor", "-i", str(tmp_path / "idx")]) == 2  # a usage error
