"""Trigger evaluation: the skill-creator's trigger-eval files, run offline against an index.

A skill author writes (anthropics/skills, ``skills/skill-creator/SKILL.md``, "Description
Optimization") a JSON list of prompts, each labelled with whether the skill should trigger::

    [{"query": "the user prompt", "should_trigger": true},
     {"query": "another prompt", "should_trigger": false}]

The file names no skill; :func:`read_triggers` takes it from ``skill``, else from the file's name
(also for each file of a folder: ``mesh-analysis.json`` is the skill whose id or name is
``mesh-analysis``, or whose id ends in ``:mesh-analysis`` or ``/mesh-analysis``). Keys other
than ``query``, ``should_trigger`` and an optional per-item ``skill`` are ignored.

"The skill triggers" for a prompt here means: :func:`~skillsight_fast.agents.find.find_skills` returns it
(or a copy collapsed into one of its hits) among the top ``k`` after the cut at the abstention
threshold. Pinned skills do not count (they come back for every prompt).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.errors import SkillsightError
from skillsight_fast.limits import load_json, read_regular_file

if TYPE_CHECKING:
    from skillsight_fast.engine.abstention import Abstention
    from skillsight_fast.engine.index import SkillIndex

#: Largest trigger file read (bytes).
MAX_TRIGGER_FILE_BYTES = 8 * 1024 * 1024


class TriggerFileError(SkillsightError):
    """A trigger-eval file that cannot be read or is not in the format."""


@dataclass(frozen=True)
class TriggerCase:
    """One labelled prompt: ``skill`` should (or should not) trigger for ``query``."""

    skill: str
    query: str
    should_trigger: bool
    source: str = ""


def _parse(path: Path, skill: str | None) -> list[TriggerCase]:
    raw = read_regular_file(path, MAX_TRIGGER_FILE_BYTES, error=TriggerFileError, what="trigger file")
    data = load_json(raw, error=TriggerFileError, what=str(path))
    if isinstance(data, dict) and isinstance(data.get("evals", data.get("queries")), list):
        data = data.get("evals", data.get("queries"))
    if not isinstance(data, list):
        raise TriggerFileError(f"{path}: expected a JSON list of {{\"query\", \"should_trigger\"}} objects")
    out = []
    for i, item in enumerate(data):
        where = f"{path}: item {i}"
        if not isinstance(item, dict):
            raise TriggerFileError(f"{where} is not an object")
        query, label = item.get("query"), item.get("should_trigger")
        if not isinstance(query, str) or not query.strip():
            raise TriggerFileError(f"{where}: 'query' must be a non-empty string")
        if not isinstance(label, bool):
            raise TriggerFileError(f"{where}: 'should_trigger' must be true or false")
        target = item.get("skill", skill)
        if not isinstance(target, str) or not target:
            raise TriggerFileError(
                f"{where}: no skill to test (give --skill ID, or name the file after the skill)")
        out.append(TriggerCase(target, query, label, str(path)))
    return out


def read_triggers(path: str | Path, skill: str | None = None) -> list[TriggerCase]:
    """The cases of a trigger-eval file, or of every ``*.json`` in a folder (the skill: ``skill``,
    else the file's name without ``.json``).

    Raises
    ------
    TriggerFileError
        Missing or malformed file, or no skill to test.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.glob("*.json") if f.is_file())
        if not files:
            raise TriggerFileError(f"{p}: no .json trigger files in the folder")
        return [c for f in files for c in _parse(f, skill or f.stem)]
    if not p.is_file():
        raise TriggerFileError(f"{p}: no such trigger file or folder")
    return _parse(p, skill or p.stem)


def resolve_skill(index: SkillIndex, name: str) -> int:
    """The row of the skill a trigger file names: its id, else its unique name, else the unique id
    ending in ``:name`` or ``/name`` (or ``:name@...``, a skill of several tasks: the first).

    Raises
    ------
    TriggerFileError
        No skill, or several, match.
    """
    ids = index.ids
    if name in ids:
        return ids.index(name)
    for pick in (lambda m: m.name == name,
                 lambda m: m.id.endswith((":" + name, "/" + name)),
                 lambda m: (":" + name + "@") in m.id):
        rows = [j for j, m in enumerate(index.skills) if pick(m)]
        if len(rows) == 1 or (rows and len({index.skills[j].id.split("@")[0] for j in rows}) == 1):
            return rows[0]  # one skill, or one skill vendored once per task (id@task)
        if len(rows) > 1:
            first = ", ".join(index.skills[j].id for j in rows[:4])
            raise TriggerFileError(
                f"{name!r} matches {len(rows)} skills ({first}...); name the skill by its id")
    raise TriggerFileError(f"no skill {name!r} in the index")


def evaluate_triggers(index: SkillIndex, cases: Sequence[TriggerCase], *, k: int = 5,
                      abstention: Abstention | None = None, cut: str = "hit", n_boot: int = 2000,
                      seed: int = 0) -> dict[str, Any]:
    """Trigger rate of the should-trigger prompts and false-trigger rate of the others.

    Returns
    -------
    dict
        ``overall`` and ``skills`` (per skill): ``n_should``, ``n_should_not``, ``trigger_rate``
        (share of should-trigger prompts that retrieve the skill in the top k) and
        ``false_trigger_rate`` (share of should-not prompts that do), each with a 95% bootstrap
        interval over prompts, ``top1_rate`` (the skill is the first hit), ``pass_rate`` (the
        skill-creator's pass: triggered when it should, not when it should not); ``failures``:
        each failed prompt with the skill's rank (None: not returned) and the first hit.
    """
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.metrics import bootstrap_mean

    if not cases:
        raise TriggerFileError("no trigger cases")
    rows = {name: resolve_skill(index, name) for name in dict.fromkeys(c.skill for c in cases)}
    answers = find_skills(index, [c.query for c in cases], k, abstention=abstention, cut=cut, pins=[])
    triggered = np.zeros(len(cases), bool)
    top1 = np.zeros(len(cases), bool)
    failures = []
    metas = index.skills
    for i, (case, answer) in enumerate(zip(cases, answers)):
        target = metas[rows[case.skill]].id
        rank = next((r for r, h in enumerate(answer.hits, 1) if target == h.id or target in h.copies), None)
        triggered[i] = rank is not None
        top1[i] = rank == 1
        if triggered[i] != case.should_trigger:
            failures.append({"skill": target, "query": case.query, "should_trigger": case.should_trigger,
                             "rank": rank, "first_hit": answer.hits[0].id if answer.hits else None})
    labels = np.array([c.should_trigger for c in cases], bool)

    def block(mask: np.ndarray) -> dict[str, Any]:
        pos, neg = mask & labels, mask & ~labels
        out: dict[str, Any] = {"n_should": int(pos.sum()), "n_should_not": int(neg.sum())}
        for key, sel, values in (("trigger_rate", pos, triggered), ("false_trigger_rate", neg, triggered),
                                 ("top1_rate", pos, top1)):
            v = values[sel].astype(float)
            out[key] = float(v.mean()) if v.size else None
            out[key + "_ci"] = list(bootstrap_mean(v, n_boot=n_boot, seed=seed)) if v.size else None
        passed = (triggered == labels)[mask].astype(float)
        out["pass_rate"] = float(passed.mean()) if passed.size else None
        return out

    skills = {metas[row].id: block(np.array([rows[c.skill] == row for c in cases]))
              for row in dict.fromkeys(rows.values())}
    return {"k": k, "cut": cut, "abstention": abstention.to_dict() if abstention is not None else None,
            "n_cases": len(cases), "overall": block(np.ones(len(cases), bool)), "skills": skills,
            "failures": failures}


def format_triggers(result: dict[str, Any]) -> str:
    """The per-skill table and the failed prompts, as text."""
    rule = result["abstention"]
    thr = f"{rule['signal']} >= {rule['threshold']:.4f}" if rule else "no threshold"
    lines = [(f"trigger evaluation: {result['n_cases']} prompts, top {result['k']}, "
              f"cut per {result['cut']} at {thr}"),
             f"{'skill':<44}{'n+':>4}{'n-':>4}{'trigger':>9}{'false':>8}{'top-1':>8}{'pass':>7}"]

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    for sid, r in [*result["skills"].items(), ("all", result["overall"])]:
        lines.append(f"{sid[:43]:<44}{r['n_should']:>4}{r['n_should_not']:>4}{pct(r['trigger_rate']):>9}"
                     f"{pct(r['false_trigger_rate']):>8}{pct(r['top1_rate']):>8}{pct(r['pass_rate']):>7}")
    o = result["overall"]
    if o["trigger_rate_ci"] and o["false_trigger_rate_ci"]:
        lines.append(f"95% intervals: trigger {pct(o['trigger_rate_ci'][0])}-{pct(o['trigger_rate_ci'][1])}, "
                     f"false {pct(o['false_trigger_rate_ci'][0])}-{pct(o['false_trigger_rate_ci'][1])}")
    if result["failures"]:
        lines.append("failed prompts:")
        for f in result["failures"]:
            what = "missed" if f["should_trigger"] else "false trigger"
            lines.append(f"  [{what}] {f['skill']}: {f['query'][:80]!r} (rank {f['rank'] or '-'}, "
                         f"first hit {f['first_hit'] or '-'})")
    return "\n".join(lines)


def dumps(result: dict[str, Any]) -> str:
    """JSON text of a result."""
    return json.dumps(result, ensure_ascii=False)
