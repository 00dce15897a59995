"""Smaller findings of the adversarial run: the model cache's quantizer race, killed stream builds'
leftovers, index folder permissions, the bearer scheme's case, HEAD requests, and watch logs."""

from __future__ import annotations

import logging
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------- model cache: quantizer temp file


def _tiny_onnx(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_quantizing_never_writes_beside_its_input(tmp_path):
    """onnxruntime's fixed ``<model>-inferred.onnx`` beside the input raced between two first runs;
    the input folder is now left alone: here that name is taken (by a folder), and it still works."""
    pytest.importorskip("onnxruntime")
    from skillsight_fast.models.export import quantize_onnx_int8

    src = tmp_path / "src"
    src.mkdir()
    _tiny_onnx(src / "model.onnx")
    (src / "model-inferred.onnx").mkdir()  # what another run's temporary file would be in the way of
    out = quantize_onnx_int8(src / "model.onnx", tmp_path / "cache" / "model.int8.onnx")
    assert out.is_file() and sorted(p.name for p in src.iterdir()) == ["model-inferred.onnx", "model.onnx"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.int8.onnx"]


def test_two_quantizations_of_one_model_at_once_both_succeed(tmp_path):
    pytest.importorskip("onnxruntime")
    _tiny_onnx(tmp_path / "model.onnx")
    code = (
        "import sys; from skillsight_fast.models.export import quantize_onnx_int8; "
        "quantize_onnx_int8(sys.argv[1], sys.argv[2])"
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                str(tmp_path / "model.onnx"),
                str(tmp_path / f"out{i}" / "model.int8.onnx"),
            ],
            stderr=subprocess.PIPE,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        for i in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["model.onnx"]
    assert not [p for p in tmp_path.rglob("*quant-*")]


# ---------------------------------------------------------------------- killed stream builds


def test_a_killed_stream_build_leaves_nothing_behind_after_the_next_build(tmp_path):
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.indexing.stream import StreamBuilder

    code = (
        "import os, sys; from skillsight_fast.indexing.stream import StreamBuilder; "
        "from skillsight_fast.config import IndexConfig; b = StreamBuilder(IndexConfig(), sys.argv[1]); "
        "print(b._dir, flush=True); os.kill(os.getpid(), 9)"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )
    left = Path(killed.stdout.strip())
    assert killed.returncode == -9 and left.is_dir() and left.parent == tmp_path
    assert left.name.startswith(".")  # hidden while it exists
    live = StreamBuilder(IndexConfig(), tmp_path)  # the next build removes the dead one's folder
    try:
        assert not left.exists() and live._dir.exists()
        other = StreamBuilder(IndexConfig(), tmp_path)  # and never a live one's
        assert live._dir.exists()
        other.close()
    finally:
        live.close()
    assert [p.name for p in tmp_path.iterdir()] == []


# ---------------------------------------------------------------------- folder permissions


def test_an_index_folder_gets_the_mode_the_umask_gives(tmp_path):
    old = os.umask(0o022)
    try:
        SkillIndex.build(toy_skills(), HashEncoder()).save(tmp_path / "idx")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "idx").stat().st_mode) == 0o755


# ---------------------------------------------------------------------- HTTP over a real socket


@pytest.fixture
def http_server(tmp_path):
    from skillsight_fast.agents.http import make_http_server
    from skillsight_fast.agents.service import SkillService

    SkillIndex.build(toy_skills(), HashEncoder()).save(tmp_path / "idx")
    service = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    service.warm()
    servers = []

    def start(**options):
        server = make_http_server(service, "127.0.0.1", 0, **options)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _raw(port, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_case_insensitive(http_server, scheme):
    token = "s3cret-token-" + "x" * 30
    port = http_server(token=token)
    out = _raw(
        port,
        (
            f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {scheme} {token}\r\n"
            "Connection: close\r\n\r\n"
        ).encode(),
    )
    assert out.startswith(b"HTTP/1.1 200"), out[:200]
    out = _raw(
        port,
        (
            f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {scheme} wrong\r\n"
            "Connection: close\r\n\r\n"
        ).encode(),
    )
    assert out.startswith(b"HTTP/1.1 401")


def test_head_is_answered_like_get_without_a_body(http_server):
    port = http_server()
    get = _raw(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    head = _raw(port, b"HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    head_headers, _, head_body = head.partition(b"\r\n\r\n")
    _, _, get_body = get.partition(b"\r\n\r\n")
    assert head_body == b"" and get_body
    length = [h for h in head_headers.split(b"\r\n") if h.lower().startswith(b"content-length:")]
    assert length and int(length[0].split(b":")[1]) == len(get_body)
    missing = _raw(port, b"HEAD /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert missing.startswith(b"HTTP/1.1 404") and missing.partition(b"\r\n\r\n")[2] == b""


# ---------------------------------------------------------------------- watch logs


def test_watch_logs_a_skipped_skill_once_not_on_every_refresh(tmp_path, caplog):
    pytest.importorskip("watchfiles")
    from skill_files import write_skill

    from skillsight_fast.agents.service import SkillService
    from skillsight_fast.agents.watch import LiveIndexWatcher as CatalogWatcher
    from skillsight_fast.library.skills import load_skills

    lib = tmp_path / "lib"
    write_skill(lib, "pdf", name="pdf", description="Merge PDF files.")
    SkillIndex.build(load_skills([lib]).skills, HashEncoder()).save(tmp_path / "idx")
    service = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    service.warm()
    watcher = CatalogWatcher(service, [lib], rule=lambda d: None)
    write_skill(lib, "bad", raw=b"\xff\xfe not utf8")
    with caplog.at_level(logging.INFO, logger="skillsight_fast.agents.watch"):
        for i in range(5):
            write_skill(lib, f"new{i}", name=f"new{i}", description=f"Skill number {i}.")
            watcher.refresh()
    skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1 and "bad" in skipped[0].getMessage()
