"""skillsight_fast.files: the one copy of atomic writes and JSONL/gzip readers the package uses."""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path

import pytest

from skillsight_fast.files import (
    atomic_output,
    atomic_write_bytes,
    iter_jsonl,
    iter_lines,
    read_jsonl,
    sha256_file,
    sha256_files_in_background,
)


def test_atomic_write_replaces_and_sets_mode(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.json"
    atomic_write_bytes(target, b"one")
    assert target.read_bytes() == b"one" and stat.S_IMODE(target.stat().st_mode) == 0o644
    atomic_write_bytes(target, b"two", mode=0o600)
    assert target.read_bytes() == b"two" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(target.parent) == ["f.json"]  # no temporary file left behind


def test_atomic_output_failure_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="writer died"), atomic_output(target, suffix=".onnx") as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith(".onnx")
        tmp.write_bytes(b"half")
        raise RuntimeError("writer died")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["model.onnx"]


@pytest.mark.parametrize("gz", [False, True])
def test_readers_skip_blank_lines_and_a_bom(tmp_path: Path, gz: bool) -> None:
    text = '\ufeff{"a": 1}\n\n   \n{"a": 2}\n'
    path = tmp_path / ("r.jsonl.gz" if gz else "r.jsonl")
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    assert [(n, line.strip()) for n, line in iter_lines(path)] == [(1, '{"a": 1}'), (4, '{"a": 2}')]
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (4, {"a": 2})]
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_background_digests_equal_the_plain_ones(tmp_path: Path) -> None:
    files = []
    for i, size in enumerate((0, 5, 3 << 20)):
        files.append(tmp_path / f"f{i}")
        files[-1].write_bytes(os.urandom(size))
    digests = sha256_files_in_background([*files, tmp_path / "missing"])()
    assert digests[:3] == [sha256_file(f) for f in files]
    assert isinstance(digests[3], OSError)  # reported, not raised on the thread
