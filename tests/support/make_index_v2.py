"""Write tests/data/index_v2: a small index saved in format version 2 (skills.jsonl, texts.jsonl), kept
so that later format versions are tested to still load it (tests/test_index_format.py).

Run once with the package at format version 2 (commit 62502b0); the folder is committed, never rewritten.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DATA = HERE.parent / "data"

from fakes import HashEncoder, toy_skills  # noqa: E402

from skillsight_fast import IndexConfig, SkillIndex  # noqa: E402

QUERIES = ["compute the volume of an stl mesh", "resize png thumbnails", "merge pdf pages"]


def main() -> None:
    skills = toy_skills(12)
    skills[0] = dataclasses.replace(skills[0], tags=("docs", "pdf"), when_to_use="When a PDF is involved.",
                                    description="Helps with pdf tasks — «unicode» ✓.")
    index = SkillIndex.build(skills, HashEncoder(), IndexConfig(document_vector="text"))
    out = DATA / "index_v2"
    index.save(out)
    res = index.search(QUERIES, k=5)
    expected = {"queries": QUERIES, "skill_ids": res.skill_ids, "scores": res.scores.tolist(),
                "evidence": res.evidence}
    (DATA / "index_v2_expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
