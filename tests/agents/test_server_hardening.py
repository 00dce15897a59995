"""Hardening of ``skillsight serve --http``: request limits, k capped, no file outside the index,
loopback by default, hostile bodies and slow clients, a small bounded load test; then (issue 20)
Host/Origin checks against DNS rebinding, bodies of unrouted requests, strict Content-Length, read
and write deadlines, the connection cap, the bearer token and quiet hang-ups.

Every test starts the real server (a thread on a free loopback port) and stops it.

tests/agents/test_serve.py covers the ordinary routes; this file attacks them.
"""

from __future__ import annotations

import contextlib
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
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents.http import HTTPLimits, make_http_server
from skillsight_fast.agents.service import MAX_BODY_BYTES, MAX_SERVE_K, SkillService
from skillsight_fast.cli import main
from skillsight_fast.errors import SkillsightError
from skillsight_fast.library.skills import load_skills

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from load_test import run_load_test

SECRET = "TOP-SECRET-CONTENT"
TOKEN = "correct-horse-battery-staple-42"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("served")
    lib = tmp_path / "lib"
    for name, body in {"pdf": "merge pdf pages tables", "mesh": "stl mesh volume", "csv": "csv rows",
                       "big": "big " * 250_000}.items():  # big: a 1 MB SKILL.md, for slow readers
        write_skill(lib, name, name=name, description=f"{name} skill.", body=body)
    (tmp_path / "secret.txt").write_text(SECRET)  # a file next to the library and the index
    (tmp_path / "SKILL.md").write_text(f"---\nname: x\ndescription: {SECRET}\n---\n")
    SkillIndex.build(load_skills([lib]).skills, HashEncoder()).save(tmp_path / "idx")
    service = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    service.warm()
    return service


@contextlib.contextmanager
def running(service, **options):
    """The real HTTP server on a free loopback port, serving from a thread until the block ends."""
    server = make_http_server(service, port=0, **options)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def served(service):
    with running(service) as server:
        yield server


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
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1073741824\r\n\r\n")
        reply = sock.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 413")
    status, out = search(served, b'{"task": "' + b"a" * MAX_BODY_BYTES + b'"}')
    assert status == 413 and out["status"] == 413


@pytest.mark.parametrize("headers,code", [
    ({"Transfer-Encoding": "chunked"}, 411),
    ({"Content-Length": "-5"}, 400),
    ({"Content-Length": "12abc"}, 400),
], ids=["chunked", "negative", "garbage"])
def test_body_length_must_be_declared_and_sane(served, headers, code):
    status, raw = request(served, "POST", "/search", None, headers)
    assert status == code, raw


def test_a_1mb_query_is_refused_and_the_server_lives_on(served):
    body = json.dumps({"task": "pdf " * 250_000, "k": 3}).encode()
    host, port = served.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body))
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
    assert status == 200 and len(out["hits"]) == 4


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
def test_a_stalled_body_does_not_hold_the_connection(service):
    """Headers, then part of the body, then nothing: dropped at the request deadline."""
    with running(service, limits=HTTPLimits(request_timeout=0.5)) as server:
        host, port = server.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"task\":")  # stalls
            t0 = time.monotonic()
            data = sock.recv(4096)  # the server gives up on the body and closes the connection
            assert time.monotonic() - t0 < 5
            assert data == b"" or data.startswith(b"HTTP/1.1 408")
        assert search(server, {"task": "merge pdf", "k": 1})[0] == 200


def test_a_silent_connection_is_closed(service):
    """A client that connects and sends nothing (or nothing more after an answer) is closed."""
    with running(service, limits=HTTPLimits(idle_timeout=0.5)) as server:
        host, port = server.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as sock:
            t0 = time.monotonic()
            assert sock.recv(4096) == b""
            assert time.monotonic() - t0 < 5
        with socket.create_connection((host, port), timeout=10) as sock:  # idle after a keep-alive answer
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            reply = b""
            while b"}" not in reply:
                reply += sock.recv(4096)
            assert reply.startswith(b"HTTP/1.1 200")
            t0 = time.monotonic()
            assert sock.recv(4096) == b""
            assert time.monotonic() - t0 < 5


# ---------------------------------------------------------------------- bounded load
def test_small_load_test_has_zero_errors(served):
    service = served.service
    report = run_load_test(service, requests=200, threads=8, seconds=60)
    assert report["errors"] == 0, report["first_errors"]
    assert report["requests"] == 200
    assert report["p99_ms"] is not None and report["throughput_rps"] > 0
    print(f"\nload test: {report['requests']} requests, {report['throughput_rps']} req/s, "
          f"p50 {report['p50_ms']} ms, p99 {report['p99_ms']} ms")


# ====================================================================== issue 20
def raw_exchange(server, data: bytes, *, wait: float = 0.5) -> bytes:
    """Send raw bytes, then read until the server closes or stays silent for ``wait`` seconds."""
    host, port = server.server_address[:2]
    out = b""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(data)
        sock.settimeout(wait)
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            out += chunk
    return out


def responses(reply: bytes) -> list[tuple[int, bytes, bytes]]:
    """(status, head, body) of every response in a byte stream, split by Content-Length."""
    out = []
    while reply:
        head, sep, rest = reply.partition(b"\r\n\r\n")
        assert sep and head.startswith(b"HTTP/1.1 "), reply[:200]
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                       if line.lower().startswith(b"content-length:")), len(rest))
        out.append((int(head.split()[1]), head, rest[:length]))
        reply = rest[length:]
    return out


def statuses(reply: bytes) -> list[int]:
    """The status codes of every response in a byte stream."""
    return [status for status, _, _ in responses(reply)]


# ---------------------------------------------------------------------- DNS rebinding
@pytest.mark.parametrize("headers,code", [
    ({"Host": "evil.example"}, 403),
    ({"Host": "evil.example:8765"}, 403),
    ({"Host": "127.0.0.1.evil.example"}, 403),
    ({"Origin": "http://evil.example"}, 403),
    ({"Origin": "null"}, 403),
    ({"Origin": "http://localhost.evil.example:8765"}, 403),
    ({"Host": "localhost:8765"}, 200),
    ({"Host": "LOCALHOST."}, 200),
    ({"Host": "[::1]:8765"}, 200),
    ({"Origin": "http://127.0.0.1:8765"}, 200),
    ({"Origin": "http://localhost:3000"}, 200),
], ids=lambda v: str(v))
def test_foreign_host_or_origin_is_refused(served, headers, code):
    """A web page whose DNS name was re-pointed at 127.0.0.1 sends its own Host (and Origin)."""
    for method, path, body in (("GET", "/health", None), ("POST", "/search", b'{"task": "merge pdf"}'),
                               ("GET", "/skill/pdf", None)):
        status, raw = request(served, method, path, body, headers)
        assert status == code, (method, path, raw)
        if code == 403:
            assert SECRET not in raw.decode() and "merge pdf" not in raw.decode()
            assert json.loads(raw)["status"] == 403


def test_allowed_hosts_extend_the_loopback_names(service):
    with running(service, allow_hosts=("skills.internal",)) as server:
        assert request(server, "GET", "/health", headers={"Host": "skills.internal:80"})[0] == 200
        assert request(server, "GET", "/health", headers={"Origin": "https://skills.internal"})[0] == 200
        assert request(server, "GET", "/health", headers={"Host": "other.internal"})[0] == 403


def test_missing_or_doubled_host_is_refused(served):
    assert statuses(raw_exchange(served, b"GET /health HTTP/1.1\r\n\r\n")) == [400]
    assert statuses(raw_exchange(served, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")) == [400]
    assert statuses(raw_exchange(served, b"GET /health HTTP/1.0\r\n\r\n")) == [200]  # HTTP/1.0 has no Host


# ---------------------------------------------------------------------- bodies of unrouted requests
SMUGGLED = b"GET /skill/mesh HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize("head", [
    b"POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n",
    b"GET /skill/pdf HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n",
    b"PUT /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n",
], ids=["unrouted-post", "get-health", "get-skill", "put"])
def test_a_body_is_never_parsed_as_the_next_request(served, head):
    """A request whose body is itself a request, then a real request: the body is never answered.

    The server reads and drops the body and answers the second request, or (a method it does not
    serve) answers once and closes the connection.
    """
    reply = raw_exchange(served, head % len(SMUGGLED) + SMUGGLED + b"GET /skill/csv HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    got = responses(reply)
    assert b'"id": "mesh"' not in reply, reply
    if len(got) == 1:
        assert got[0][0] in (405, 501) and b"connection: close" in got[0][1].lower()
    else:
        assert len(got) == 2 and got[1][0] == 200 and b'"id": "csv"' in got[1][2], reply


# ---------------------------------------------------------------------- strict Content-Length
BODY = b'{"task": "merge pdf"}'


@pytest.mark.parametrize("lengths", [
    [b"+%d" % len(BODY)],
    [b"%d_%d" % divmod(len(BODY), 10)],  # "2_1": int() accepts digit separators
    ["\u0662\u0661".encode()],  # Arabic-Indic "21": int() accepts them too
    [b"%d" % len(BODY), b"5"],  # two disagreeing headers
    [b"%d, 5" % len(BODY)],  # a disagreeing list
    [b"0x15"],
], ids=["plus", "underscore", "arabic-digits", "disagreeing", "disagreeing-list", "hex"])
def test_content_length_must_be_one_plain_number(served, lengths):
    assert len(BODY) == 21
    head = b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"Content-Length: " + v + b"\r\n" for v in lengths)
    reply = raw_exchange(served, head + b"\r\n" + BODY + SMUGGLED)
    assert statuses(reply) == [400], reply
    assert b"connection: close" in reply.lower() and b'"id": "mesh"' not in reply


@pytest.mark.parametrize("lengths", [
    [b"%d" % len(BODY), b"%d" % len(BODY)],
    [b"%d, %d" % (len(BODY), len(BODY))],
], ids=["doubled", "list"])
def test_agreeing_content_lengths_are_one_length(served, lengths):
    """RFC 9110 8.6 lets a server read identical Content-Length values as one (h11 does): the body
    is still framed by that one length, so what follows it is a request of its own."""
    head = b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"Content-Length: " + v + b"\r\n" for v in lengths)
    got = responses(raw_exchange(served, head + b"\r\n" + BODY + SMUGGLED))
    assert [status for status, _, _ in got] == [200, 200]
    assert b'"id": "pdf"' in got[0][2] and b'"id": "mesh"' in got[1][2]


def test_transfer_encoding_with_content_length_is_refused(served):
    head = (b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Length: %d\r\n\r\n" % len(BODY))
    reply = raw_exchange(served, head + BODY)
    assert statuses(reply) == [411], reply


def test_plain_content_length_still_works(served):
    reply = raw_exchange(served, b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
    assert statuses(reply) == [200] and b'"id": "pdf"' in reply


# ---------------------------------------------------------------------- deadlines
def test_a_byte_every_so_often_does_not_keep_the_request_open(service):
    """Each byte arrives well inside the idle timeout; the request as a whole misses its deadline."""
    with running(service, limits=HTTPLimits(request_timeout=1.0)) as served:  # the idle timeout stays 30 s
        _dribble(served)


def _dribble(served):
    host, port = served.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        t0 = time.monotonic()
        dropped = False
        for byte in b"X-Slow: " + b"a" * 100:
            sock.settimeout(0.25)
            try:
                sock.sendall(bytes([byte]))
                data = sock.recv(4096)
            except TimeoutError:
                continue  # still open: the server waits for more
            except (BrokenPipeError, ConnectionResetError):
                data = b""
            dropped = data == b"" or data.startswith(b"HTTP/1.1 408")
            if dropped:
                break
        assert dropped, "the server kept a slow request open"
        assert time.monotonic() - t0 < 5
    assert search(served, {"task": "merge pdf", "k": 1})[0] == 200


def test_a_client_that_does_not_read_is_dropped(service):
    """Pipelined 1 MB answers to a client that never reads: the write deadline frees the slot."""
    with running(service, max_connections=1, limits=HTTPLimits(write_timeout=0.5)) as server:
        host, port = server.server_address[:2]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, port))
        try:
            sock.sendall(b"GET /skill/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 40)  # 40 MB of answers
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:  # the one slot is busy until the writer gives up
                status, _ = request(server, "GET", "/health", timeout=10)
                if status == 200:
                    break
                time.sleep(0.1)
            assert status == 200
            assert time.monotonic() - t0 < 5
        finally:
            sock.close()


# ---------------------------------------------------------------------- connection cap
def test_connections_beyond_the_cap_get_503(service):
    with running(service, max_connections=2) as server:
        host, port = server.server_address[:2]
        idle = [socket.create_connection((host, port), timeout=10) for _ in range(2)]
        try:
            for sock in idle:  # make sure both are accepted and hold a handler thread
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            t0 = time.monotonic()
            reply = raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", wait=5)
            assert statuses(reply) == [503] and b"retry-after" in reply.lower(), reply
            assert time.monotonic() - t0 < 2
        finally:
            for sock in idle:
                sock.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:  # the closed connections give their slots back
            if statuses(raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", wait=2)) == [200]:
                break
            time.sleep(0.05)
        else:
            pytest.fail("slots were not released")


# ---------------------------------------------------------------------- bearer token
def test_token_is_required_when_set(service):
    with running(service, token=TOKEN) as server:
        for headers in ({}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN}x"}):
            for method, path, body in (("GET", "/health", None), ("POST", "/search", BODY), ("GET", "/skill/pdf", None)):
                status, raw = request(server, method, path, body, headers)
                assert status == 401, (headers, path)
                assert "merge pdf" not in raw.decode()
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert request(server, "POST", "/search", BODY, good)[0] == 200
        # with the token, the Host does not matter (it is how a remote client reaches the server)
        assert request(server, "GET", "/skill/pdf", None, good | {"Host": "skills.example:8765"})[0] == 200
        reply = raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert statuses(reply) == [401] and b"www-authenticate: bearer" in reply.lower()


@pytest.mark.parametrize("host,options,needle", [
    ("0.0.0.0", {}, "token"),
    ("::", {}, "token"),
    ("192.0.2.1", {}, "token"),
    ("127.0.0.1", {"token": "short"}, "at least"),
    ("127.0.0.1", {"token": "has a space in the middle!"}, "spaces"),
    ("127.0.0.1", {"max_connections": 0}, "connection cap"),
], ids=["any-ipv4", "any-ipv6", "lan", "short-token", "spaced-token", "zero-cap"])
def test_unsafe_server_settings_are_refused(service, host, options, needle):
    with pytest.raises(SkillsightError, match=needle):
        make_http_server(service, host, 0, **options)


@pytest.mark.parametrize("port", [70000, -1, 2**64, "8765", True])
def test_port_out_of_range_is_refused(service, port):
    with pytest.raises(SkillsightError, match="port"):
        make_http_server(service, "127.0.0.1", port)


def test_cli_refuses_exposure_and_bad_ports_before_loading(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SKILLSIGHT_TOKEN", raising=False)
    missing = tmp_path / "no-index-here"  # the checks run before the index would be read
    code = main(["serve", "--http", "--host", "0.0.0.0", "-i", str(missing)])
    err = capsys.readouterr().err
    assert code == 1 and "token" in err and "Traceback" not in err
    (tmp_path / "empty").write_text("\n")
    code = main(["serve", "--http", "--token-file", str(tmp_path / "empty"), "-i", str(missing)])
    err = capsys.readouterr().err
    assert code == 1 and "empty" in err and "Traceback" not in err
    for argv in (["--port", "70000"], ["--port", "-3"], ["--port", "http"]):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--http", "-i", str(missing), *argv])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "usage:" in err and "Traceback" not in err, argv
    code = main(["-c", "max-connections=0", "serve", "--http", "-i", str(missing)])  # a setting: one line
    err = capsys.readouterr().err
    assert code == 2 and "--max-connections" in err and err.count("\n") == 1 and "Traceback" not in err


# ---------------------------------------------------------------------- hang-ups and failures
def _reset(sock: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN (what a killed client does)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


def test_hang_ups_are_quiet(served, capfd):
    host, port = served.server_address[:2]
    for _ in range(5):
        sock = socket.create_connection((host, port), timeout=10)  # reset mid-headers
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.05)
        _reset(sock)
        sock = socket.create_connection((host, port), timeout=10)  # reset before reading 1 MB
        sock.sendall(b"GET /skill/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 3)
        sock.recv(10)
        _reset(sock)
        sock = socket.create_connection((host, port), timeout=10)  # reset mid-body
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{")
        time.sleep(0.05)
        _reset(sock)
    time.sleep(0.5)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err
    assert search(served, {"task": "merge pdf", "k": 1})[0] == 200


def test_a_failing_route_is_answered_with_500(served, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(served.service, "get_skill", broken)
    status, raw = request(served, "GET", "/skill/pdf")
    assert status == 500 and json.loads(raw)["error"].startswith("internal error")
    monkeypatch.setattr(served.service, "find", broken)
    assert search(served, {"task": "merge pdf"})[0] == 500
    assert request(served, "GET", "/health")[0] == 200


# ====================================================================== issue 33 (HTTP)
def test_head_is_answered_like_get_without_a_body(served):
    for path in ("/health", "/skill/pdf"):
        host, port = served.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.request("HEAD", path)
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read() == b""
            get_status, get_body = request(served, "GET", path)
            assert get_status == 200 and int(resp.getheader("Content-Length")) == len(get_body)
        finally:
            conn.close()
    assert request(served, "HEAD", "/skill/missing")[0] == 404


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer", "bEaReR"])
def test_bearer_scheme_is_case_insensitive(service, scheme):
    with running(service, token=TOKEN) as server:
        assert request(server, "POST", "/search", BODY, {"Authorization": f"{scheme} {TOKEN}"})[0] == 200
        assert request(server, "POST", "/search", BODY, {"Authorization": f"{scheme} {TOKEN[:-1]}"})[0] == 401
