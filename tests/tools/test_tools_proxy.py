"""The tool-search MCP proxy against real servers: the proxy is started by the SDK's own client.

The downstream servers are the reference servers from PyPI (``mcp-server-time``, ``mcp-server-git``,
``mcp-server-fetch``; fetch is listed and searched, never called) plus a small real SDK server
whose tool list grows (tests/data/mcp_growing_server.py); every one is started and stopped here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import HashEncoder

from skillsight_fast._version import __version__

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
GROWING = Path(__file__).parents[1] / "data" / "mcp_growing_server.py"


def _server(name: str) -> str:
    exe = BIN / name
    if not exe.exists() and shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (pip install {name})")
    return str(exe if exe.exists() else shutil.which(name))


def _pids_running(marker: str) -> list[int]:
    """Processes whose command line contains ``marker`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _git_repo(path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    path.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "notes.txt").write_text("hello\n")
    return path


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the server's process in /proc")
def test_proxy_searches_calls_and_survives_a_killed_server(tmp_path):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    time_exe = tmp_path / "time-server-under-test"  # a unique command line, to find (and kill) its process
    time_exe.symlink_to(_server("mcp-server-time"))
    config = {"mcpServers": {
        "time": {"command": str(time_exe), "args": ["--local-timezone", "UTC"]},
        "git": {"command": _server("mcp-server-git")},
        "fetch": {"command": _server("mcp-server-fetch")},
        "broken": {"command": str(tmp_path / "no-such-server")},
    }}
    (tmp_path / "servers.json").write_text(json.dumps(config))
    repo = _git_repo(tmp_path / "repo")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "skillsight_fast.cli", "-c", "pin=time/convert_time", "serve", "--mcp", "--proxy",
              str(tmp_path / "servers.json"), "-q"],
        env={"PYTHONPATH": str(ROOT)})

    async def session_checks():
        with open(tmp_path / "proxy.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    info = getattr(init, "server_info", None) or init.serverInfo
                    assert (info.name, info.version) == ("skillsight-proxy", __version__)
                    listed = {t.name for t in (await session.list_tools()).tools}
                    assert listed == {"search_tools", "call_tool", "convert_time"}  # one pinned tool

                    async def search(task, k=5):
                        res = await session.call_tool("search_tools", {"task": task, "k": k})
                        assert not res.is_error, _text(res)
                        return json.loads(_text(res))

                    found = await search("what time is it in Tokyo")
                    names = [t["name"] for t in found["tools"]]
                    assert names[0] == "time/get_current_time" and "time/convert_time" not in names  # pinned
                    assert "timezone" in found["tools"][0]["inputSchema"]["properties"]
                    assert [u["server"] for u in found["unavailable"]] == ["broken"]
                    # grouped by server: every tool once, servers in the order of their best tool
                    assert found["servers"][0]["server"] == "time"
                    assert [n for g in found["servers"] for n in g["tools"]] == sorted(
                        names, key=lambda n: [g["server"] for g in found["servers"]].index(n.split("/")[0]))
                    hi = await search("hi")  # the threshold derived when the proxy indexed the tools
                    assert hi["tools"] == [] and hi["abstention"]["signal"] == "cosine"
                    fetched = (await search("download a web page from a URL", 3))["tools"]
                    assert "fetch/fetch" in [t["name"] for t in fetched]

                    res = await session.call_tool("call_tool", {"name": "time/get_current_time",
                                                                "arguments": {"timezone": "Asia/Tokyo"}})
                    assert not res.is_error, _text(res)
                    assert json.loads(_text(res))["timezone"] == "Asia/Tokyo"
                    res = await session.call_tool("call_tool", {"name": "git/git_status",
                                                                "arguments": {"repo_path": str(repo)}})
                    assert not res.is_error and "notes.txt" in _text(res), _text(res)

                    res = await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                                   "target_timezone": "Asia/Tokyo"})
                    assert not res.is_error and "21:00" in _text(res), _text(res)
                    bad = await session.call_tool("call_tool", {"name": "time/no_such_tool", "arguments": {}})
                    assert bad.is_error and "no tool 'no_such_tool'" in _text(bad)
                    bad = await session.call_tool("call_tool", {"name": "broken/anything"})
                    assert bad.is_error and "broken" in _text(bad)

                    # kill the time server behind the proxy's back: the next call restarts it
                    (old,) = _pids_running(str(time_exe))
                    os.kill(old, signal.SIGKILL)
                    deadline = time.monotonic() + 10
                    while old in _pids_running(str(time_exe)) and time.monotonic() < deadline:
                        await anyio.sleep(0.05)
                    await anyio.sleep(0.2)
                    res = await session.call_tool("call_tool", {"name": "time/get_current_time",
                                                                "arguments": {"timezone": "Europe/Paris"}})
                    assert not res.is_error, _text(res)
                    assert json.loads(_text(res))["timezone"] == "Europe/Paris"
                    (new,) = _pids_running(str(time_exe))
                    assert new != old
                    status = (await search("show the working tree status", 3))["tools"]
                    assert status[0]["name"] == "git/git_status"

    anyio.run(session_checks)
    assert not _pids_running(str(time_exe))  # the proxy stopped its servers when the client left


def test_proxy_reindexes_when_a_server_changes_its_tools():
    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.proxy import ToolProxy

    # no index cache: a remembered index would answer with the tools of an earlier run's listing
    # first_wait: a loaded machine may take over 5 s to start the SDK server; this test is about
    # re-indexing, not about the first search's wait
    proxy = ToolProxy([ServerConfig(name="grow", command=sys.executable, args=(str(GROWING),))],
                      encoder=HashEncoder(), index_cache=False, first_wait=120,
                      abstain=False)  # hash vectors: a derived threshold means nothing

    async def run():
        async with proxy.running():
            first = await proxy.search("translate text into klingon", 5)
            assert [t["name"] for t in first["tools"]][:1] == ["grow/add_tool"], first
            res = await proxy.call("grow/add_tool",
                                   {"name": "klingon", "description": "Translate text into Klingon"})
            assert not res.is_error, _text(res)
            deadline = time.monotonic() + 10
            names: list[str] = []
            while "grow/klingon" not in names and time.monotonic() < deadline:
                await anyio.sleep(0.05)
                names = [t["name"] for t in (await proxy.search("translate text into klingon", 5))["tools"]]
            assert names[0] == "grow/klingon"
            res = await proxy.call("klingon", {"text": "hello"})  # a bare name only one server has
            assert _text(res) == "klingon: hello"
            assert proxy.status()[0]["tools"] == 3 and proxy.status()[0]["starts"] == 1
            # the server exits during a call: that call is reported, the next one restarts it
            res = await proxy.call("grow/crash", {})
            assert res.is_error and "went away during the call" in _text(res)
            res = await proxy.call("grow/add_tool", {"name": "echo", "description": "Repeat the text"})
            assert not res.is_error and proxy.status()[0]["starts"] == 2
            after = (await proxy.search("translate into klingon", 5))["tools"]
            assert "grow/klingon" not in [t["name"] for t in after]  # the restarted server lost it

    anyio.run(run)


def test_proxy_bad_input_is_a_message(tmp_path, capsys):
    from skillsight_fast.cli import main
    from skillsight_fast.errors import SkillFormatError
    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.proxy import ToolProxy

    assert main(["serve", "--mcp", "--proxy", str(tmp_path / "missing.json")]) == 1
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "c.json").write_text(json.dumps({"mcpServers": {"me": {
        "command": "skillsight", "args": ["serve", "--mcp", "--proxy", "c.json"]}}}))
    assert main(["serve", "--mcp", "--proxy", str(tmp_path / "c.json")]) == 1
    assert "no server other than a skillsight proxy" in capsys.readouterr().err
    assert main(["serve", "--http", "--proxy", str(tmp_path / "c.json")]) == 1
    assert "serve --mcp --proxy" in capsys.readouterr().err
    assert main(["serve", "--mcp"]) == 1
    assert "needs --index" in capsys.readouterr().err
    with pytest.raises(SkillFormatError, match="pinned tool"):
        ToolProxy([ServerConfig(name="a", command="x")], pins=["b/tool"])
    with pytest.raises(SkillFormatError, match="unique"):
        ToolProxy([ServerConfig(name="a", command="x"), ServerConfig(name="a", command="y")])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_proxy_over_streamable_http_upstream():
    import socket

    from skillsight_fast.tools.catalog import parse_server_arg
    from skillsight_fast.tools.proxy import ToolProxy

    port = _free_port()
    server = subprocess.Popen([sys.executable, str(GROWING), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("the HTTP MCP server did not start")
                time.sleep(0.1)
        proxy = ToolProxy([parse_server_arg(f"web=http://127.0.0.1:{port}/mcp")], encoder=HashEncoder(),
                          index_cache=False,
                          abstain=False)  # hash vectors: a derived threshold means nothing

        async def run():
            async with proxy.running():
                found = await proxy.search("add a new tool to this server", 2)
                assert found["tools"][0]["name"] == "web/add_tool"
                res = await proxy.call("web/add_tool", {"name": "shout", "description": "Say text loudly"})
                assert not res.is_error, _text(res)
                # callable at once: a name missing from the last listing makes the proxy list again
                assert _text(await proxy.call("web/shout", {"text": "hi"})) == "shout: hi"
                assert "web/shout" in [t["name"] for t in (await proxy.search("say text loudly", 2))["tools"]]

        anyio.run(run)
    finally:
        server.terminate()
        server.wait(10)


def test_restarted_proxy_loads_its_index_from_the_cache(tmp_path, caplog):
    """A restart whose server lists the same tools loads the saved index (no tool is encoded again);
    another tool list (here: the server under another name) gets its own entry; a damaged entry is
    rebuilt, never an error."""
    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.proxy import ToolProxy

    time_cmd = _server("mcp-server-time")
    cache = tmp_path / "cache"

    def start(name: str, encoder: HashEncoder) -> tuple[ToolProxy, dict]:
        # first_wait: on a loaded machine the time server may take over 5 s to start; a preloaded
        # index still answers at once
        proxy = ToolProxy([ServerConfig(name=name, command=time_cmd, args=("--local-timezone", "UTC"))],
                          encoder=encoder, index_cache=cache, first_wait=120,
                          abstain=False)  # hash vectors: a derived threshold means nothing

        async def run() -> dict:
            async with proxy.running():
                first = await proxy.search("get the current time in a timezone", 2)
                await proxy.wait_ready()  # the servers listed: the index is keyed by the live lists
                again = await proxy.search("get the current time in a timezone", 2)
                assert again["tools"] == first["tools"]
                return first

        return proxy, anyio.run(run)

    def folders() -> list[Path]:
        return [p for p in cache.iterdir() if p.is_dir()]

    first_enc = HashEncoder()
    first, res1 = start("time", first_enc)
    # the tools (text, name + description), a warm-up task, two tasks, and the abstention rule the
    # new index derives (its pseudo-tasks, the shipped off-topic tasks)
    assert not first.ranking.index_from_cache and not first.preloaded and first_enc.calls == 7
    assert res1["tools"][0]["name"] == "time/get_current_time" and "remembered" not in res1
    assert len(folders()) == 1

    again_enc = HashEncoder()
    again, res2 = start("time", again_enc)
    # answered from the index remembered for this server before it listed, then the same folder
    # for its live list: a warm-up task and two tasks, no tool encoded
    assert again.preloaded and again.ranking.index_from_cache and again_enc.calls == 3
    assert again.ranking.index.decisions.lexical_evidence == "all"  # a tool catalogue's configuration
    assert res2["remembered"] is True  # answered before the server listed: said so
    ranked = [[(t["name"], t["score"]) for t in r["tools"]] for r in (res1, res2)]
    assert ranked[0] == ranked[1]

    other, res3 = start("clock", HashEncoder())  # other ids -> other key
    assert not other.ranking.index_from_cache and res3["tools"][0]["name"] == "clock/get_current_time"
    assert len(folders()) == 2

    folder = min(folders(), key=lambda p: p.stat().st_mtime)  # the index of server 'time'
    for f in folder.glob("*.npy"):
        f.write_bytes(b"damaged")
    damaged_enc = HashEncoder()
    damaged, res4 = start("time", damaged_enc)
    assert not damaged.ranking.index_from_cache and not damaged.preloaded and damaged_enc.calls == 7
    assert "not using the remembered index" in caplog.text
    assert res4["tools"][0]["name"] == "time/get_current_time"
    assert start("time", HashEncoder())[0].ranking.index_from_cache  # rebuilt and saved again
