"""Serving: the service behind MCP/HTTP, the HTTP endpoint over loopback, the MCP server over stdio."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import urllib.error
import urllib.request

import pytest
from fakes import HashEncoder
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents.http import make_http_server
from skillsight_fast.agents.live import UnknownSkillError
from skillsight_fast.agents.service import MAX_BODY_BYTES, SkillService
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import QueryError
from skillsight_fast.library.skills import Skill, load_skills

SKILLS = {
    "pdf": ("Merge and split PDF files.", "Use pypdf to merge pages and extract tables from pdf."),
    "mesh": ("Analyse STL meshes.", "stl mesh volume connected components mass."),
    "csv": ("Clean CSV files.", "csv columns rows dedupe spreadsheet."),
    "docker": ("Build Docker images.", "docker build compose deploy containers."),
}


def _library(root):
    for name, (desc, body) in SKILLS.items():
        write_skill(root, name, name=name, description=desc, body=body)
    return root


@pytest.fixture
def service(tmp_path):
    lib = _library(tmp_path / "lib")
    skills = load_skills([lib]).skills + [Skill("rec:email", "email", "Draft polite emails.", "email reply tone")]
    SkillIndex.build(skills, HashEncoder()).save(tmp_path / "idx")
    svc = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    svc.warm()
    return svc


def test_find_returns_explained_hits(service):
    out = service.find("merge pdf pages", 2)
    assert out["query"] == "merge pdf pages" and len(out["hits"]) == 2
    top = out["hits"][0]
    assert top["id"] == "pdf" and top["path"].endswith("pdf/SKILL.md")
    assert {"name", "description", "score", "cosine", "dense", "lexical", "evidence"} <= set(top)
    assert set(top["evidence"]) >= {"merge", "pdf"}


def test_abstention_is_decided_per_task(service):
    everything = service.find("merge pdf pages", 5)["hits"]
    assert len(everything) == 5
    best_score = everything[0]["score"]
    service.abstention = Abstention("score", best_score - 1e-6)  # the task passes: all its hits stay
    assert [h["id"] for h in service.find("merge pdf pages", 5)["hits"]] == [h["id"] for h in everything]
    service.abstention = Abstention("score", best_score + 1e-3)
    assert service.find("merge pdf pages", 5)["hits"] == []
    best_cosine = max(h["cosine"] for h in everything)
    service.abstention = Abstention("cosine", best_cosine - 1e-4)
    out = service.find("merge pdf pages", 5)
    assert len(out["hits"]) == 5 and out["abstention"] == {"signal": "cosine", "threshold": best_cosine - 1e-4}
    service.abstention = Abstention("cosine", best_cosine + 1e-4)
    assert service.find("merge pdf pages", 5)["hits"] == []


@pytest.mark.parametrize("task,k", [("", 3), ("   ", 3), (None, 3), ("pdf", 0), ("pdf", 101), ("pdf", "3"),
                                    ("pdf", True)])
def test_find_rejects_bad_input(service, task, k):
    with pytest.raises(QueryError):
        service.find(task, k)


def test_get_skill_reads_only_indexed_paths(service, tmp_path):
    got = service.get_skill("pdf")
    assert got["source"] == "file" and got["text"].startswith("---\nname: pdf\n")
    rec = service.get_skill("rec:email")  # JSONL record: rebuilt from the stored body
    assert rec["source"] == "index" and rec["text"] == (
        "---\nname: email\ndescription: Draft polite emails.\n---\nemail reply tone")
    (tmp_path / "lib" / "mesh" / "SKILL.md").unlink()  # file gone: fall back to the stored text
    assert "stl mesh volume" in service.get_skill("mesh")["text"]
    for bad in ("../lib/pdf", str(tmp_path / "lib" / "pdf" / "SKILL.md"), "/etc/passwd", "", None):
        with pytest.raises(UnknownSkillError):
            service.get_skill(bad)


@pytest.fixture
def http(service):
    server = make_http_server(service, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.url
    server.shutdown()
    server.server_close()
    thread.join(5)


def _call(url, data=None, method=None, headers=None):
    body = data if isinstance(data, bytes) or data is None else json.dumps(data).encode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_http_endpoint(http):
    assert _call(http + "/health") == (200, {"status": "ok", "n_skills": 5, "model": "hash-test", "abstention": None,
                                      "live_version": 0, "version": 0})
    status, out = _call(http + "/search", {"task": "stl mesh volume", "k": 2})
    assert status == 200 and out["query"] == "stl mesh volume" and out["hits"][0]["id"] == "mesh"
    status, out = _call(http + "/skill/pdf")
    assert status == 200 and out["id"] == "pdf" and "pypdf" in out["text"]
    status, out = _call(http + "/skill/rec%3Aemail")
    assert status == 200 and out["name"] == "email"


@pytest.mark.parametrize("path,data,code", [
    ("/search", {"task": "", "k": 3}, 400),
    ("/search", {"task": "pdf", "k": 1000}, 400),
    ("/search", {"k": 3}, 400),
    ("/search", [1, 2], 400),
    ("/search", b"{not json", 400),
    ("/search", b"x" * (MAX_BODY_BYTES + 1), 413),
    ("/nope", {"task": "pdf"}, 404),
    ("/skill/..%2F..%2Fetc%2Fpasswd", None, 404),
    ("/skill/missing", None, 404),
], ids=["empty", "k-too-big", "no-task", "not-object", "bad-json", "too-large", "no-route", "traversal", "unknown"])
def test_http_errors_are_json_with_status(http, path, data, code):
    status, out = _call(http + path, data)
    assert status == code and out["status"] == code and out["error"]


def test_serve_cli_rejects_missing_index(tmp_path, capsys):
    from skillsight_fast.cli import main

    assert main(["serve", "--http", "-i", str(tmp_path / "missing")]) == 1
    assert "no such index" in capsys.readouterr().err


# ---------------------------------------------------------------------- MCP over a real stdio session


@pytest.mark.model
def test_mcp_server_over_stdio_with_the_sdk_client(tmp_path):
    """A real `skillsight serve --mcp` process (real default model), driven by the SDK's own client."""
    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from skillsight_fast._version import __version__
    from skillsight_fast.cli import main

    lib = _library(tmp_path / "lib")
    assert main(["index", str(lib), "-o", str(tmp_path / "idx"), "-q"]) == 0

    async def session_calls():
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "skillsight_fast.cli", "serve", "--mcp", "-i", str(tmp_path / "idx"), "-q"],
        )
        with open(tmp_path / "serve.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    init = await session.initialize()
                    info = getattr(init, "server_info", None) or init.serverInfo
                    assert (info.name, info.version) == ("skillsight", __version__)  # never an empty version
                    tools = {t.name for t in (await session.list_tools()).tools}
                    found = await session.call_tool("find_skills", {"task": "merge two PDF files into one", "k": 2})
                    text = await session.call_tool("get_skill", {"id": "pdf"})
                    unknown = await session.call_tool("get_skill", {"id": "../../etc/passwd"})
                    empty = await session.call_tool("find_skills", {"task": "  "})
                    return tools, found, text, unknown, empty

    tools, found, text, unknown, empty = asyncio.run(asyncio.wait_for(session_calls(), 120))

    def is_error(result):
        return bool(getattr(result, "is_error", getattr(result, "isError", False)))

    assert tools == {"find_skills", "get_skill"}
    assert not is_error(found)
    hits = json.loads(found.content[0].text)["hits"]
    assert hits[0]["id"] == "pdf" and hits[0]["path"].endswith("pdf/SKILL.md") and "pdf" in hits[0]["evidence"]
    assert not is_error(text) and text.content[0].text.startswith("---\nname: pdf")
    assert is_error(unknown) and "unknown skill id" in unknown.content[0].text
    # an ordinary tool error is no multi-line block on the server's stderr (rich's wrapped lines)
    log = (tmp_path / "serve.log").read_text().splitlines()
    assert not any(line.startswith(" ") for line in log) and "Traceback" not in "\n".join(log), log
    assert is_error(empty) and "empty query" in empty.content[0].text
