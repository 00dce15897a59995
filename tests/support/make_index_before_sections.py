"""Write tests/data/index_before_sections: a small index saved before IndexConfig was split into
sections and the cascade became a query-time object (issue 38), with its expected answers, kept so
that later code is tested to still load it and answer identically (tests/engine/test_format_compat.py).

The real data (data/personal, 16 skills), the bundled MiniLM encoder and the lookup-first cascade at its
default values (``fallback_below`` and ``lookup_min_pieces`` in the manifest's flat config) on the
``contextual`` tier: the default ``fitted`` tier of a small library carries the shipped 22 MB general
table, the contextual one only the library's own tokens. The static model's folder is not kept (45 MB):
the manifest names it by an absolute path that does not exist, so a load takes the folder of the same
name from the user's cache (what an index saved before the copy does). Run once before that change
(commit 4fe5e3d); the folder is committed, never rewritten.

The expected answers were recorded on a CPU without VNNI. ``index_before_sections.expected.vnni.json``
holds the same index's answers by the same code (commit 4fe5e3d, checked out beside the repository and
put first on PYTHONPATH) on a CPU with AVX-512 VNNI, where onnxruntime's int8 products do not saturate
and the int8 task encoder's vectors differ slightly (tests/support/cpu.py); the tests read the one of
their CPU's kind.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA = HERE.parent / "data"

from skillsight_fast import IndexConfig, SkillIndex, load_skills  # noqa: E402
from skillsight_fast.config import FALLBACK_BELOW, LOOKUP_MIN_PIECES  # noqa: E402

#: Short tasks (the transformer directly) and long ones (the lookup first, maybe the fallback).
QUERIES = [
    "commit my staged changes with a good message",
    "this query on the orders table takes 12 seconds, why is it so slow",
    "merge pdf pages",
    ("I have a big folder of server logs from last night's outage and I need to figure out which service "
     "started failing first, group the errors by type, count them per minute, and find the first stack trace "
     "that shows up before everything else goes wrong, then write a short summary for the incident report"),
    ("our team keeps writing commit messages like 'fix' and 'stuff' and I want a convention: a short "
     "imperative subject line under seventy two characters, a blank line, then a body that explains why the "
     "change was made, and maybe a hook that checks it before every commit so nobody forgets the rule again"),
    ("please translate this customer email from German into English, keep the polite tone and the formatting "
     "of the list of order numbers, and then draft a short reply in German thanking them and saying the "
     "replacement parts ship on Monday with tracking numbers sent by email"),
    ("I need help with something at work, there are a lot of things going on and my manager wants a summary "
     "of everything that happened this week across all the projects, including the meetings, the decisions "
     "that were taken, and what is still open, written so that someone new to the team can follow it without "
     "asking anybody"),  # long, and the lookup is unsure: the transformer answers again
]


def main() -> None:
    skills = load_skills([ROOT / "data" / "personal" / "skills"]).skills
    config = IndexConfig(query_encoder="contextual", fallback_below=FALLBACK_BELOW,
                         lookup_min_pieces=LOOKUP_MIN_PIECES)
    index = SkillIndex.build(skills, config=config)
    out = DATA / "index_before_sections"
    index.save(out)
    shutil.rmtree(out / "static_model")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["config"]["query_model"] = "/nonexistent/" + Path(index.config.encoder.query_model).name
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, allow_nan=False), encoding="utf-8")
    index = SkillIndex.load(out)
    res = index.search(QUERIES, k=10)
    expected = {"queries": QUERIES, "skill_ids": res.skill_ids, "scores": res.scores.tolist(),
                "evidence": res.evidence, "config": index.config.to_dict()}
    (DATA / "index_before_sections.expected.json").write_text(
        json.dumps(expected, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
