"""The search kernels compile once per install: the first entry point compiles the whole set (and says
so once on stderr), every later process, whatever its entry point, loads it from Numba's cache; -q
silences the compile lines. Each process here is a fresh one on one empty cache folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillsight_fast.kernels._notice import NOTICE

ROOT = Path(__file__).resolve().parents[2]
SKILLS = ROOT / "data" / "personal" / "skills"
SEARCH = (
    "import sys; from skillsight_fast import SkillIndex; i = SkillIndex.load(sys.argv[1]); "
    "i.search(['write a pdf report', 'plot a csv file', 'call a rest api'], k=3); "
    "print(i.search(['write a pdf report'], k=1).ids[0].tolist())"
)


def run(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), "NUMBA_DEBUG_CACHE": "1"}
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=1200, check=False,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def saved(proc: subprocess.CompletedProcess) -> list[str]:
    """The kernels a process compiled (NUMBA_DEBUG_CACHE prints one "data saved" line per compile)."""
    return [line for line in proc.stdout.splitlines() if line.startswith("[cache] data saved")]


@pytest.mark.slow
@pytest.mark.model
def test_first_entry_point_compiles_the_set_and_later_ones_load_it(tmp_path):
    cache = tmp_path / "numba"
    cli = [sys.executable, "-m", "skillsight_fast.cli"]
    first = run(cache, *cli, "index", str(SKILLS), "-o", str(tmp_path / "idx"))
    assert first.stderr.count(NOTICE) == 1, first.stderr
    assert len(saved(first)) >= 10  # the whole set, not only what an index build calls
    assert list(cache.rglob("skillsight-kernels-*.stamp")), "no stamp after the whole set compiled"

    # another entry point (the Python API, batch and single query, on the memory-mapped index)
    second = run(cache, sys.executable, "-c", SEARCH, str(tmp_path / "idx"))
    assert saved(second) == [], saved(second)
    assert "[cache] data loaded" in second.stdout
    assert "compiling" not in second.stderr, second.stderr

    # a streaming build compiles its own build-only kernels, silently under -q
    third = run(cache, *cli, "-c", "stream=true", "index", str(SKILLS), "-o", str(tmp_path / "idx2"), "-q")
    assert saved(third) and all("sharded." in line for line in saved(third)), saved(third)
    assert "compiling" not in third.stderr, third.stderr
