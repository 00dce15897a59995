"""Fuzz runs (hypothesis) of the surfaces of issue 41's bounds: the hook's handshake, an upstream's
pages and ``tools/list_changed`` notifications, the size of one upstream message, the files of a
skill folder and a watched library root that is replaced, swapped or removed. Each run is bounded
(a fixed number of examples; caps shrunk where the real ones would only cost time)."""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakes import HashEncoder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents import endpoint

FUZZ = settings(max_examples=50, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# ---------------------------------------------------------------------- the handshake


def _ask_guard(guard, bearer: bytes, nonce: bytes | None, body: bytes) -> tuple[int, list[bytes]]:
    out = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    async def send(msg):
        out.append(msg)

    async def receive():
        return {"type": "http.request", "body": b""}

    headers = [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer " + bearer)]
    if nonce is not None:
        headers.append((endpoint.NONCE_HEADER.lower().encode(), nonce))
    guard.app = app
    asyncio.run(guard({"type": "http", "method": "GET", "path": "/health", "http_version": "1.1",
                       "headers": headers}, receive, send))
    proofs = [v for k, v in out[0]["headers"] if k == endpoint.PROOF_HEADER.lower().encode()]
    return out[0]["status"], proofs


@FUZZ
@given(bearer=st.one_of(st.binary(max_size=80), st.just(b"secret"), st.just(b"token")),
       nonce=st.one_of(st.none(), st.binary(min_size=1, max_size=200).filter(lambda b: b.strip() == b
                                                                             and b"\r" not in b
                                                                             and b"\n" not in b)),
       body=st.binary(max_size=200))
def test_only_the_hook_token_opens_the_server_and_no_seen_value_signs(bearer, nonce, body):
    from skillsight_fast.agents.http_guard import Guard

    secret = endpoint.new_secret()
    token = endpoint.hook_token(secret).encode()
    guard = Guard(None, token="t" * 32, allowed_hosts=frozenset({"127.0.0.1"}), endpoint_secret=secret)
    for given_bearer in (bearer.replace(b"secret", secret.encode()).replace(b"token", token),):
        status, proofs = _ask_guard(guard, given_bearer.strip(b" "), nonce, body)
        if given_bearer.strip(b" ") != token:
            assert status == 401
            continue
        assert status == 200
        if nonce is not None and len(nonce) <= 128:
            assert proofs == [endpoint.proof(secret, nonce, body).encode()]
            # what a port holder sees (the token, the nonce, the body) signs nothing it could forge
            for key in (token, nonce, body, token + nonce):
                forged = hmac.new(key, nonce + b"\n" + body, "sha256").hexdigest().encode()
                assert forged != proofs[0]


# ---------------------------------------------------------------------- upstream pages


class _Pages:
    """A fake SDK session whose ``tools/list`` pages follow a script (then repeat its last page)."""

    def __init__(self, pages):
        self.pages, self.asked = pages, 0

    async def list_tools(self, params=None):
        page = self.pages[min(self.asked, len(self.pages) - 1)]
        self.asked += 1
        n, cursor, size = page
        tools = [SimpleNamespace(name=f"t{self.asked}_{i}", title=None, description="d" * size,
                                 input_schema={"type": "object"}) for i in range(n)]
        return SimpleNamespace(tools=tools, next_cursor=cursor)


PAGE = st.tuples(st.integers(0, 40), st.one_of(st.none(), st.sampled_from(["a", "b"]),
                                               st.text(min_size=1, max_size=4)), st.integers(0, 3000))


@FUZZ
@given(pages=st.lists(PAGE, min_size=1, max_size=12), cap=st.integers(1, 60))
def test_a_tool_listing_is_bounded_in_pages_tools_and_text(monkeypatch, pages, cap):
    pytest.importorskip("mcp")
    import anyio

    from skillsight_fast.tools import mcp_source

    monkeypatch.setattr(mcp_source, "MAX_LIST_PAGES", 8)
    monkeypatch.setattr(mcp_source, "MAX_LIST_CHARS", 50_000)
    session = _Pages(pages)
    tools, note = anyio.run(mcp_source.list_all_tools, session, cap)
    assert session.asked <= 8
    assert len(tools) <= cap + 1
    last = pages[min(session.asked, len(pages)) - 1]
    # the whole list was read (its last page has no cursor) exactly when there is no note
    assert (note == "") == (last[1] is None)


# ---------------------------------------------------------------------- notifications


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bursts=st.lists(st.tuples(st.integers(1, 500), st.floats(0, 0.05)), min_size=1, max_size=8))
def test_list_changed_bursts_cost_one_listing_per_interval(monkeypatch, bursts):
    pytest.importorskip("mcp")
    import anyio

    from skillsight_fast.tools import upstream
    from skillsight_fast.tools.catalog import ServerConfig

    monkeypatch.setattr(upstream, "REFRESH_INTERVAL", 0.05)
    changed = SimpleNamespace(method="notifications/tools/list_changed")

    async def run():
        async with anyio.create_task_group() as tg:
            proxy = SimpleNamespace(task_group=tg, start_timeout=5, catalog_changed=lambda: None)
            up = upstream.Upstream(ServerConfig(name="s", command="x"), proxy)
            up._session = _Pages([(1, None, 1)])
            t0 = anyio.current_time()
            for count, pause in bursts:
                for _ in range(count):
                    await up._on_message(changed)
                await anyio.sleep(pause)
            while up._refreshing:
                await anyio.sleep(0.01)
            elapsed = anyio.current_time() - t0
            assert up.notifications == sum(c for c, _ in bursts)
            assert 1 <= up._session.asked == up.refreshes <= 2 + elapsed / upstream.REFRESH_INTERVAL

    anyio.run(run)


# ---------------------------------------------------------------------- message sizes


@FUZZ
@given(lines=st.lists(st.tuples(st.integers(0, 3000), st.one_of(st.none(), st.integers(0, 99), st.text(
    alphabet="abc", min_size=1, max_size=5)), st.booleans()), min_size=1, max_size=8),
    cuts=st.lists(st.integers(1, 700), min_size=1, max_size=30))
def test_any_chunking_of_any_lines_gives_the_lines_or_an_error_per_request(monkeypatch, lines, cuts):
    import anyio

    from skillsight_fast.tools import guard

    monkeypatch.setattr(guard, "MAX_MESSAGE_BYTES", 1000)
    raw, expected = b"", []
    for size, mid, id_first in lines:
        payload = {"jsonrpc": "2.0", "result": {"text": "x" * size}}
        if mid is not None:
            payload = {"jsonrpc": "2.0", "id": mid, **payload} if id_first else {**payload, "id": mid}
        line = json.dumps(payload).encode()
        raw += line + b"\n"
        if len(line) <= 1000:
            expected.append(line.decode() + "\n")
        elif mid is not None:
            expected.append(("refused", mid))
    chunks, at, i = [], 0, 0
    while at < len(raw):
        chunks.append(raw[at: at + cuts[i % len(cuts)]])
        at += cuts[i % len(cuts)]
        i += 1

    class Stream:
        async def receive(self):
            if not chunks:
                raise anyio.EndOfStream
            return chunks.pop(0)

    async def read():
        return [line async for line in guard.BoundedLines(Stream())]

    got = anyio.run(read)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if isinstance(e, str):
            assert g == e
        else:
            msg = json.loads(g)
            assert msg["id"] == e[1] and "limit" in msg["error"]["message"]


# ---------------------------------------------------------------------- skill folder files


@pytest.fixture(scope="module")
def folder_catalog(tmp_path_factory):
    from skillsight_fast.agents.live import LiveIndex
    from skillsight_fast.library.skills import load_skills

    root = tmp_path_factory.mktemp("files")
    lib = root / "lib"
    write_skill(lib, "pdf", name="pdf", description="Merge PDF files.")
    report = load_skills([lib])
    index = SkillIndex.build(report.skills, HashEncoder())
    index.state.roots = report.roots
    return LiveIndex.of(index, None, root / "idx"), lib / "pdf"


NAME = st.text(alphabet="ab.", min_size=1, max_size=4)


@FUZZ
@given(files=st.lists(st.tuples(st.lists(NAME, min_size=1, max_size=3),
                                st.sampled_from([0o600, 0o640, 0o644, 0o604])),
                      min_size=1, max_size=5),
       ask=st.lists(NAME, min_size=1, max_size=3))
def test_a_skill_folder_serves_only_visible_world_readable_files(folder_catalog, files, ask):
    from skillsight_fast.agents.live import SkillFileError

    catalog, folder = folder_catalog
    made = []
    try:
        for parts, mode in files:
            if any(p in (".", "..") for p in parts):
                continue
            path = folder.joinpath(*parts)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    continue
                path.write_text("/".join(parts))
            except OSError:
                continue
            path.chmod(mode)
            made.append(path)
        rel = "/".join(ask)
        try:
            data, _, real = catalog.skill_file("pdf", rel)
        except SkillFileError:
            return
        assert not any(p.startswith(".") for p in real.relative_to(folder.resolve()).parts)
        assert real.stat().st_mode & 0o004 and data == real.read_bytes()
    finally:
        for child in sorted(folder.iterdir(), reverse=True):
            if child.name != "SKILL.md":
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


# ---------------------------------------------------------------------- watched roots


OPS = st.lists(st.sampled_from(["replace", "swap", "remove", "add"]), min_size=1, max_size=4)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_a_watched_root_ends_in_the_state_of_the_library(ops):
    pytest.importorskip("watchfiles")
    from skillsight_fast.agents.service import SkillService
    from skillsight_fast.agents.watch import LiveIndexWatcher
    from skillsight_fast.library.skills import load_skills

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        releases = tmp / "releases"
        n = [0]

        def release(extra: int) -> Path:
            n[0] += 1
            d = releases / f"v{n[0]}"
            write_skill(d, "pdf", name="pdf", description="Merge PDF files.", body="pdf merge pages")
            for i in range(extra):
                write_skill(d, f"s{i}", name=f"s{i}", description=f"Skill {i}.", body=f"topic{i} words")
            return d

        root = tmp / "root"
        root.symlink_to(release(1))
        SkillIndex.build(load_skills([root]).skills, HashEncoder()).save(tmp / "idx")
        service = SkillService(tmp / "idx", index=SkillIndex.load(tmp / "idx", encoder=HashEncoder()))
        with LiveIndexWatcher(service, [root], rule=lambda d: None, debounce_ms=50):
            for k, op in enumerate(ops):
                target = Path(os.path.realpath(root))
                if op == "replace":  # the folder the link names, replaced by a copy with one more skill
                    fresh = release(k + 2)
                    shutil.rmtree(target)
                    shutil.copytree(fresh, target)
                elif op == "swap":
                    (tmp / "root.new").symlink_to(release(k + 2))
                    os.replace(tmp / "root.new", root)
                elif op == "remove":
                    shutil.rmtree(target)
                    time.sleep(0.3)
                    shutil.copytree(release(k + 2), target)
                else:
                    write_skill(target, f"added{k}", name=f"added{k}", description="Added.",
                                body="added words")
                time.sleep(0.2)
            want = {s.id for s in load_skills([root]).skills}
            deadline = time.monotonic() + 60
            while set(service.live().row_of) != want and time.monotonic() < deadline:
                time.sleep(0.1)
            assert set(service.live().row_of) == want
