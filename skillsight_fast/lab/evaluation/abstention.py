"""Abstention on one's own library: are off-topic prompts silent, and what do on-topic ones lose?

``skillsight eval -i IDX --offtopic PROMPTS`` reads a prompt file, asks the index each prompt with
its abstention rule (the one derived at build, ``calibration.json``, or ``--min-cosine``) and
without any, and reports:

* ``offtopic_silent``: the share of off-topic prompts left with no hit (Wilson 95% interval);
* ``right_first`` without and with the rule: the share of on-topic prompts whose first hit is one
  of their gold skills (Wilson 95% interval);
* ``lost``: right-first without minus with the rule (paired bootstrap 95% interval), and
  ``ontopic_silent``, the share of on-topic prompts left with no hit at all.

Prompt files: JSON lines ``{"prompt": "...", "gold": ["skill-id", ...]}`` (``"gold": []`` or no
``gold``: off topic; ``query``/``text`` are read as ``prompt`` too), or a ``.txt`` file with one
off-topic prompt a line (``#`` comments).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.errors import QueryError

if TYPE_CHECKING:
    from skillsight_fast.engine.abstention import Abstention
    from skillsight_fast.engine.index import SkillIndex

#: Largest prompt file read (bytes).
MAX_PROMPT_FILE_BYTES = 16 << 20


def read_prompts(path: str | Path) -> list[tuple[str, frozenset[str]]]:
    """``(prompt, gold ids)`` of every line of a prompt file (empty gold: off topic).

    Raises
    ------
    QueryError
        A missing or malformed file, or one with no prompt.
    """
    from skillsight_fast.limits import read_regular_file

    p = Path(path).expanduser()
    raw = read_regular_file(p, MAX_PROMPT_FILE_BYTES, error=QueryError, what="prompt file")
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    out: list[tuple[str, frozenset[str]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if p.suffix == ".txt":
            out.append((line, frozenset()))
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QueryError(f"{p}:{n}: not JSON ({exc.msg}); a line is {{\"prompt\": ..., \"gold\": [ids]}}") from None
        prompt = rec.get("prompt", rec.get("query", rec.get("text"))) if isinstance(rec, dict) else None
        gold = rec.get("gold", []) if isinstance(rec, dict) else None
        if isinstance(gold, str):
            gold = [gold]
        if (not isinstance(prompt, str) or not prompt.strip() or not isinstance(gold, list)
                or not all(isinstance(g, str) for g in gold)):
            raise QueryError(f"{p}:{n}: a line is {{\"prompt\": \"...\", \"gold\": [\"skill-id\", ...]}}")
        out.append((prompt.strip(), frozenset(gold)))
    if not out:
        raise QueryError(f"{p}: no prompt")
    return out


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95% interval of a proportion (NaN, NaN for n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


def evaluate_abstention(index: SkillIndex, prompts: Sequence[tuple[str, frozenset[str]]],
                        rule: Abstention | None, *, k: int = 3, cut: str = "hit", n_boot: int = 2000,
                        seed: int = 0) -> dict[str, Any]:
    """Off-topic silence and on-topic loss of ``rule`` on ``prompts`` (see the module docstring)."""
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.metrics import bootstrap_diff

    known = set(index.ids)
    on = [(p, g) for p, g in prompts if g]
    off = [p for p, g in prompts if not g]
    missing = sorted({x for _, g in on for x in g} - known)
    if on and missing and all(not (g & known) for _, g in on):
        raise QueryError(f"no gold id of the prompt file is in this index (e.g. {missing[0]!r})")
    texts = [p for p, _ in on] + off

    def ask(r: Abstention | None) -> list[list[str]]:
        answers = find_skills(index, texts, k, abstention=r, cut=cut, pins=[]) if texts else []
        return [[h.id for h in a.hits] for a in answers]

    with_rule, without = ask(rule), ask(None)
    n_on = len(on)
    right = np.array([bool(h) and h[0] in g for h, (_, g) in zip(with_rule[:n_on], on)], float)
    right0 = np.array([bool(h) and h[0] in g for h, (_, g) in zip(without[:n_on], on)], float)
    silent_off = int(sum(not h for h in with_rule[n_on:]))
    lost, lo, hi = bootstrap_diff(right0, right, n_boot=n_boot, seed=seed) if n_on else (math.nan,) * 3
    return {
        "rule": rule.to_dict() if rule is not None else None,
        "k": k, "cut": cut, "n_ontopic": n_on, "n_offtopic": len(off),
        "offtopic_silent": silent_off / len(off) if off else math.nan,
        "offtopic_silent_ci": wilson(silent_off, len(off)),
        "right_first_without": float(right0.mean()) if n_on else math.nan,
        "right_first": float(right.mean()) if n_on else math.nan,
        "right_first_ci": wilson(int(right.sum()), n_on),
        "lost": lost, "lost_ci": (lo, hi),
        "ontopic_silent": float(np.mean([not h for h in with_rule[:n_on]])) if n_on else math.nan,
        "unknown_gold": missing[:20],
        "offtopic_answered": [p for p, h in zip(off, with_rule[n_on:]) if h][:20],
        "ontopic_lost": [p for (p, g), h, h0 in zip(on, with_rule, without) if h0 and h0[0] in g
                         and not (h and h[0] in g)][:20],
    }


def format_abstention_eval(r: dict[str, Any]) -> str:
    """The report of :func:`evaluate_abstention` as text."""
    def pct(x: float) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"

    rule = r["rule"]
    said = "none" if rule is None else "{} >= {:.4f}".format(rule["signal"], rule["threshold"])
    lines = [f"rule: {said} (k = {r['k']}, cut per {r['cut']})"]
    if r["n_offtopic"]:
        lo, hi = r["offtopic_silent_ci"]
        lines.append(f"off-topic prompts silent: {pct(r['offtopic_silent'])} of {r['n_offtopic']} "
                     f"[{pct(lo)}, {pct(hi)}]")
        lines += [f"  answered: {p}" for p in r["offtopic_answered"]]
    if r["n_ontopic"]:
        lo, hi = r["lost_ci"]
        lines.append(f"on-topic prompts right first: {pct(r['right_first_without'])} without the rule, "
                     f"{pct(r['right_first'])} with it, of {r['n_ontopic']}; lost {pct(r['lost'])} "
                     f"[{pct(lo)}, {pct(hi)}]; silent {pct(r['ontopic_silent'])}")
        lines += [f"  lost: {p}" for p in r["ontopic_lost"]]
    if r["unknown_gold"]:
        lines.append(f"gold ids not in the index: {', '.join(r['unknown_gold'][:5])}")
    return "\n".join(lines)
