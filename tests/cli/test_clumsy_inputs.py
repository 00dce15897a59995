"""The remaining bad inputs of issue 20 (items 6 and 7): each gives one clear line and a non-zero
exit on the CLI, and a ``SkillsightError`` (or ``OSError`` for a file-system failure) in the API.

Covered here: negative or zero counts and out-of-range fractions on the command line, ``"gold": 5``
and other malformed query records, deep or odd ``calibration.json``, an empty off-topic list,
``search(None)``, overlapping skill sources, the output folder checked before any encoding, an index
path that is a symlink, and a disk that fills up during a save. Each test failed before its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fakes import HashEncoder
from test_bad_inputs import assert_cli_error, fake_model, good_library, run_cli  # noqa: F401 - fixture

from skillsight_fast import SkillIndex
from skillsight_fast.agents.find import find_skills
from skillsight_fast.engine.abstention import (
    calibrate,
    calibration_bytes,
    read_calibration,
    resolve_abstention,
)
from skillsight_fast.errors import QueryError, SkillFormatError, SkillsightError
from skillsight_fast.library.queries import Task, read_queries
from skillsight_fast.library.skills import load_skills

HERE = Path(__file__).parents[1] / "support"


@pytest.fixture
def library(tmp_path):
    return good_library(tmp_path / "lib")


@pytest.fixture
def index_dir(tmp_path, library):
    SkillIndex.build(load_skills([library]).skills, HashEncoder()).save(tmp_path / "idx")
    return tmp_path / "idx"


def usage_error(capsys, argv, needle):
    """``argv`` exits 2 with argparse's usage line naming ``needle``, and no traceback."""
    from skillsight_fast.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "usage:" in err and needle in err and "Traceback" not in err, err


# ---------------------------------------------------------------------- counts on the command line
@pytest.mark.parametrize("argv,needle", [
    (["-c", "max-queries=-5", "calibrate", "-i", "x", "--data", "y"], "--max-queries"),
    (["-c", "max-queries=0", "calibrate", "-i", "x", "--data", "y"], "--max-queries"),
    (["-c", "k=0", "calibrate", "-i", "x", "--data", "y"], "-k"),
    (["-c", "max-loss=2", "calibrate", "-i", "x", "--data", "y"], "--max-loss"),
    (["-c", "max-loss=nan", "calibrate", "-i", "x", "--data", "y"], "--max-loss"),
    (["-c", "max-queries=-1", "analyze", "-i", "x", "-o", "y"], "--max-queries"),
    (["-c", "limit=-1", "eval", "--data", "x"], "--limit"),
    (["-c", "bootstrap=0", "eval", "--data", "x"], "--bootstrap"),
    (["-c", "debounce=-1", "serve", "--mcp", "-i", "x"], "--debounce"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_settings_out_of_range_are_usage_errors(capsys, argv, needle):
    """A setting out of range: status 2 and one line naming it, before any work."""
    from skillsight_fast.cli import main

    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("skillsight: error: -c:"), err
    assert needle in err and "Traceback" not in err, err


def test_counts_out_of_range_are_usage_errors(capsys):
    usage_error(capsys, ["serve", "--http", "-i", "x", "--port", "70000"], "--port")


# ---------------------------------------------------------------------- query records
@pytest.mark.parametrize("record", [
    {"text": "merge pdf", "gold": 5},
    {"text": "merge pdf", "gold": "pdf"},  # was read as the three ids 'p', 'd', 'f'
    {"text": "merge pdf", "gold": [["pdf"]]},
    {"text": "merge pdf", "gold": {"pdf": 1}},
    {"text": "merge pdf", "gold": [True]},
    {"text": "merge pdf", "gold": ["pdf"], "id": ["q1"]},
], ids=["int", "string", "nested", "object", "bool", "list-id"])
def test_malformed_gold_is_refused(tmp_path, capsys, fake_model, index_dir, record):
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"text": "csv rows", "gold": ["csv"]}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(SkillFormatError, match=r"q\.jsonl:2"):
        read_queries(data)
    code, _, err = run_cli(capsys, ["calibrate", "-i", index_dir, "--data", data])
    assert_cli_error(code, err, "q.jsonl:2")
    assert not (index_dir / "calibration.json").exists()


def test_good_gold_forms_still_read(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"text": "a", "gold": ["pdf", "csv"]}\n{"text": "b"}\n{"text": "c", "gold": null}\n'
                    '{"text": "d", "gold": [7], "id": 3}\n')
    assert [q.gold for q in read_queries(data)] == [("pdf", "csv"), (), (), ("7",)]


def test_deep_or_huge_query_json_gives_one_line(tmp_path, capsys, fake_model, index_dir):
    for body in ('{"text": "a", "x": ' + "[" * 5000 + "]" * 5000 + "}",
                 '{"text": "a", "x": 1' + "0" * 5000 + "}"):
        data = tmp_path / "q.jsonl"
        data.write_text(body + "\n")
        with pytest.raises(SkillFormatError, match="q.jsonl:1"):
            read_queries(data)
        code, _, err = run_cli(capsys, ["calibrate", "-i", index_dir, "--data", data])
        assert_cli_error(code, err, "q.jsonl:1")


# ---------------------------------------------------------------------- calibration.json
@pytest.mark.parametrize("text,needle", [
    ('{"signal": "score", "threshold": 0.1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
    ('{"signal": "score", "threshold": NaN}', "NaN"),
    ('{"signal": "score", "threshold": 1e999}', "out of range"),
    ('{"signal": "score", "threshold": true}', "threshold"),
    ('{"signal": "score", "threshold": 1' + "0" * 5000 + "}", "digits"),
    ('[1, 2]', "threshold"),
], ids=["deep", "nan", "overflow", "bool", "huge-int", "list"])
def test_odd_calibration_json_gives_one_line(index_dir, capsys, fake_model, text, needle):
    (index_dir / "calibration.json").write_text(text)
    with pytest.raises(SkillsightError, match=needle):
        resolve_abstention(index_dir)
    code, _, err = run_cli(capsys, ["search", "-i", index_dir, "merge pdf"])
    assert_cli_error(code, err, "calibration")


def test_fifo_calibration_does_not_hang(index_dir):
    os.mkfifo(index_dir / "calibration.json")
    with pytest.raises(SkillsightError, match="not a regular file"):
        read_calibration(index_dir)


def test_empty_offtopic_list_is_refused_not_stored_as_nan(tmp_path, capsys, fake_model, index_dir):
    index = SkillIndex.load(index_dir, encoder=HashEncoder())
    answerable = [Task("a", "merge pdf pages", ("pdf",)), Task("b", "clean csv rows", ("csv",))]
    for offtopic in ([], {"empty": []}, {"a": [], "b": []}):
        with pytest.raises(SkillsightError, match="off-topic"):
            calibrate(index, answerable, offtopic)
    with pytest.raises(SkillsightError, match="NaN"):
        calibration_bytes({"signal": "score", "threshold": float("nan")})
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"text": q.text, "gold": list(q.gold)}) + "\n" for q in answerable))
    (tmp_path / "none.txt").write_text("# nothing here\n\n")
    labelled_only = tmp_path / "labelled.jsonl"  # every off-topic query has a gold skill in the index
    labelled_only.write_text(json.dumps({"text": "merge pdf", "gold": ["pdf"]}) + "\n")
    for off in (tmp_path / "none.txt", labelled_only):
        code, _, err = run_cli(capsys, ["-c", f"offtopic={off}", "calibrate", "-i", index_dir,
                                        "--data", data])
        assert_cli_error(code, err, "off-topic")
        assert not (index_dir / "calibration.json").exists()


# ---------------------------------------------------------------------- search(None)
@pytest.mark.parametrize("queries", [None, 5, 2.5, object(), {"a", "b"}],
                         ids=["none", "int", "float", "object", "set"])
def test_search_of_a_non_sequence_raises_query_error(index_dir, queries):
    index = SkillIndex.load(index_dir, encoder=HashEncoder())
    with pytest.raises(QueryError, match="string or a sequence"):
        index.search(queries, 2)
    with pytest.raises(QueryError):
        find_skills(index, queries, 2)


# ---------------------------------------------------------------------- overlapping sources
def test_overlapping_sources_are_refused(tmp_path, capsys, fake_model, library):
    (tmp_path / "link").symlink_to(library)
    for sources, needle in [([library, library / "pdf"], "inside"), ([library / "pdf", library], "inside"),
                            ([library, library], "same source"),
                            ([library, tmp_path / "link"], "same source"),
                            ([library, library / "pdf" / "SKILL.md"], "inside")]:
        with pytest.raises(SkillFormatError, match=needle):
            load_skills(sources)
        code, _, err = run_cli(capsys, ["index", *sources, "-o", tmp_path / "out"])
        assert_cli_error(code, err, needle)
        assert not (tmp_path / "out").exists()
    assert len(load_skills([library / "pdf", library / "csv"]).skills) == 2  # siblings are fine


# ---------------------------------------------------------------------- output checked first
class CountingEncoder(HashEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return super().encode(texts)


@pytest.mark.parametrize("output", ["non-index-folder", "file", "file-as-parent"])
def test_output_folder_is_checked_before_encoding(tmp_path, capsys, fake_model, library, output):
    fake_model["encoder"] = encoder = CountingEncoder()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    (tmp_path / "plain.txt").write_text("x")
    out, needle = {"non-index-folder": (tmp_path / "mine", "refusing"),
                   "file": (tmp_path / "plain.txt", "not a folder"),
                   "file-as-parent": (tmp_path / "plain.txt" / "idx", "plain.txt")}[output]
    code, _, err = run_cli(capsys, ["index", library, "-o", out])
    assert_cli_error(code, err, needle)
    assert encoder.calls == 0, "the library was encoded before the output folder was checked"
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"


# ---------------------------------------------------------------------- a symlinked index path
def test_index_and_update_through_a_symlink_keep_the_link(tmp_path, capsys, fake_model, library):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "idx"
    link = tmp_path / "idx-link"
    SkillIndex.build(load_skills([library / "pdf"]).skills, HashEncoder()).save(target)
    link.symlink_to(target)
    code, _, err = run_cli(capsys, ["index", library, "-o", link, "-q"])
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(SkillIndex.load(target, encoder=HashEncoder())) == 3
    (library / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: Changed.\n---\nnew body\n")
    code, _, err = run_cli(capsys, ["update", library, "-i", link, "-q"])
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert SkillIndex.load(link, encoder=HashEncoder()).skills[
        SkillIndex.load(link, encoder=HashEncoder()).ids.index("pdf")].description == "Changed."
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx-link", "lib", "real"]  # no stray temp link
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["idx"]


# ---------------------------------------------------------------------- disk full while saving
FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    sys.path.insert(0, {tests!r})
    from fakes import HashEncoder
    import skillsight_fast.models as models
    from skillsight_fast.cli import main
    models.load_encoder = lambda *a, **k: HashEncoder()  # the test encoder, as in fake_model
    from skillsight_fast import SkillIndex
    from skillsight_fast.library.skills import load_skills
    # compile (and cache) the kernels first: on a cold Numba cache, writing the cache under the
    # limit would fail with "File too large" before the save this test is about
    SkillIndex.build(load_skills([{lib!r}]).skills, HashEncoder())
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))
    sys.exit(main(["index", {lib!r}, "-o", {out!r}, "-q"]))
""")


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE behaviour is Linux's")
@pytest.mark.parametrize("limit", [600, 3000, 8000])
def test_a_full_disk_during_save_gives_one_clear_line(tmp_path, library, limit):
    """A write cut short (RLIMIT_FSIZE: the kernel refuses bytes past the limit, as on a full disk)."""
    for i in range(40):  # arrays of a few KB, so the limit cuts the numpy writes and the JSON files
        (library / f"s{i}").mkdir()
        (library / f"s{i}" / "SKILL.md").write_text(
            f"---\nname: s{i}\ndescription: Skill {i}.\n---\nwords {i}\n")
    out = tmp_path / "idx"
    SkillIndex.build(load_skills([library / "pdf"]).skills, HashEncoder()).save(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    script = FULL_DISK.format(tests=str(HERE), limit=limit, lib=str(library), out=str(out))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skillsight: error: cannot save the index"), proc.stderr
    assert "requested and" not in lines[0] or "disk is full" in lines[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the previous index, untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder
