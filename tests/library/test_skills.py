"""Reading skill libraries: SKILL.md trees, JSONL, dataset folders, and broken inputs."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from skill_files import write_skill

from skillsight_fast.errors import EmptyLibraryError, SkillFormatError
from skillsight_fast.library.skills import load_skills, parse_skill_md


def test_tree_ids_are_relative_paths(tmp_path):
    write_skill(tmp_path, "pdf", name="pdf")
    write_skill(tmp_path, "team/csv", name="csv", description="Clean CSV.\n  Multi-line ok.")
    report = load_skills([tmp_path])
    assert sorted(s.id for s in report.skills) == ["pdf", "team/csv"]
    csv = next(s for s in report.skills if s.id == "team/csv")
    assert csv.path.endswith("team/csv/SKILL.md") and csv.text.startswith("csv\nClean CSV.")


def test_yaml_front_matter_with_quotes_and_lists():
    name, desc, body = parse_skill_md(
        '---\nname: "x: y"\ndescription: >\n  folded\n  text\ntags: [a, b]\n---\nbody')
    assert (name, desc, body) == ("x: y", "folded text", "body")


@pytest.mark.parametrize(
    "raw,reason",
    [
        ("# no front matter\n", "no YAML front matter"),
        ("---\nname: x\ndescription: y\n", "not closed"),
        ("---\nname: [unclosed\ndescription: y\n---\n", "invalid YAML"),
        ("---\nname: x\ndescription: Use it: to merge\n---\n",
         "a ': ' inside an unquoted value; quote the value"),
        ("---\ndescription: y\n---\n", "'name'"),
        ("---\nname: x\ndescription: 3\n---\n", "'description'"),
        ("---\n- a\n- b\n---\n", "not a mapping"),
        (b"---\nname: x\ndescription: \xff\xfe\n---\n", "UTF-8"),
        (b"\x00\x01binary", "binary"),
    ],
)
def test_broken_skill_is_reported_and_skipped(tmp_path, raw, reason):
    write_skill(tmp_path, "good")
    write_skill(tmp_path, "bad", raw=raw)
    report = load_skills([tmp_path])
    assert [s.id for s in report.skills] == ["good"]
    assert len(report.problems) == 1 and reason in report.problems[0].reason
    assert report.problems[0].source.endswith("bad/SKILL.md")
    with pytest.raises(SkillFormatError, match=reason.strip("'")):
        load_skills([tmp_path], strict=True)


def test_huge_skill_rejected(tmp_path, monkeypatch):
    import skillsight_fast.library.skills as mod

    monkeypatch.setattr(mod, "MAX_SKILL_BYTES", 1000)
    write_skill(tmp_path, "big", body="x" * 2000)
    write_skill(tmp_path, "ok")
    report = load_skills([tmp_path])
    assert [s.id for s in report.skills] == ["ok"] and "limit" in report.problems[0].reason


def test_symlink_loop_terminates(tmp_path):
    write_skill(tmp_path, "a")
    os.symlink(tmp_path, tmp_path / "a" / "loop")
    report = load_skills([tmp_path])
    assert [s.id for s in report.skills] == ["a"]


def test_empty_library_and_missing_source(tmp_path):
    with pytest.raises(EmptyLibraryError):
        load_skills([tmp_path])
    with pytest.raises(SkillFormatError, match="no such"):
        load_skills([tmp_path / "nope"])


def test_duplicate_ids_across_sources(tmp_path):
    write_skill(tmp_path / "one", "pdf")
    write_skill(tmp_path / "two", "pdf")
    # two roots holding the same relative id: both get their root's label (tests/library/test_agent_skills.py)
    assert [s.id for s in load_skills([tmp_path / "one", tmp_path / "two"]).skills] == ["one:pdf", "two:pdf"]
    with pytest.raises(SkillFormatError, match="same source"):  # a source given twice: told so
        load_skills([tmp_path / "one", tmp_path / "one"])


def test_jsonl_and_gz(tmp_path):
    recs = [{"id": "a", "name": "A", "description": "d", "body": "b"}, {"id": "b", "name": "B"}]
    (tmp_path / "s.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n\n{broken\n")
    report = load_skills([tmp_path / "s.jsonl"])
    assert [s.id for s in report.skills] == ["a", "b"] and "invalid JSON" in report.problems[0].reason
    with gzip.open(tmp_path / "t.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "c", "name": "C", "description": "", "body": ""}) + "\n")
    assert [s.id for s in load_skills([tmp_path / "t.jsonl.gz"]).skills] == ["c"]


def test_dataset_folder_with_pool_and_exclusions(tmp_path):
    def dump(folder, recs, meta):
        folder.mkdir()
        with gzip.open(folder / "corpus.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in recs)
        (folder / "meta.json").write_text(json.dumps(meta))

    rec = lambda i: {"id": i, "name": i, "description": "", "body": ""}  # noqa: E731
    dump(tmp_path / "pool", [rec("p1"), rec("p2"), rec("p3")], {"distractors": None})
    dump(tmp_path / "ds", [rec("d1")], {"distractors": "pool", "excluded_pool_ids": ["p2"]})
    assert [s.id for s in load_skills([tmp_path / "ds"]).skills] == ["d1", "p1", "p3"]
