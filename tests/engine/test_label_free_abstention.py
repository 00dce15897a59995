"""Label-free abstention: the rule derived at build, where it is stored, and every surface that uses it.

The rule's arithmetic is checked against brute-force NumPy references; the end-to-end tests run the
real MiniLM on the personal-size library shipped as an evaluation set (``data/personal``).
"""

from __future__ import annotations

import io
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder

from skillsight_fast.agents.find import find_skills
from skillsight_fast.engine.abstention import (
    balanced_threshold,
    label_free_threshold,
    pseudo_tasks,
    refine_threshold,
    upper_fence,
)
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.errors import IndexFormatError
from skillsight_fast.library.skills import Skill

ROOT = Path(__file__).resolve().parents[2]
PERSONAL = ROOT / "data" / "personal"
OFF_TOPIC = "what should I cook tonight?"


# ---------------------------------------------------------------------- the rule's arithmetic


def _brute_balanced(on: np.ndarray, off: np.ndarray) -> tuple[float, float]:
    """Every candidate threshold tried: each value, and each value's next float, and -inf."""
    values = np.concatenate([on, off])
    cands = sorted(set(values.tolist()) | set(np.nextafter(values, np.inf).tolist()))
    best_t, best_e = -math.inf, 1.0
    for t in cands:
        e = float(np.mean(off >= t) + np.mean(on < t))
        if e < best_e - 1e-12:
            best_t, best_e = t, e
    return best_t, best_e


@pytest.mark.parametrize("seed", range(6))
def test_balanced_threshold_is_the_smallest_minimiser(seed):
    rng = np.random.default_rng(seed)
    on = np.round(rng.normal(0.6, 0.15, rng.integers(1, 40)), 2)  # rounding makes ties
    off = np.round(rng.normal(0.3, 0.15, rng.integers(1, 40)), 2)
    t, e = balanced_threshold(on, off)
    bt, be = _brute_balanced(on, off)
    assert e == pytest.approx(be) and t == pytest.approx(bt)


def test_no_separation_means_no_threshold():
    assert balanced_threshold(np.array([0.1, 0.2]), np.array([0.5, 0.6])) == (-math.inf, 1.0)
    assert label_free_threshold(np.array([0.1, 0.2]), np.array([0.5, 0.6]))[0] == -math.inf


def test_label_free_threshold_is_the_fence_capped_by_the_balanced_one():
    off = np.array([0.10, 0.12, 0.13, 0.15, 0.16, 0.18, 0.55])  # one shipped task the library is about
    on = np.array([0.60, 0.70, 0.80, 0.90])  # every pseudo-task above it: balanced sits on the outlier
    q1, q3 = np.quantile(off, [0.25, 0.75])
    assert upper_fence(off) == pytest.approx(q3 + 1.5 * (q3 - q1))
    t, balanced, fence = label_free_threshold(on, off)
    assert t == fence < balanced  # the outlier does not set the threshold
    # a library about everyday life: the off-topic bulk scores like its own tasks, the cap holds
    off2 = np.array([0.50, 0.52, 0.55, 0.58, 0.60, 0.62, 0.65])
    t2, balanced2, fence2 = label_free_threshold(on, off2)
    assert balanced == pytest.approx(0.55)
    assert t2 == balanced2 < fence2


def test_labelled_refinement_never_gives_away_an_answerable_task_for_no_gain():
    answerable = np.array([0.31, 0.45, 0.50, 0.62, 0.70])
    offtopic = np.array([0.10, 0.20, 0.25])
    # anything in (0.25, 0.31] rejects every off-topic task and keeps every answerable one
    t = refine_threshold(answerable, offtopic, max_loss=0.2)
    assert 0.25 < t <= 0.31 and np.all(answerable >= t)
    # an off-topic task above an answerable one: losing that answerable task buys one more rejection
    # out of 3 (1/3 > 1/5), so the threshold may pass it, but no further than max_loss allows
    t2 = refine_threshold(answerable, np.array([0.10, 0.20, 0.40]), max_loss=0.2)
    assert t2 == pytest.approx(np.nextafter(0.40, 1)) and np.mean(answerable < t2) <= 0.2
    t3 = refine_threshold(answerable, np.array([0.10, 0.20, 0.40]), max_loss=0.0)
    assert t3 == pytest.approx(0.31)


def test_pseudo_tasks_come_from_each_skills_own_fields():
    skills = [Skill("git-commit", "git-commit_messages", "Write commit messages.",
                    "# Title\n\n```\ncode here is skipped\n```\n- Use this when the user asks to commit work. More.\n",
                    when_to_use="when committing")]
    texts, rows = pseudo_tasks(skills, [s.body for s in skills])
    assert texts == ["git commit messages", "Write commit messages.", "when committing",
                     "Use this when the user asks to commit work."]
    assert rows.tolist() == [0, 0, 0, 0]
    many = [Skill(f"s{i}", f"s{i}", f"Skill number {i}.", "") for i in range(300)]
    texts, rows = pseudo_tasks(many, limit=50)
    assert len(set(rows.tolist())) == 50 and rows.tolist() == sorted(rows.tolist())


# ---------------------------------------------------------------------- stored in the index


def _small_library() -> list[Skill]:
    return [
        Skill("time/now", "get_current_time", "Get current time in a specific timezone", "timezone name"),
        Skill("time/convert", "convert_time", "Convert time between timezones",
              "source timezone into target timezone, e.g. Asia/Tokyo"),
        Skill("pdf", "pdf", "Merge and split PDF files.", "Use pypdf to merge pages in documents."),
        Skill("csv", "csv", "Clean CSV files.", "Drop duplicate rows in a spreadsheet."),
        Skill("docker", "docker", "Write docker compose files.", "Services, networks and volumes."),
    ]


def test_the_derived_rule_is_stored_loaded_and_shown(tmp_path, capsys):
    from skillsight_fast.cli import main

    index = SkillIndex.build(_small_library(), HashEncoder())
    rule = index.state.abstention
    assert rule["source"] == "derived" and rule["signal"] == "cosine" and rule["n_offtopic"] > 50
    assert rule["n_pseudo"] >= 10 and rule["query_encoder"] == "transformer"
    index.save(tmp_path / "idx")
    assert SkillIndex.load(tmp_path / "idx").state.abstention == rule
    assert main(["info", "-i", str(tmp_path / "idx"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["abstention"]["derived"] == rule
    assert info["abstention"]["in_use"] == ("derived" if rule["threshold"] is not None else "none")
    assert main(["info", "-i", str(tmp_path / "idx")]) == 0
    assert "abstention " in capsys.readouterr().out
    # a damaged rule is refused with a message, not used
    manifest = tmp_path / "idx" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["abstention"]["threshold"] = "high"
    manifest.write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match="abstention"):
        SkillIndex.load(tmp_path / "idx")


def test_update_derives_the_rule_again(tmp_path):
    from skillsight_fast.engine.update import update_index

    skills = _small_library()
    SkillIndex.build(skills[:4], HashEncoder()).save(tmp_path / "idx")
    before = SkillIndex.load(tmp_path / "idx").state.abstention
    update_index(tmp_path / "idx", skills, encoder=HashEncoder())
    after = SkillIndex.load(tmp_path / "idx").state.abstention
    assert before is not None and after is not None and after["n_pseudo"] > before["n_pseudo"]


def test_find_skills_uses_the_index_rule_by_default():
    index = SkillIndex.build(_small_library(), HashEncoder())
    index.state.abstention = dict(index.state.abstention, threshold=2.0)  # above any cosine
    (answer,) = find_skills(index, "merge pdf pages", k=3)
    assert answer.hits == [] and answer.abstained and answer.abstention["threshold"] == 2.0
    (answer,) = find_skills(index, "merge pdf pages", k=3, abstention=None)
    assert answer.hits and answer.hits[0].id == "pdf"
    with pytest.raises(Exception, match="abstention"):
        find_skills(index, "merge pdf pages", abstention="labels")


def test_an_index_built_without_the_rule_keeps_every_hit():
    skills = _small_library()
    enc = HashEncoder()
    index = SkillIndex.from_embeddings(skills, enc.encode([s.text for s in skills]), encoder=enc, derive=False)
    assert index.state.abstention is None
    (answer,) = find_skills(index, "merge pdf pages", k=2)
    assert len(answer.hits) == 2  # no rule: every hit kept


def test_stop_words_are_never_evidence_even_in_a_small_library():
    from skillsight_fast.cli.core import no_evidence_reason

    index = SkillIndex.build(_small_library(), HashEncoder())
    terms, ptr = index.evidence_tokens(["what time is it in Tokyo", "into it"])
    vocab = index.lexical.lexicon.vocab
    first = [vocab[t] for t in terms[ptr[0] : ptr[1]]]
    assert "in" in index.lexical.lexicon.term_ids and "in" not in first and "is" not in first
    assert set(first) <= {"time", "tokyo"} and "tokyo" in first
    assert ptr[2] == ptr[1]  # "into it": nothing left
    reason = no_evidence_reason(index, "into it")
    assert "stop-words: into, it" in reason
    (answer,) = find_skills(index, "what is it in", k=2, abstention=None)
    assert all(h.evidence == [] and h.lexical == 0.0 for h in answer.hits)


# ---------------------------------------------------------------------- the hook's options


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_hook_help_prints_the_options_on_a_terminal_only():
    from skillsight_fast.agents.hook import main

    out = io.StringIO()
    assert main(["claude-code", "--help"], stdin=_Terminal(""), stdout=out) == 0
    text = out.getvalue()
    assert all(opt in text for opt in ("--min-cosine", "--no-abstain", "-k", "--index", "--budget"))
    out = io.StringIO()  # a host pipes JSON: never help text in the model's context
    assert main(["claude-code", "-i", "x", "--help"], stdin=io.StringIO("{}"), stdout=out) == 0
    assert out.getvalue() == ""


# ---------------------------------------------------------------------- the real model, the personal library


@pytest.fixture(scope="module")
def personal_index(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    from skillsight_fast.cli import main

    idx = tmp_path_factory.mktemp("personal") / "idx"
    assert main(["index", str(PERSONAL / "skills"), "-o", str(idx), "-q"]) == 0
    return idx


def _hook(index: Path, prompt: str, *args: str, env: dict | None = None) -> str:
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": prompt})
    done = subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "hook", "claude-code", "-i", str(index),
                           *args], input=payload.encode(), capture_output=True, timeout=120,
                          env=env or os.environ.copy())
    assert done.returncode == 0 and done.stderr == b""
    if not done.stdout:
        return ""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


@pytest.mark.model
def test_hook_options_k_min_cosine_and_no_abstain(personal_index):
    on = "my pod keeps restarting with CrashLoopBackOff"
    lines = [x for x in _hook(personal_index, on).splitlines() if x.startswith("- ")]
    assert lines and lines[0].startswith("- kubernetes-deploy (")
    assert len([x for x in _hook(personal_index, on, "-k", "1").splitlines() if x.startswith("- ")]) == 1
    assert _hook(personal_index, on, "--min-cosine", "0.99") == ""
    assert _hook(personal_index, OFF_TOPIC) == ""
    forced = [x for x in _hook(personal_index, OFF_TOPIC, "--no-abstain", "-k", "2").splitlines()
              if x.startswith("- ")]
    assert len(forced) == 2


@pytest.mark.model
def test_eval_offtopic_on_the_personal_library(personal_index, tmp_path, capsys):
    from skillsight_fast.cli import main

    out = tmp_path / "abstention.json"
    assert main(["-c", "bootstrap=200", "eval", "-i", str(personal_index), "--offtopic",
                 str(PERSONAL / "prompts.jsonl"), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "off-topic prompts silent" in text and "on-topic prompts right first" in text
    r = json.loads(out.read_text())
    assert r["n_offtopic"] == 30 and r["n_ontopic"] == 32 and r["rule"]["signal"] == "cosine"
    # the targets on this library: >= 95% of off-topic prompts silent, <= 5 points lost
    assert r["offtopic_silent"] >= 0.95 and r["lost"] <= 0.05
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": 3}\n')
    assert main(["eval", "-i", str(personal_index), "--offtopic", str(bad)]) == 1
    assert "a line is" in capsys.readouterr().err


@pytest.mark.model
def test_fresh_home_index_install_and_the_hook_answers(tmp_path):
    pytest.importorskip("onnxruntime")
    home = tmp_path / "home"
    shutil.copytree(PERSONAL / "skills", home / ".claude" / "skills")
    project = tmp_path / "proj"
    project.mkdir()
    # this checkout's package, wherever the host runs the hook from
    paths = [str(ROOT), *(str(Path(x).resolve()) for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x)]
    env = dict(os.environ, HOME=str(home), PYTHONPATH=os.pathsep.join(paths))
    env.pop("XDG_RUNTIME_DIR", None)
    cli = [sys.executable, "-m", "skillsight_fast.cli"]
    subprocess.run([*cli, "index", str(home / ".claude" / "skills"), "-o", str(home / "idx"), "-q"],
                   check=True, env=env, cwd=project, timeout=600)
    subprocess.run([*cli, "install", "claude-code", "-i", str(home / "idx")], check=True, env=env, cwd=project,
                   timeout=120, capture_output=True)
    # the user's settings by default (or the project's, with --project)
    written = [f for f in (home / ".claude" / "settings.json", project / ".claude" / "settings.json") if f.is_file()]
    settings = json.loads(written[0].read_text())
    (entry,) = settings["hooks"]["UserPromptSubmit"]
    command = entry["hooks"][0]["command"]

    def run(prompt: str) -> bytes:
        payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": prompt}).encode()
        argv = shlex.split(command)
        if Path(argv[0]).name == "skillsight":  # the console script of this environment
            argv = [*cli, *argv[1:]]
        done = subprocess.run(argv, input=payload, capture_output=True, env=env, cwd=project, timeout=120)
        assert done.returncode == 0
        return done.stdout

    assert run(OFF_TOPIC) == b""
    answer = json.loads(run("fix my docker-compose file, postgres starts after the app"))
    first = answer["hookSpecificOutput"]["additionalContext"].splitlines()[1]
    assert first.startswith("- docker-compose (")


@pytest.mark.model
@pytest.mark.slow
def test_static_tier_k3_gives_three_distinct_skills(tmp_path):
    from skillsight_fast.agents.find import DUPLICATE_COSINE
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.library.skills import load_skills

    pytest.importorskip("onnxruntime")
    skills = load_skills([str(PERSONAL / "skills")]).skills
    index = SkillIndex.build(skills, config=IndexConfig(query_encoder="static"))
    dup = index.state.abstention["duplicate_cosine"]
    assert dup is None or dup > DUPLICATE_COSINE  # static vectors sit close together: a stricter cut
    (answer,) = find_skills(index, "commit my staged changes with a good message", k=3, abstention=None)
    ids = [h.id for h in answer.hits]
    assert len(ids) == 3 and len(set(ids)) == 3 and ids[0] == "git-commit-messages"


def test_stopword_mask_by_lookup_equals_the_pass_over_the_vocabulary():
    """The mask a loaded index computes by looking each stop-word up (a million-skill vocabulary is
    never walked) is the mask of the plain pass, on a vocabulary with and without stop-words."""
    from skillsight_fast.engine.lexicon import STOPWORDS, stopword_mask

    words = sorted(STOPWORDS)
    for vocab in (sorted({"csv", "chart", "tokyo", *words[:7], words[-1]}), ["csv", "pdf"], []):
        lookup = {t: i for i, t in enumerate(vocab)}
        want = np.array([t in STOPWORDS for t in vocab], bool)
        np.testing.assert_array_equal(stopword_mask(vocab), want)
        np.testing.assert_array_equal(stopword_mask(vocab, lookup), want)
