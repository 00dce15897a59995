"""How often the index-time prompt-injection screen flags the bundled skill libraries.

None of the bundled skills is an attack, so every flag is a false positive of the rules (a true match
of a rule in benign context: an installer one-liner, a security skill quoting an attack). Counts per
library and per rule, the flagged skills with their reasons, and, with ``--compare FILE`` (an older
``screen.py``), which skills the change flags newly or no longer.

    python bench/screen_library.py     # data/skillsbench, data/skill_pool, data/personal/skills
    git show 4fe5e3d:skillsight_fast/library/screen.py > /tmp/screen_v1.py   # the rules before issue 41
    python bench/screen_library.py --compare /tmp/screen_v1.py --json results/bench/screen_library.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.library.screen import SCREEN_VERSION, screen_skill  # noqa: E402
from skillsight_fast.library.skills import load_skills  # noqa: E402

LIBRARIES = ("data/skillsbench", "data/skill_pool", "data/personal/skills")


def _module(path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("old_screen", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_screen"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("libraries", nargs="*", default=list(LIBRARIES))
    p.add_argument("--compare", metavar="SCREEN_PY", help="an older screen.py to compare the flags with")
    p.add_argument("--json", metavar="FILE", help="write the counts and the flagged skills as JSON")
    args = p.parse_args()
    old = _module(args.compare) if args.compare else None
    out: dict = {"screen_version": SCREEN_VERSION, "load_average": os.getloadavg(), "libraries": {}}
    for lib in args.libraries:
        skills = load_skills([ROOT / lib]).skills
        t0 = time.perf_counter()
        flags = {s.id: screen_skill(s) for s in skills}
        seconds = time.perf_counter() - t0
        flagged = {sid: r for sid, r in flags.items() if r}
        rules = Counter(reason.split(":", 1)[0] for r in flagged.values() for reason in r)
        entry = {"skills": len(skills), "flagged": len(flagged), "rate": round(len(flagged) / len(skills), 5),
                 "reasons": dict(rules), "seconds": round(seconds, 2), "flagged_skills": flagged}
        rate = 100 * len(flagged) / len(skills)
        line = (f"{lib}: {len(flagged)} of {len(skills)} skills flagged ({rate:.2f} %), "
                f"{dict(rules)}, {seconds:.1f} s")
        if old is not None:
            before = {s.id for s in skills if old.screen_skill(s)}
            entry["newly_flagged"] = {sid: flagged[sid] for sid in sorted(set(flagged) - before)}
            entry["no_longer_flagged"] = sorted(before - set(flagged))
            line += f"; old rules {len(before)}, newly {len(entry['newly_flagged'])}, " \
                    f"no longer {len(entry['no_longer_flagged'])}"
        print(line)
        out["libraries"][lib] = entry
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
