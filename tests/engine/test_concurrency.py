"""Concurrency: ``SkillIndex.search`` from many threads gives exactly the serial results.

The kernels are ``nogil`` and keep no shared mutable state; parallel launches are serialised only
under Numba's ``workqueue`` layer, which is not thread-safe (see kernels/_launch.py). The lazy
encoder load is guarded by a lock, so 8 threads that search a freshly loaded index load it once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex, kernels, models
from skillsight_fast.kernels import compressed, fusion, lexical, projection, stats, topk

N_THREADS = 8
needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="NUMBA_DISABLE_JIT: no dispatchers or layers")


def dispatchers():
    for module in (compressed, fusion, lexical, projection, stats, topk):
        for name, obj in vars(module).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", obj


@needs_jit
def test_every_kernel_releases_the_gil():
    found = dict(dispatchers())
    assert len(found) >= 8, sorted(found)
    for name, disp in found.items():
        assert disp.targetoptions.get("nogil") is True, name


def queries(n: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["pdf", "merge", "csv", "docker", "git", "stl", "mesh", "email", "sql", "image", "resize", "pytest", "scrape", "html", "tables", "deploy"]
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 7)))) for _ in range(n)]


def run_threads(index: SkillIndex, qs: list[str], batch: int, k: int = 7):
    batches = [qs[i : i + batch] for i in range(0, len(qs), batch)]
    with ThreadPoolExecutor(N_THREADS) as pool:
        return list(pool.map(lambda b: index.search(b, k=k), batches))


def assert_same(serial, threaded):
    for s, t in zip(serial, threaded):
        np.testing.assert_array_equal(s.ids, t.ids)
        np.testing.assert_array_equal(s.scores, t.scores)
        np.testing.assert_array_equal(s.dense, t.dense)
        np.testing.assert_array_equal(s.lexical, t.lexical)
        assert s.evidence == t.evidence and s.skill_ids == t.skill_ids


@pytest.mark.parametrize("mmap,batch", [(False, 1), (True, 8)])
def test_threads_give_the_serial_results(tmp_path, mmap, batch):
    built = SkillIndex.build(toy_skills(300), HashEncoder())
    built.save(tmp_path / "idx")
    index = SkillIndex.load(tmp_path / "idx", mmap=mmap, encoder=HashEncoder())  # lazy term_ids
    qs = queries(200)
    serial = [index.search(qs[i : i + batch], k=7) for i in range(0, len(qs), batch)]
    assert_same(serial, run_threads(index, qs, batch))


class SlowLoad:
    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
        time.sleep(0.2)  # a model load takes a while: every thread arrives before it finishes
        return HashEncoder()


def test_lazy_encoder_loads_once_under_threads(tmp_path, monkeypatch):
    SkillIndex.build(toy_skills(20), HashEncoder()).save(tmp_path / "idx")
    index = SkillIndex.load(tmp_path / "idx")
    loader = SlowLoad()
    monkeypatch.setattr(models, "load_encoder", loader)
    barrier = threading.Barrier(N_THREADS)

    def search(q: str):
        barrier.wait()
        return index.search(q, k=3).skill_ids[0][0]

    with ThreadPoolExecutor(N_THREADS) as pool:
        tops = list(pool.map(search, ["stl mesh volume"] * N_THREADS))
    assert loader.calls == 1
    assert set(tops) == {"mesh-analysis"}


WORKQUEUE_CHILD = textwrap.dedent(
    """
    import sys
    from concurrent.futures import ThreadPoolExecutor
    import numba, numpy as np
    from fakes import HashEncoder, toy_skills
    from skillsight_fast import SkillIndex
    index = SkillIndex.build(toy_skills(200), HashEncoder())
    qs = [f"merge pdf {w} tables" for w in "docker git stl mesh sql csv email html".split()] * 10
    serial = [index.search(q, k=5) for q in qs]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda q: index.search(q, k=5), qs))
    same = all((s.ids == t.ids).all() and (s.scores == t.scores).all() for s, t in zip(serial, threaded))
    print(numba.threading_layer(), same)
    """
)


@needs_jit
def test_workqueue_layer_does_not_abort_under_threads():
    """Numba's workqueue layer aborts the process on concurrent parallel launches unless guarded."""
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1] / "support"), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", WORKQUEUE_CHILD], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["workqueue", "True"]


def test_kernels_from_threads_match_serial():
    rng = np.random.default_rng(3)
    docs = rng.standard_normal((500, 32)).astype(np.float32)
    qs = [rng.standard_normal((int(rng.integers(1, 9)), 32)).astype(np.float32) for _ in range(100)]
    basis = np.linalg.qr(rng.standard_normal((32, 4)))[0].T.astype(np.float32)

    def work(q):
        p = kernels.project_out_background(q, basis, renormalize=True)
        return kernels.dense_topk(p, docs, 10)

    serial = [work(q) for q in qs]
    with ThreadPoolExecutor(N_THREADS) as pool:
        threaded = list(pool.map(work, qs))
    for (si, ss), (ti, ts) in zip(serial, threaded):
        np.testing.assert_array_equal(si, ti)
        np.testing.assert_array_equal(ss, ts)
