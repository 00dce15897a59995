"""Hardening of ``skillsight serve --http`` (issue 6): request limits, k capped, no file outside the
index, loopback by default, hostile bodies and slow clients, and a small bounded load test.

tests/test_serve.py covers the ordinary routes; this file attacks them.
"""

from __future__ import annotations

import http.client
import inspect
import json
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from fakes import HashEncoder
from skillsight_fast import SkillIndex
from skillsight_fast.serve import MAX_BODY_BYTES, MAX_SERVE_K, SkillService, _Handler, make_http_server
from skillsight_fast.skills import load_skills
from test_skills import write_skill

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from load_test import run_load_test  # noqa: E402

SECRET = "TOP-SECRET-CONTENT"


@pytest.fixture
def served(tmp_path):
    lib = tmp_path / "lib"
    for name, body in {"pdf": "merge pdf pages tables", "mesh": "stl mesh volume", "csv": "csv rows"}.items():
        write_skill(lib, name, name=name, description=f"{name} skill.", body=body)
    (tmp_path / "secret.txt").write_text(SECRET)  # a file next to the library and the index
    (tmp_path / "SKILL.md").write_text(f"---\nname: x\ndescription: {SECRET}\n---\n")
    SkillIndex.build(load_skills([lib]).skills, HashEncoder()).save(tmp_path / "idx")
    service = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    service.warm()
    server = make_http_server(service, port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def request(server, method, path, body=None, headers=None, timeout=10):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, raw
    finally:
        conn.close()


def search(server, payload):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, raw = request(server, "POST", "/search", data, {"Content-Type": "application/json"})
    return status, json.loads(raw)


# ---------------------------------------------------------------------- loopback by default
def test_binds_loopback_by_default(served):
    assert served.server_address[0] == "127.0.0.1"
    assert inspect.signature(make_http_server).parameters["host"].default == "127.0.0.1"
    from skillsight_fast.cli import build_parser

    args = build_parser().parse_args(["serve", "--http", "-i", "x"])
    assert args.host == "127.0.0.1"


# ---------------------------------------------------------------------- request size limits
def test_oversized_body_is_rejected_before_it_is_read(served):
    host, port = served.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:  # announce 1 GB, send nothing
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1073741824\r\n\r\n")
        reply = sock.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 413")
    status, out = search(served, b'{"task": "' + b"a" * MAX_BODY_BYTES + b'"}')
    assert status == 413 and out["status"] == 413


@pytest.mark.parametrize("headers,code", [
    ({"Transfer-Encoding": "chunked"}, 411),
    ({"Content-Length": "-5"}, 413),
    ({"Content-Length": "12abc"}, 411),
], ids=["chunked", "negative", "garbage"])
def test_body_length_must_be_declared_and_sane(served, headers, code):
    status, raw = request(served, "POST", "/search", None, headers)
    assert status == code, raw


def test_a_1mb_query_is_refused_and_the_server_lives_on(served):
    body = json.dumps({"task": "pdf " * 250_000, "k": 3}).encode()
    host, port = served.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
        try:
            sock.sendall(body)  # the server may answer and close before the upload ends
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
    status, out = search(served, {"task": "merge pdf " * 6000, "k": 3})  # 60 KB: allowed
    assert status == 200 and out["hits"][0]["id"] == "pdf"


def test_huge_header_is_refused(served):
    status, _ = request(served, "GET", "/health", headers={"X-Big": "a" * 70_000})
    assert status in (400, 431)


# ---------------------------------------------------------------------- k capped, odd queries
@pytest.mark.parametrize("k", [0, -1, MAX_SERVE_K + 1, 10**12, 2.5, "5", True, None])
def test_k_is_capped_and_typed(served, k):
    status, out = search(served, {"task": "merge pdf", "k": k})
    assert status == 400 and "k" in out["error"]


def test_k_at_the_cap_is_fine(served):
    status, out = search(served, {"task": "merge pdf", "k": MAX_SERVE_K})
    assert status == 200 and len(out["hits"]) == 3


@pytest.mark.parametrize("task,code", [
    ("\x00\x01\x02", 400),  # nothing but control characters: empty query
    (" \t\n", 400),
    ("merge\x00 pdf\x1b[0m", 200),
    ("\ud800 merge pdf \udfff", 200),  # lone surrogates sent as JSON escapes
    ("合并两个PDF文件", 200),
    (["merge pdf"], 400),
    ({"task": "x"}, 400),
], ids=["control-only", "whitespace", "control-in-text", "lone-surrogates", "chinese", "list", "object"])
def test_hostile_tasks(served, task, code):
    status, out = search(served, {"task": task, "k": 2})
    assert status == code, out
    if code == 200:
        assert isinstance(out["hits"], list)
    else:
        assert out["error"]


@pytest.mark.parametrize("body", [b"null", b"[]", b'"task"', b"\xff\xfe{}", b'{"task": "a"' + b"]" * 10,
                                  b"[" * 60_000], ids=["null", "list", "string", "not-utf8", "unbalanced", "deep"])
def test_malformed_json_bodies(served, body):
    status, raw = request(served, "POST", "/search", body[:MAX_BODY_BYTES], {"Content-Type": "application/json"})
    assert status in (400, 413)
    assert json.loads(raw)["error"]


# ---------------------------------------------------------------------- no file outside the index
@pytest.mark.parametrize("path", [
    "/skill/../../etc/passwd", "/skill/..%2F..%2F..%2Fetc%2Fpasswd", "/skill/%2e%2e/%2e%2e/secret.txt",
    "/skill/pdf/../../secret.txt", "/skill/..%2Fsecret.txt", "/skill//etc/passwd", "/skill/%2Fetc%2Fpasswd",
    "/skill/pdf%00.txt", "/skill/..", "/skill/.", "/skill/~", "/skill/lib%2Fpdf%2FSKILL.md",
    "/../../etc/passwd", "/skill/%252e%252e%252fsecret.txt",
])
def test_no_request_reads_a_file_outside_the_index(served, path):
    status, raw = request(served, "GET", path)
    assert status == 404
    text = raw.decode("utf-8", "replace")
    assert SECRET not in text and "root:" not in text


def test_indexed_skill_is_still_served(served):
    status, raw = request(served, "GET", "/skill/pdf")
    assert status == 200 and "merge pdf pages" in json.loads(raw)["text"]


def test_other_methods_are_refused(served):
    for method in ("PUT", "DELETE", "PATCH"):
        status, _ = request(served, method, "/search", b"{}")
        assert status in (404, 405, 501)


# ---------------------------------------------------------------------- slow clients
def test_idle_connection_does_not_hold_a_thread_forever(served, monkeypatch):
    monkeypatch.setattr(_Handler, "timeout", 0.5)
    host, port = served.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"task\":")  # stalls
        t0 = time.monotonic()
        data = sock.recv(4096)  # the server gives up on the body and closes the connection
        assert time.monotonic() - t0 < 5
        assert data == b"" or data.startswith(b"HTTP/1.1 408")
    status, _ = search(served, {"task": "merge pdf", "k": 1})
    assert status == 200


# ---------------------------------------------------------------------- bounded load
def test_small_load_test_has_zero_errors(served):
    service = served.service
    report = run_load_test(service, requests=200, threads=8, seconds=60)
    assert report["errors"] == 0, report["first_errors"]
    assert report["requests"] == 200
    assert report["p99_ms"] is not None and report["throughput_rps"] > 0
    print(f"\nload test: {report['requests']} requests, {report['throughput_rps']} req/s, "
          f"p50 {report['p50_ms']} ms, p99 {report['p99_ms']} ms")
