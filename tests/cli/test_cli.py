"""The command line through main(argv), with the hashing encoder standing in for the model."""

from __future__ import annotations

import json

import pytest
from fakes import HashEncoder
from skill_files import write_skill

from skillsight_fast import models
from skillsight_fast.cli import main


@pytest.fixture
def library(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    root = tmp_path / "skills"
    write_skill(root, "pdf", name="pdf", description="Merge and split PDF files.",
                body="pdf pages merge split")
    write_skill(root, "mesh", name="mesh", description="Analyse STL meshes.", body="stl mesh volume")
    write_skill(root, "csv", name="csv", description="Clean CSV files.", body="csv columns rows")
    write_skill(root, "broken", raw="no front matter")
    return root


def test_index_search_info(library, tmp_path, capsys):
    idx = tmp_path / "idx"
    assert main(["index", str(library), "-o", str(idx), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_skills"] == 3 and len(out["skipped"]) == 1
    assert main(["search", "-i", str(idx), "merge pdf pages", "-k", "2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["query"] == "merge pdf pages" and len(res["hits"]) == 2
    assert res["hits"][0]["id"] == "pdf"
    # what the servers return: path, description, cosine and the skill's resource uri too
    assert set(res["hits"][0]) == {"id", "name", "description", "path", "score", "cosine", "dense", "lexical",
                                   "evidence", "tags", "pinned", "copies", "uri"}
    assert res["hits"][0]["uri"] == "skill://pdf/SKILL.md" and res["hits"][0]["path"].endswith("SKILL.md")
    assert set(res) == {"query", "abstention", "hits"}
    assert main(["search", "-i", str(idx), "stl volume", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "mesh" in text and "evidence" in text
    assert main(["info", "-i", str(idx), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_skills"] == 3


def test_unquoted_words_are_one_task_and_stdin_gives_several(library, tmp_path, capsys, monkeypatch):
    import io

    idx = tmp_path / "idx"
    assert main(["index", str(library), "-o", str(idx), "-q"]) == 0
    assert main(["-c", "min-cosine=none", "search", "-i", str(idx), "merge", "pdf", "pages", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["query"] for r in rows] == ["merge pdf pages"]
    monkeypatch.setattr("sys.stdin", io.StringIO("merge pdf pages\n\n  stl volume \n"))
    assert main(["-c", "min-cosine=none", "search", "-i", str(idx), "-", "--json", "-k", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["query"] for r in rows] == ["merge pdf pages", "stl volume"]
    assert [r["hits"][0]["id"] for r in rows] == ["pdf", "mesh"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n  \n"))
    assert main(["search", "-i", str(idx), "-"]) == 1
    assert "no task on stdin" in capsys.readouterr().err


def test_explain_shows_the_best_hit_against_the_threshold(library, tmp_path, capsys):
    idx = tmp_path / "idx"
    assert main(["index", str(library), "-o", str(idx), "-q"]) == 0
    assert main(["-c", "min-cosine=none", "search", "-i", str(idx), "merge pdf pages", "--json", "-k",
                 "1"]) == 0
    top = json.loads(capsys.readouterr().out)["hits"][0]
    assert main(["-c", "min-cosine=0.999", "search", "-i", str(idx), "merge pdf pages", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "no skill fits" in text
    assert f"best: pdf  [pdf]  cosine {top['cosine']:.4f} < threshold 0.9990" in text
    assert main(["-c", "min-cosine=0.999", "search", "-i", str(idx), "merge pdf pages"]) == 0
    assert "best:" not in capsys.readouterr().out  # only with --explain


def test_errors_exit_nonzero_without_traceback(library, tmp_path, capsys):
    assert main(["index", str(library), "-o", str(tmp_path / "i"), "--strict"]) == 1
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err and not (tmp_path / "i").exists()
    assert main(["search", "-i", str(tmp_path / "missing"), "x"]) == 1
    assert "no such index" in capsys.readouterr().err
    main(["index", str(library), "-o", str(tmp_path / "i")])
    capsys.readouterr()
    assert main(["search", "-i", str(tmp_path / "i"), "   "]) == 1
    assert "empty query" in capsys.readouterr().err
    assert main(["search", "-i", str(tmp_path / "i"), "pdf", "-k", "0"]) == 1
    with pytest.raises(SystemExit) as exc:
        main(["search"])
    assert exc.value.code == 2


@pytest.mark.parametrize("flags, adaptive, lexical", [
    ([], True, "bm25"),
    (["-c", "paper=true"], False, "lec"),
    (["-c", "lexical=lec"], True, "lec"),
    (["-c", "paper=true", "-c", "lexical=bm25"], False, "bm25"),
])
def test_index_flags_choose_the_method(library, tmp_path, capsys, flags, adaptive, lexical):
    idx = tmp_path / "idx"
    assert main([*flags, "index", str(library), "-o", str(idx), "-q"]) == 0
    capsys.readouterr()
    assert main(["info", "-i", str(idx), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["config"]["adaptive"] is adaptive and info["decisions"]["lexical"] == lexical
    assert info["decisions"]["rule"] == ("adaptive" if adaptive else "config")
    assert main(["search", "-i", str(idx), "merge pdf pages", "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["id"] == "pdf"


def test_each_command_builds_the_parser_of_its_own_module():
    import argparse

    from skillsight_fast.cli import COMMAND_MODULES, build_parser
    from skillsight_fast.cli.options import option_counts

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(COMMAND_MODULES) == set(sub.choices)  # every command (and alias) in the table, nothing else
    full = option_counts(parser)
    commands = {name.split()[0] for name in full if name}
    for command in commands:  # the command alone has the same options as in the full parser
        alone = option_counts(build_parser(command))
        assert {n: o for n, o in alone.items() if n.split()[0:1] == [command]} == \
            {n: o for n, o in full.items() if n.split()[0:1] == [command]}


def test_a_one_shot_search_imports_no_other_command(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from skillsight_fast.cli import main; main(['search', '-i', sys.argv[1], 'x']); "
            "print(sorted(m for m in sys.modules if m.startswith('skillsight_fast.cli.')))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "none")], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == ("['skillsight_fast.cli._common', 'skillsight_fast.cli.core', "
                           "'skillsight_fast.cli.settings']")


def test_index_of_a_tool_jsonl_gets_the_tool_config(tmp_path, monkeypatch, capsys):
    """A JSONL file of tools (records with a schema) is indexed as --mcp/--openapi tools are
    (every task token is evidence), a JSONL file of prose skills as a skill library."""
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    tools = tmp_path / "tools.jsonl"
    prose = tmp_path / "skills.jsonl"
    schema = {"type": "object", "properties": {"tz": {"type": "string"}}}
    rows = [("get_time", "Current time in a time zone"), ("convert_time", "Convert a time between zones"),
            ("git_log", "Show the commit log of a repository")]
    tools.write_text("".join(json.dumps({"id": n, "name": n, "description": d, "inputSchema": schema}) + "\n"
                             for n, d in rows))
    prose.write_text("".join(json.dumps({"id": n, "name": n, "description": d, "body": d}) + "\n"
                             for n, d in rows))
    got = {}
    for src in (tools, prose):
        idx = tmp_path / f"idx-{src.stem}"
        assert main(["index", str(src), "-o", str(idx), "-q"]) == 0
        got[src.stem] = json.loads((idx / "manifest.json").read_text())["decisions"]["lexical_evidence"]
    capsys.readouterr()
    assert got == {"tools": "all", "skills": "masked"}
