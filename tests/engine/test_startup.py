"""The one-shot search skips Numba's SciPy/BLAS probe and leaves SciPy importable afterwards."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("scipy")

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from skillsight_fast._startup import without_scipy_probe
    from skillsight_fast.kernels import dense_topk
    docs = np.eye(4, 8, dtype=np.float32)
    with without_scipy_probe():
        ids, scores = dense_topk(docs[:2].copy(), docs, 3)
        assert sys.modules["scipy.linalg"] is None, "the probe imported scipy.linalg"
        assert not [m for m in sys.modules if m.startswith("scipy.linalg.")]
    assert ids[:, 0].tolist() == [0, 1]
    assert sys.modules.get("scipy.linalg", "gone") == "gone"  # the block is undone
    import scipy.linalg  # and SciPy imports as usual afterwards
    print("ok")
""")


def test_search_kernels_run_without_the_scipy_probe():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_an_already_imported_scipy_is_left_alone():
    import scipy.linalg  # noqa: F401

    from skillsight_fast._startup import without_scipy_probe

    with without_scipy_probe():
        assert sys.modules["scipy.linalg"] is not None
    assert sys.modules["scipy.linalg"] is not None


@pytest.mark.parametrize("preset", [None, "3"])
def test_one_blas_thread_only_when_the_user_set_none(preset):
    import os

    code = ("import os, sys; from skillsight_fast._startup import one_blas_thread; one_blas_thread(); "
            "import numpy; one_blas_thread(); print(os.environ.get('OPENBLAS_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset:
        env["OPENBLAS_NUM_THREADS"] = preset
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (preset or "1")
