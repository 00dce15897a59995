"""MCP over streamable HTTP at ``/mcp`` of the HTTP server, through the SDK's own client.

The real HTTP server (uvicorn, a thread on a free loopback port) serves ``/search`` and ``/mcp``
from one app; ``mcp.client.streamable_http`` lists the tools, calls ``find_skills`` and reads a
``skill://`` resource. ``/mcp`` sits behind the same Host/Origin and token checks as the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import threading

import pytest
from fakes import HashEncoder
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents.http import make_http_server
from skillsight_fast.agents.service import SkillService
from skillsight_fast.library.skills import load_skills

mcp = pytest.importorskip("mcp")

TOKEN = "correct-horse-battery-staple-42"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("mcp-http")
    lib = tmp_path / "lib"
    for name, body in {"pdf": "merge pdf pages tables", "mesh": "stl mesh volume", "csv": "csv rows"}.items():
        write_skill(lib, name, name=name, description=f"{name} skill.", body=body)
    (lib / "pdf" / "scripts").mkdir()
    (lib / "pdf" / "scripts" / "merge.py").write_text("import pypdf\n")
    SkillIndex.build(load_skills([lib]).skills, HashEncoder()).save(tmp_path / "idx")
    return SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))


@contextlib.contextmanager
def running(service, **options):
    server = make_http_server(service, port=0, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def _session_calls(url: str, headers: dict[str, str] | None = None) -> dict:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            async with mcp.ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                out: dict = {"tools": sorted(t.name for t in (await session.list_tools()).tools)}
                res = await session.call_tool("find_skills", {"task": "merge pdf pages", "k": 2})
                out["find"] = json.loads(res.content[0].text)
                bad = await session.call_tool("find_skills", {"task": "merge pdf", "k": 1000})
                failed = bool(getattr(bad, "is_error", getattr(bad, "isError", False)))
                out["bad_k"] = (failed, bad.content[0].text)
                out["skill_md"] = (await session.read_resource("skill://pdf/SKILL.md")).contents[0]
                out["script"] = (await session.read_resource("skill://pdf/scripts/merge.py")).contents[0]
                out["listed"] = sorted(str(r.uri) for r in (await session.list_resources()).resources)
                return out


def test_mcp_over_streamable_http_next_to_search(service):
    with running(service) as server:
        out = asyncio.run(asyncio.wait_for(_session_calls(server.url + "/mcp"), 120))
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)  # /search still answers
        conn.request("POST", "/search", body=b'{"task": "stl mesh volume", "k": 1}')
        assert json.loads(conn.getresponse().read())["hits"][0]["id"] == "mesh"
        conn.close()
    assert out["tools"] == ["find_skills", "get_skill"]
    assert out["find"]["hits"][0]["id"] == "pdf" and out["find"]["hits"][0]["uri"] == "skill://pdf/SKILL.md"
    assert out["bad_k"][0] and "k" in out["bad_k"][1]
    assert "merge pdf pages" in out["skill_md"].text and out["skill_md"].mime_type == "text/markdown"
    assert out["script"].text == "import pypdf\n"
    assert out["listed"] == ["skill://csv/SKILL.md", "skill://mesh/SKILL.md", "skill://pdf/SKILL.md"]


def _post_initialize(server, headers):
    params = {"protocolVersion": "2025-06-18", "capabilities": {},
              "clientInfo": {"name": "t", "version": "1"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    try:
        conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("headers,code", [
    ({"Host": "evil.example"}, 403),
    ({"Origin": "http://evil.example"}, 403),
    ({}, 200),
], ids=["foreign-host", "foreign-origin", "loopback"])
def test_mcp_endpoint_checks_host_and_origin(service, headers, code):
    """A web page re-pointed at 127.0.0.1 (DNS rebinding) cannot open an MCP session either."""
    with running(service) as server:
        status, raw = _post_initialize(server, headers)
    assert status == code, raw
    if code == 403:
        assert json.loads(raw)["status"] == 403


def test_mcp_endpoint_needs_the_token_and_accepts_any_scheme_case(service):
    with running(service, token=TOKEN) as server:
        assert _post_initialize(server, {})[0] == 401
        assert _post_initialize(server, {"Authorization": "Bearer wrong-token-wrong-token"})[0] == 401
        # with the token, a remote client's Host does not matter
        remote = {"Authorization": f"bearer {TOKEN}", "Host": "skills.example"}
        assert _post_initialize(server, remote)[0] == 200
        out = asyncio.run(asyncio.wait_for(
            _session_calls(server.url + "/mcp", {"Authorization": f"BEARER {TOKEN}"}), 120))
    assert out["find"]["hits"][0]["id"] == "pdf"
