"""A kernel compiled (not loaded from Numba's cache) says so once on stderr; a cached load says nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from skillsight_fast.kernels._notice import NOTICE

ROOT = Path(__file__).resolve().parents[2]
CODE = (
    "import numpy as np; from skillsight_fast import kernels; "
    "print(kernels.transpose_csr(np.array([0, 1, 2], np.int64), np.array([1, 0], np.int32), 2)[0])"
)


def run(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_DISABLE_JIT", None)
    return subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_first_compile_says_so_once_and_a_cached_run_is_quiet(tmp_path):
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "[0 1 2]"
    assert first.stderr.count(NOTICE) == 1, first.stderr
    lines = (
        first.stderr.splitlines()
    )  # then a "still compiling" line every EVERY seconds, if it takes that long
    assert all(line == NOTICE or line.startswith("still compiling search kernels (") for line in lines), lines
    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert NOTICE not in second.stderr
