"""The command line a person can read (issue 38): the option budget, settings by -c, the lab group."""

from __future__ import annotations

import json

import pytest

from skillsight_fast.cli import build_parser, lab_alias, main
from skillsight_fast.cli.options import option_counts
from skillsight_fast.cli.settings import MAX_OPTIONS, SettingError, read_settings

#: Everyday commands and the research or tuning knobs none of them may offer as options.
EVERYDAY = ("index", "search", "serve", "install", "hook", "update", "info")
RESEARCH = {"--paper", "--lexical", "--query-encoder", "--query-model", "--query-int8", "--no-query-int8",
            "--int8", "--methods", "--bootstrap", "--ablations", "--cross-encoder", "--engine", "--mmap",
            "--shards", "--debounce", "--max-connections", "--seed"}


def test_the_command_line_offers_at_most_the_budget():
    counts = option_counts()
    total = sum(len(v) for v in counts.values())
    assert total <= MAX_OPTIONS, {k: len(v) for k, v in counts.items()}
    assert counts["lab eval"] and "eval" not in counts  # aliases are not counted twice: they are not parsers
    assert "scan" not in counts  # screen's old name is the same parser


def test_everyday_commands_show_no_research_knobs():
    counts = option_counts()
    parser = build_parser()
    for name in EVERYDAY:
        shown = set(counts[name])
        sub = next(a for a in parser._actions if a.dest == "command").choices[name]
        shown |= {s for a in sub._actions for s in a.option_strings}
        assert not shown & RESEARCH, (name, shown & RESEARCH)


def test_a_setting_reaches_the_handler_with_its_type(monkeypatch):
    seen = {}
    monkeypatch.setattr("skillsight_fast.cli.core.cmd_search", lambda a: seen.update(vars(a)) or 0)
    parser = build_parser()
    args = parser.parse_args(["search", "-i", "x", "task"])  # defaults are there without -c
    assert args.engine == "auto" and args.collapse is True and args.min_cosine is None
    from skillsight_fast.cli.settings import apply_settings

    apply_settings(args, ["engine=numpy", "no-collapse=yes", "min-cosine=0.4", "serve.mmap=true"], "search")
    assert (args.engine, args.collapse, args.min_cosine, args.mmap) == ("numpy", False, 0.4, False)


def test_settings_file_toml_and_json(tmp_path):
    toml = tmp_path / "lab.toml"
    toml.write_text('[eval]\nmethods = "bm25,dense"\nbootstrap = 50\nall = true\n[index]\nint8 = true\n')
    assert read_settings([str(toml)], "eval") == [("methods", "bm25,dense"), ("bootstrap", 50), ("all", True)]
    assert read_settings([str(toml)], "search") == []
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"bench": {"sizes": ["real", 1000], "no-model": True}}))
    args = build_parser().parse_args(["lab", "bench", "--quick"])
    args._settings.apply(args, read_settings([str(js)], "bench"))
    assert args.sizes == ["real", "1000"] and args.no_model is True and args.quick is True


@pytest.mark.parametrize("argv, needle", [
    (["-c", "nope=1", "info", "-i", "x"], "info has no settings"),
    (["-c", "nope=1", "search", "-i", "x", "t"], "no setting 'nope'"),
    (["-c", "engine=cuda", "search", "-i", "x", "t"], "invalid choice"),
    (["-c", "mmap=maybe", "search", "-i", "x", "t"], "true or false"),
    (["-c", "all=true", "eval", "--data", "x"], "only one of"),
    (["eval"], "needs one of"),
    (["-c", "missing.toml", "search", "-i", "x", "t"], "missing.toml"),
])
def test_bad_settings_are_one_line_usage_errors(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err, err


def test_a_settings_file_that_is_not_tables_is_refused(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("engine = 'numpy'\n")
    assert main(["-c", str(bad), "search", "-i", "x", "t"]) == 2
    assert "one table per command" in capsys.readouterr().err
    bad.write_text("[search\n")
    with pytest.raises(SettingError):
        read_settings([str(bad)], "search")


def test_lab_commands_answer_at_the_top_level(capsys):
    assert lab_alias(["-v", "-c", "seed=1", "eval", "--data", "x"]) == ["-v", "-c", "seed=1", "lab", "eval",
                                                                         "--data", "x"]
    assert lab_alias(["search", "eval"]) == ["search", "eval"]
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: skillsight lab bench") and "settings (skillsight -c KEY=VALUE bench" in out
    assert "sizes=N" in out and "no-model=true|false" in out


def test_results_are_split_by_writer_and_each_is_named():
    """results/ holds one folder per writer (eval, bench, experiments) and its README names every file."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "results"
    assert sorted(p.name for p in root.iterdir()) == ["README.md", "bench", "eval", "experiments"]
    readme = (root / "README.md").read_text()
    unnamed = [str(p.relative_to(root)) for p in root.glob("*/*") if f"`{p.name}`" not in readme]
    assert not unnamed, unnamed


def test_every_experiment_is_listed():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "experiments"
    listed = (root / "README.md").read_text()
    missing = [p.name for p in root.glob("*.py") if f"`{p.name}`" not in listed]
    assert not missing, missing


@pytest.mark.parametrize("watch", [False, True])
def test_the_server_command_install_writes_still_parses(tmp_path, watch):
    """Hosts run what ``install`` wrote (``serve --mcp -i IDX --endpoint -q [--watch]``): those stay
    options."""
    from skillsight_fast.agents.hosts import HOSTS

    for host in HOSTS.values():
        entry = host.server_entry(tmp_path / "idx", prefix=["skillsight"], watch=watch)
        args = build_parser().parse_args(entry["args"])
        assert args.command == "serve" and args.mcp and args.endpoint and args.quiet
        assert (args.watch is not None) is watch
    assert args.command == "serve" and args.mcp and args.endpoint and args.quiet
    assert (args.watch is not None) is watch
