"""Atomic saves: a process killed at random points while saving never loses the index.

A child process saves two different indexes into the same folder in a loop; the parent kills it
with SIGKILL after a seeded random delay, then loads the folder: it must load, and hold exactly
one of the two indexes. Half the children use the portable two-rename swap instead of Linux's
``renameat2(RENAME_EXCHANGE)``, so :func:`skillsight_fast.engine.io.recover` is exercised too. While a
child saves, the parent also loads the folder continuously (a reader racing a writer).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast import SkillIndex
from skillsight_fast.engine.index import SkillMeta
from skillsight_fast.engine.io import MANIFEST, recover
from skillsight_fast.errors import IndexFormatError

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

N_DOCS, DIM = 3000, 256  # ~6 MB of arrays: a save takes long enough to be killed mid-way
N_KILLS = 10
TIME_BUDGET = 60.0  # seconds for the whole kill loop (about 20 s on 2 cores)

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import skillsight_fast.engine.io_folder as io_folder
    from skillsight_fast import SkillIndex

    a, b, target, portable = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "1"
    if portable:
        io_folder._exchange = lambda x, y: False  # the two-rename swap used where renameat2 is missing
    indexes = [SkillIndex.load(a, verify=False), SkillIndex.load(b, verify=False)]
    print("ready", flush=True)
    i = 0
    while True:
        indexes[i % 2].save(target)
        i += 1
    """
)


def make_index(seed: int, prefix: str) -> SkillIndex:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((N_DOCS, DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    words = [f"w{j}" for j in range(300)]
    texts = [" ".join(rng.choice(words, 12)) + " common boilerplate" for _ in range(N_DOCS)]
    metas = [SkillMeta(f"{prefix}{i}", f"{prefix}{i}", "d", "", "") for i in range(N_DOCS)]
    return SkillIndex.from_embeddings(metas, emb, texts=texts, model_id="rand", model_checksum="r0")


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory):
    root = tmp_path_factory.mktemp("atomic")
    a, b = make_index(1, "a"), make_index(2, "b")
    a.save(root / "A")
    b.save(root / "B")
    return root, a, b


def which(loaded: SkillIndex, a: SkillIndex, b: SkillIndex) -> str:
    for name, ref in (("A", a), ("B", b)):
        if loaded.ids == ref.ids:
            np.testing.assert_array_equal(loaded.dense.embeddings, ref.dense.embeddings)
            np.testing.assert_array_equal(loaded.dense.embeddings_perp, ref.dense.embeddings_perp)
            return name
    raise AssertionError("the loaded index is neither of the two saved ones")


def test_sigkill_during_save_never_loses_the_index(two_indexes, tmp_path):
    root, a, b = two_indexes
    target = tmp_path / "idx"
    a.save(target)
    rng = np.random.default_rng(2024)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1] / "support"), *sys.path]))
    seen: dict[str, int] = {"A": 0, "B": 0}
    reader_loads = 0
    deadline = time.monotonic() + TIME_BUDGET
    kills = mid_save = 0
    while kills < N_KILLS and time.monotonic() < deadline:
        portable = kills % 2 == 1
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root / "A"), str(root / "B"), str(target), "1" if portable else "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
        )
        try:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
            stop = time.monotonic() + float(rng.uniform(0.05, 0.8))
            while time.monotonic() < stop:  # read while the child writes: every load must succeed
                which(SkillIndex.load(target, verify=bool(reader_loads % 2)), a, b)
                reader_loads += 1
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            child.stdout.close()
            child.stderr.close()
        assert child.returncode == -signal.SIGKILL
        kills += 1
        loaded = SkillIndex.load(target)  # recovers a half-swapped folder if needed
        seen[which(loaded, a, b)] += 1
        # leftovers of the killed save (if any) are hidden names that loading ignores
        mid_save += any(p.name != "idx" for p in tmp_path.iterdir())
        for p in tmp_path.iterdir():
            assert p.name == "idx" or p.name.startswith(".idx.tmp-") or p.name.startswith(".idx.old-"), p
    assert kills >= 5, f"only {kills} kills in {TIME_BUDGET} s"
    assert reader_loads > 0
    print(f"{kills} kills ({mid_save} mid-save), {reader_loads} concurrent loads, seen {seen}")
    # the next save cleans every leftover of the crashed ones
    b.save(target)
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    assert which(SkillIndex.load(target), a, b) == "B"


def test_recover_puts_back_the_old_folder_after_a_crash_between_renames(two_indexes, tmp_path):
    _, a, _ = two_indexes
    target = tmp_path / "idx"
    a.save(target)
    os.rename(target, tmp_path / ".idx.old-crashed")  # the state after the first of two renames
    (tmp_path / ".idx.tmp-crashed").mkdir()  # and a half-written new folder
    (tmp_path / ".idx.tmp-crashed" / "embeddings.npy").write_bytes(b"half")
    assert SkillIndex.load(target).ids == a.ids
    assert (target / MANIFEST).is_file()
    recover(target)  # no-op when the folder exists
    a.save(target)
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_failed_save_keeps_the_previous_index(two_indexes, tmp_path, monkeypatch):
    _, a, b = two_indexes
    target = tmp_path / "idx"
    a.save(target)
    from skillsight_fast.engine import io

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(io, "write_durable", boom)
    with pytest.raises(OSError, match="No space"):
        b.save(target)
    monkeypatch.undo()
    assert which(SkillIndex.load(target), a, b) == "A"
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_concurrent_saves_from_threads_serialise(two_indexes, tmp_path):
    _, a, b = two_indexes
    target = tmp_path / "idx"
    errors: list[BaseException] = []

    def save(index: SkillIndex) -> None:
        try:
            for _ in range(3):
                index.save(target)
        except BaseException as exc:  # noqa: BLE001 # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(x,)) for x in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    which(SkillIndex.load(target), a, b)
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_load_of_a_vanished_folder_is_a_clean_error(tmp_path):
    with pytest.raises(IndexFormatError, match="no such index"):
        SkillIndex.load(tmp_path / "nothing")


@pytest.mark.parametrize("portable", [False, True])
def test_a_load_racing_a_save_between_every_two_reads_still_gets_one_whole_index(
        two_indexes, tmp_path, monkeypatch, portable):
    """The worst reader/writer interleaving, made deterministic: a new version is swapped in
    (and the previous one deleted) between every two files the load reads, except while a reader
    holds the save lock, as a real writer would wait. The load must return one whole index."""
    import fcntl
    import shutil

    from skillsight_fast.engine import io

    root, a, b = two_indexes
    target = tmp_path / "idx"
    a.save(target)
    if portable:
        from skillsight_fast.engine import io_folder

        monkeypatch.setattr(io_folder, "_exchange", lambda x, y: False)
    real_load_array = io._load_array
    swaps = {"n": 0}

    def writer_would_get_the_lock() -> bool:
        fd = os.open(tmp_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def racing_load_array(*args, **kwargs):
        out = real_load_array(*args, **kwargs)
        if writer_would_get_the_lock():
            swaps["n"] += 1
            tmp = tmp_path / f".idx.tmp-race{swaps['n']}"
            shutil.copytree(root / ("B" if swaps["n"] % 2 else "A"), tmp)
            io._swap_in(tmp, target)
        return out

    monkeypatch.setattr(io, "_load_array", racing_load_array)
    which(SkillIndex.load(target), a, b)
    assert swaps["n"] >= 2  # the writer did race the reader
