"""skillsight eval --triggers: the skill-creator trigger-eval format, run offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import HashEncoder

from skillsight_fast import SkillIndex
from skillsight_fast.authoring.triggers import (
    TriggerFileError,
    evaluate_triggers,
    read_triggers,
    resolve_skill,
)
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.library.skills import Skill

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "triggers" / "skillsbench"


@pytest.fixture
def index():
    return SkillIndex.build([
        Skill("lib:mesh-analysis", "mesh-analysis", "Analyse STL meshes: volume and components.",
              "stl mesh volume"),
        Skill("lib:pdf@task1", "pdf", "Merge and split PDF files.", "pypdf merge split pages"),
        Skill("lib:pdf@task2", "pdf", "Merge and split PDF files.", "pypdf merge split pages"),
        Skill("lib:csv", "csv", "Clean CSV files.", "csv columns rows dedupe"),
    ], HashEncoder())


def _write(path, items):
    path.write_text(json.dumps(items))
    return path


def test_reads_the_skill_creator_format(tmp_path):
    f = _write(tmp_path / "mesh-analysis.json",
               [{"query": "stl volume", "should_trigger": True},
                {"query": "clean csv", "should_trigger": False, "note": "ignored"}])
    cases = read_triggers(f)
    assert [(c.skill, c.query, c.should_trigger) for c in cases] == [
        ("mesh-analysis", "stl volume", True), ("mesh-analysis", "clean csv", False)]
    assert read_triggers(f, "other")[0].skill == "other"
    assert len(read_triggers(tmp_path)) == 2  # a folder: one file per skill, named after it
    for bad in ([{"query": "", "should_trigger": True}], [{"query": "x", "should_trigger": "yes"}],
                {"a": 1}, [3]):
        with pytest.raises(TriggerFileError):
            read_triggers(_write(tmp_path / "bad.json", bad))
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(TriggerFileError):
        read_triggers(tmp_path / "broken.json")
    with pytest.raises(TriggerFileError, match="no such"):
        read_triggers(tmp_path / "missing.json")


def test_resolves_ids_names_and_task_copies(index):
    assert resolve_skill(index, "lib:csv") == 3
    assert resolve_skill(index, "mesh-analysis") == 0
    assert resolve_skill(index, "pdf") == 1  # one skill vendored per task: the first copy
    with pytest.raises(TriggerFileError, match="no skill"):
        resolve_skill(index, "nothing")


def test_trigger_and_false_trigger_rates(index, tmp_path):
    cases = read_triggers(_write(tmp_path / "mesh-analysis.json", [
        {"query": "stl mesh volume", "should_trigger": True},
        {"query": "analyse stl meshes", "should_trigger": True},
        {"query": "clean csv columns", "should_trigger": False},
        {"query": "merge pdf pages", "should_trigger": False}]))
    top1 = evaluate_triggers(index, cases, k=1, n_boot=200)
    o = top1["overall"]
    assert (o["n_should"], o["n_should_not"]) == (2, 2)
    assert o["trigger_rate"] == 1.0 and o["false_trigger_rate"] == 0.0 and o["pass_rate"] == 1.0
    # with every skill returned, the should-not prompts retrieve it too: false triggers
    everything = evaluate_triggers(index, cases, k=4, n_boot=200)
    assert everything["overall"]["false_trigger_rate"] == 1.0 and len(everything["failures"]) == 2
    assert everything["failures"][0]["first_hit"] in ("lib:csv",)
    # a threshold no hit reaches: nothing triggers (per-hit cut)
    none = evaluate_triggers(index, cases, k=4, abstention=Abstention("cosine", 2.0), n_boot=200)
    assert none["overall"]["trigger_rate"] == 0.0 and none["overall"]["false_trigger_rate"] == 0.0
    lo, hi = top1["overall"]["trigger_rate_ci"]
    assert lo <= 1.0 <= hi + 1e-9


def test_cli_eval_triggers(index, tmp_path, capsys, monkeypatch):
    from skillsight_fast.cli import main

    index.save(tmp_path / "idx")
    real = SkillIndex.load.__func__

    def load(cls, directory, **kw):
        return real(cls, directory, **{"encoder": HashEncoder(), **kw})

    monkeypatch.setattr(SkillIndex, "load", classmethod(load))
    f = _write(tmp_path / "t.json", [{"query": "stl mesh volume", "should_trigger": True},
                                      {"query": "clean csv columns", "should_trigger": False}])
    out = tmp_path / "r.json"
    assert main(["-c", "skill=lib:mesh-analysis", "-c", "k=1", "-c", "bootstrap=100", "eval",
                 "--triggers", str(f), "-i", str(tmp_path / "idx"), "--json", str(out)]) == 0
    assert "lib:mesh-analysis" in capsys.readouterr().out
    assert json.loads(out.read_text())["overall"]["pass_rate"] == 1.0
    assert main(["eval", "--triggers", str(f), "-i", str(tmp_path / "idx")]) == 1  # skill "t" unknown
    assert "no skill 't'" in capsys.readouterr().err
    assert main(["-c", "skill=lib:csv", "eval", "--triggers", str(f)]) == 1  # no index
    assert "-i DIR" in capsys.readouterr().err


def test_the_bundled_trigger_files_are_in_the_format():
    cases = read_triggers(BUNDLED)
    by_skill = {}
    for c in cases:
        by_skill.setdefault(c.skill, []).append(c.should_trigger)
    assert len(by_skill) == 5 and all(len(v) == 20 and sum(v) == 10 for v in by_skill.values())
    assert len({c.query for c in cases}) == len(cases)
