"""The tool-search proxy against hostile and clumsy upstream servers (tests/data/mcp_hostile_server.py,
a real stdio MCP server): caps on tools and texts, malformed tools skipped alone, a first search that
does not wait for a slow server, a stuck server restarted after a timeout, unreadable answers failing
at once, and upstreams that die with the proxy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import HashEncoder

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
HOSTILE = Path(__file__).resolve().parents[1] / "data" / "mcp_hostile_server.py"
ROOT = Path(__file__).resolve().parents[2]


def _proxy(*servers, **options):
    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.proxy import ToolProxy

    configs = [
        ServerConfig(name=name, command=sys.executable, args=(str(HOSTILE), *map(str, args)))
        for name, *args in servers
    ]
    # no abstention: these tests read which tools were indexed, not which ones fit the task
    options.setdefault("abstain", False)
    return ToolProxy(
        configs, encoder=HashEncoder(), errlog=open(os.devnull, "w"), index_cache=False, **options
    )


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_a_server_with_1000_tools_is_capped_with_a_note():
    from skillsight_fast.tools.guard import MAX_DESCRIPTION_CHARS, MAX_TOOLS_PER_SERVER

    proxy = _proxy(("many", "many", 1000), first_wait=300)  # the search waits for the big server here

    async def run():
        async with proxy.running():
            out = await proxy.search("alpha beta gamma", 50)
            assert proxy.status()[0]["state"] == "ready"
            assert proxy.status()[0]["tools"] == MAX_TOOLS_PER_SERVER
            assert out["notes"][0]["server"] == "many" and "only its first" in out["notes"][0]["note"]
            assert len(out["tools"]) == 50
            assert all(len(t["description"]) <= MAX_DESCRIPTION_CHARS for t in out["tools"])

    anyio.run(run)


def test_a_malformed_tool_is_skipped_not_its_server():
    from skillsight_fast.tools.guard import MAX_DESCRIPTION_CHARS

    proxy = _proxy(("bad", "malformed"), first_wait=30)

    async def run():
        async with proxy.running():
            out = await proxy.search("weather forecast for a city", 10)
            assert "unavailable" not in out and proxy.status()[0]["state"] == "ready"
            names = {t["name"] for t in out["tools"]}
            assert {"bad/weather", "bad/echo"} <= names and "bad/nulldesc_deep" not in names
            huge = [t for t in out["tools"] if t["name"] == "bad/huge"]
            assert huge and len(huge[0]["description"]) <= MAX_DESCRIPTION_CHARS
            assert _text(await proxy.call("bad/echo", {"text": "hi"})) == "hi"

    anyio.run(run)


def test_the_first_search_answers_from_the_servers_that_are_ready():
    proxy = _proxy(("fast", "malformed"), ("slow", "slow", 40), first_wait=3, start_timeout=60)

    async def run():
        async with proxy.running():
            out = await proxy.search("weather forecast for a city", 5)
            assert out["tools"] and out["tools"][0]["server"] == "fast"
            assert out["starting"] == ["slow"]
            for up in proxy.upstreams.values():
                await up.stop()

    anyio.run(run)


def test_a_stuck_server_is_restarted_after_a_call_times_out():
    proxy = _proxy(("one", "stuck"), call_timeout=2)

    async def run():
        async with proxy.running():
            await proxy.wait_ready()
            res = await proxy.call("one/hang", {})
            assert res.is_error and "restarted" in _text(res)
            res = await proxy.call("one/echo", {"text": "after"})  # stuck behind `hang` without a restart
            assert not res.is_error and _text(res) == "after"
            assert proxy.status()[0]["starts"] == 2

    anyio.run(run)


def test_an_unreadable_answer_fails_its_call_at_once():
    proxy = _proxy(("deep", "deep"), call_timeout=120)

    async def run():
        async with proxy.running():
            await proxy.wait_ready()
            res = await proxy.call("deep/hang", {})
            assert res.is_error and "cannot be read" in _text(res), _text(res)
            assert _text(await proxy.call("deep/echo", {"text": "still here"})) == "still here"

    anyio.run(run)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_upstreams_die_with_the_proxy(tmp_path):
    marker = f"marker-{os.getpid()}-{time.monotonic_ns()}"
    script = tmp_path / "run_proxy.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, anyio
        sys.path.insert(0, {str(ROOT / "tests" / "support")!r})
        from fakes import HashEncoder
        from skillsight_fast.tools.catalog import ServerConfig
        from skillsight_fast.tools.proxy import ToolProxy
        proxy = ToolProxy([ServerConfig(name="s", command=sys.executable,
                                        args=({str(HOSTILE)!r}, "stuck", "0", {marker!r}))],
                          encoder=HashEncoder(), index_cache=False)
        async def main():
            async with proxy.running():
                await proxy.wait_ready()
                print("ready", flush=True)
                await proxy.call("s/hang", {{}})
        anyio.run(main)
    """)
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        pids = _pids_with(marker)
        assert pids
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while _pids_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _pids_with(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _pids_with(marker):
            os.kill(pid, signal.SIGKILL)


def _pids_with(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if marker.encode() in cmd and ") Z " not in stat:
                out.append(int(d.name))
    return out


def test_a_tool_list_that_never_ends_stops_at_the_cap_with_a_note():
    """H1: 512 tools of ~8 KB and a new nextCursor on every page; reading stops at the tool cap."""
    from skillsight_fast.tools.guard import MAX_TOOLS_PER_SERVER

    proxy = _proxy(("endless", "endless"), start_timeout=45, first_wait=45)

    async def run():
        async with proxy.running():
            await proxy.wait_ready()
            status = proxy.status()[0]
            assert status["state"] == "ready", status
            assert status["tools"] == MAX_TOOLS_PER_SERVER
            assert "more than 512 tools" in status["note"]

    anyio.run(run)


def test_a_tool_list_of_endless_empty_pages_stops_at_the_page_cap():
    """H1: a new cursor on every empty page; reading stops after MAX_LIST_PAGES pages."""
    from skillsight_fast.tools.mcp_source import MAX_LIST_PAGES

    proxy = _proxy(("empty", "endless", 1), start_timeout=45, first_wait=45)

    async def run():
        async with proxy.running():
            await proxy.wait_ready()
            status = proxy.status()[0]
            assert status["state"] == "ready" and status["tools"] == 0, status
            assert f"more than {MAX_LIST_PAGES} pages" in status["note"]

    anyio.run(run)


@pytest.mark.parametrize("mode", ["big", "noline"])
def test_an_answer_over_the_message_cap_fails_its_call_with_a_message(mode):
    """M6: a 12 MB answer (or one that never ends its line) fails its call with the cap named,
    instead of being forwarded whole (or waiting for the call's timeout)."""
    proxy = _proxy((mode, mode, 12), call_timeout=600)

    async def run():
        async with proxy.running():
            await proxy.wait_ready()
            res = await proxy.call(f"{mode}/big", {})
            assert res.is_error and "8,388,608-byte limit" in _text(res), _text(res)[:300]
            if mode == "big":
                assert _text(await proxy.call(f"{mode}/echo", {"text": "next"})) == "next"

    anyio.run(run)


def test_a_server_stderr_is_copied_up_to_its_cap(tmp_path):
    """L8: 20 MB on a server's stderr: the proxy's log gets at most MAX_STDERR_BYTES and a note."""
    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.mcp_source import MAX_STDERR_BYTES
    from skillsight_fast.tools.proxy import ToolProxy

    log = tmp_path / "proxy.log"
    with open(log, "w") as errlog:
        proxy = ToolProxy([ServerConfig(name="noisy", command=sys.executable,
                                        args=(str(HOSTILE), "noisy", "20"))],
                          encoder=HashEncoder(), errlog=errlog, index_cache=False, abstain=False)

        async def run():
            async with proxy.running():
                await proxy.wait_ready()
                assert proxy.status()[0]["state"] == "ready"
                assert _text(await proxy.call("noisy/echo", {"text": "ok"})) == "ok"

        anyio.run(run)
    deadline = time.monotonic() + 30
    while "rest is dropped" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = log.read_text()
    assert "rest is dropped" in text
    assert len(text.encode()) <= MAX_STDERR_BYTES + 300


@pytest.mark.parametrize("n", [0, 1, 2], ids=["same-list", "changing-list", "20000-at-once"])
def test_list_changed_notifications_are_coalesced_and_rate_limited(n):
    """M5: a server announcing a change after every listing (or 20,000 at once) gets at most one
    listing per REFRESH_INTERVAL, and searches keep answering meanwhile."""
    from skillsight_fast.tools.upstream import REFRESH_INTERVAL

    proxy = _proxy(("chatty", "chatty", n), first_wait=30)

    async def run():
        start = time.monotonic()  # before the server starts: every listing is in this window
        async with proxy.running():
            await proxy.wait_ready()
            for _ in range(4):
                out = await proxy.search("repeat the text back", 3)
                assert "chatty/echo" in [t["name"] for t in out["tools"]]
                await anyio.sleep(1.5)
            elapsed = time.monotonic() - start
            listings = int(_text(await proxy.call("chatty/listings", {})))
            # the first listing, then at most one per interval (and one for the call's own
            # re-listing of a tool missing from a changing list)
            assert listings <= 3 + elapsed / REFRESH_INTERVAL, (listings, elapsed)

    anyio.run(run)


class _HeldEncoder(HashEncoder):
    """A hash encoder whose batches with a tool of the big server (``tool_<i>``) wait until released
    (at most 120 s): the big server is "still encoding" for as long as the test needs."""

    def __init__(self):
        import threading

        super().__init__()
        self.release = threading.Event()

    def encode(self, texts):
        if any("tool_" in t for t in texts):
            self.release.wait(120)
        return super().encode(texts)


def test_a_big_server_is_encoded_in_the_background_while_searches_answer():
    """M9: with a 1,000-tool server still being encoded, a search answers within first_wait from
    the other servers' tools and names the big one in `indexing`; later searches find its tools."""
    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.proxy import ToolProxy

    configs = [ServerConfig(name=name, command=sys.executable, args=(str(HOSTILE), *map(str, args)))
               for name, *args in (("many", "many", 1000), ("small", "malformed"))]
    encoder = _HeldEncoder()
    proxy = ToolProxy(configs, encoder=encoder, errlog=open(os.devnull, "w"),  # noqa: SIM115 - as _proxy
                      index_cache=False, abstain=False, first_wait=60)

    async def run():
        async with proxy.running():
            while any(up.state != "ready" for up in proxy.upstreams.values()):
                await anyio.sleep(0.1)
            out = await proxy.search("weather forecast for a city", 5)
            assert out.get("indexing") == ["many"], out.get("indexing")
            assert out["tools"] and out["tools"][0]["name"] == "small/weather"
            encoder.release.set()
            deadline = time.monotonic() + 300
            while "indexing" in out and time.monotonic() < deadline:
                await anyio.sleep(1)
                out = await proxy.search("alpha beta gamma", 5)
            assert "indexing" not in out and out["tools"][0]["server"] == "many"

    anyio.run(run)
