"""The Claude Code prompt hook, run as Claude Code runs it: a fresh process, the host's JSON on stdin.

The input is the ``UserPromptSubmit`` hook input of Claude Code (``session_id``, ``transcript_path``,
``cwd``, ``permission_mode``, ``hook_event_name``, ``prompt``; the fields of ``BaseHookInput`` and
``UserPromptSubmitHookInput`` in the Claude Agent SDK), and the output must be exactly
``{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": str}}`` (Claude
Code rejects unknown keys). The library is real: SkillsBench skills written as SKILL.md folders,
indexed with the bundled model and calibrated on SkillsBench tasks plus the bundled off-topic list.

Every way the hook can fail has a test here: the hook must answer nothing and exit 0, since a
non-zero status (2 blocks the prompt) or stray output would break the host.
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from skillsight_fast.agents import endpoint

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[2]
#: SkillsBench tasks whose gold skills make the library (their skills: 22 real SKILL.md files).
N_TASKS = 10
ON_TOPIC_GOLD = "mesh-analysis"
OFF_TOPIC = "What should I cook tonight with leftover rice, two eggs and some spinach?"
#: Generous time budget for cold answers in tests (a shared CI machine); the default is 5 s.
BUDGET = "60"


def write_library(root: Path, n_tasks: int = N_TASKS) -> tuple[Path, Path, list[dict]]:
    """The gold skills of the first ``n_tasks`` SkillsBench tasks as SKILL.md folders, and the tasks
    as labelled queries (ids without the ``skillsbench:`` prefix, as folder ids are)."""
    data = REPO / "data" / "skillsbench"
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = {d["id"]: d for d in map(json.loads, fh)}
    with gzip.open(data / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        tasks = [json.loads(line) for _, line in zip(range(n_tasks), fh)]
    lib = root / "lib"
    for sid in sorted({g for t in tasks for g in t["gold"]}):
        doc = docs[sid]
        folder = lib / sid.split(":", 1)[1]
        folder.mkdir(parents=True, exist_ok=True)
        meta = yaml.safe_dump({"name": doc["name"], "description": doc["description"]}, sort_keys=False,
                              allow_unicode=True, width=1_000_000)
        (folder / "SKILL.md").write_text(f"---\n{meta}---\n{doc['body']}", encoding="utf-8")
    labelled = root / "labelled.jsonl"
    rows = [{"id": t["id"], "text": t["text"], "gold": [g.split(":", 1)[1] for g in t["gold"]]} for t in tasks]
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return lib, labelled, rows


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """(index folder, tasks): the real library indexed and calibrated (``calibration.json``)."""
    from skillsight_fast.cli import main

    root = tmp_path_factory.mktemp("hook")
    lib, labelled, rows = write_library(root)
    idx = root / "idx"
    assert main(["index", str(lib), "-o", str(idx), "-q"]) == 0
    assert main(["-c", "max-loss=0.05", "calibrate", "-i", str(idx), "--data", str(labelled)]) == 0  # no answerable task lost
    assert (idx / "calibration.json").is_file()
    return idx, rows


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """A private endpoint folder (no real server of this user is ever asked)."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def host_json(prompt, **extra) -> str:
    """What Claude Code writes on the hook's stdin for a submitted prompt."""
    payload = {"session_id": "8f2a6c1e-3b7d-4e9a-9c1f-2d4b6a8e0f13",
               "transcript_path": "/home/me/.claude/projects/-home-me-proj/8f2a6c1e.jsonl",
               "cwd": "/home/me/proj", "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
               "prompt": prompt}
    payload.update(extra)
    return json.dumps(payload)


def run_hook(index, stdin: str | bytes, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """``skillsight hook claude-code -i INDEX ...`` as the host starts it (a fresh process)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    return subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "hook", "claude-code", "-i", str(index),
                           *args], input=data, capture_output=True, timeout=timeout, env=os.environ.copy())


def context_of(done: subprocess.CompletedProcess) -> str:
    """The additionalContext of a hook's stdout, checking the exact shape Claude Code accepts."""
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"hookSpecificOutput"}
    spec = out["hookSpecificOutput"]
    assert set(spec) == {"hookEventName", "additionalContext"} and spec["hookEventName"] == "UserPromptSubmit"
    assert isinstance(spec["additionalContext"], str) and spec["additionalContext"]
    return spec["additionalContext"]


def assert_silent(done: subprocess.CompletedProcess) -> None:
    """No output at all and exit 0: the host goes on as if there were no hook."""
    assert done.returncode == 0
    assert done.stdout == b""
    assert done.stderr == b""


# ---------------------------------------------------------------------- answers


def test_hook_lists_the_fitting_skill_for_a_task(calibrated, runtime):
    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    ctx = context_of(run_hook(idx, host_json(task["text"]), "--budget", BUDGET))
    lines = [line for line in ctx.splitlines() if line.startswith("- ")]
    assert 1 <= len(lines) <= 3
    first = lines[0]
    assert first.startswith(f"- {ON_TOPIC_GOLD} (") and f"/{ON_TOPIC_GOLD}/SKILL.md" in first
    assert "stl" in first.split(":", 1)[1]  # the evidence: the prompt's words found in the skill
    assert len(ctx) < 10_000  # Claude Code shows longer context only as a preview


def test_off_topic_prompt_gets_nothing_because_of_the_calibration(calibrated, runtime, tmp_path):
    idx, _ = calibrated
    assert_silent(run_hook(idx, host_json(OFF_TOPIC), "--budget", BUDGET))
    # without its calibration the index's own label-free threshold (derived at build) is as silent,
    # and with --no-abstain the hook lists skills for the same prompt: the empty answers above are
    # the abstention, not a failure
    raw = tmp_path / "uncalibrated"
    shutil.copytree(idx, raw)
    (raw / "calibration.json").unlink()
    assert_silent(run_hook(raw, host_json(OFF_TOPIC), "--budget", BUDGET))
    assert "- " in context_of(run_hook(raw, host_json(OFF_TOPIC), "--budget", BUDGET, "--no-abstain"))


def test_hook_asks_the_warm_server(calibrated, runtime):
    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    server = subprocess.Popen([sys.executable, "-m", "skillsight_fast.cli", "serve", "--http", "-i", str(idx),
                               "--port", "0", "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=os.environ.copy())  # an unread stderr pipe could fill up and block it
    try:
        ready = json.loads(server.stdout.readline())
        record = endpoint.lookup(idx)
        assert record is not None and record["url"] == ready["url"] and record["pid"] == server.pid
        # --no-cold: only a server can answer, so an answer proves the warm path
        warm = context_of(run_hook(idx, host_json(task["text"]), "--no-cold", "--server-timeout", "30"))
        assert warm.splitlines()[1].startswith(f"- {ON_TOPIC_GOLD} (")
        assert_silent(run_hook(idx, host_json(OFF_TOPIC), "--no-cold", "--server-timeout", "30"))
        server.send_signal(signal.SIGKILL)  # dies without withdrawing its endpoint file
        server.wait(30)
        assert endpoint.endpoint_file(idx).exists() and endpoint.lookup(idx) is None
        assert_silent(run_hook(idx, host_json(task["text"]), "--no-cold"))
        cold = context_of(run_hook(idx, host_json(task["text"]), "--budget", BUDGET))
        assert cold.splitlines()[1] == warm.splitlines()[1]  # the same answer without the server
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(30)


def test_hook_asks_the_mcp_server_the_host_started(calibrated, runtime):
    """What ``install`` sets up: the host runs ``serve --mcp --endpoint`` (here the SDK's stdio client
    plays the host) and the hook gets its answers from that warm process; when the host closes the
    session the endpoint is withdrawn."""
    mcp = pytest.importorskip("mcp")
    import asyncio

    from mcp.client.stdio import StdioServerParameters, stdio_client

    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    params = StdioServerParameters(command=sys.executable, env=os.environ.copy(),
                                   args=["-m", "skillsight_fast.cli", "serve", "--mcp", "-i", str(idx), "--endpoint", "-q"])

    async def session():
        async with stdio_client(params) as (r, w), mcp.ClientSession(r, w) as s:
            await s.initialize()
            t0 = time.monotonic()
            while endpoint.lookup(idx) is None:  # published once the index is loaded and warm
                assert time.monotonic() - t0 < 120, "serve --mcp --endpoint never published its endpoint"
                await asyncio.sleep(0.1)
            record = endpoint.lookup(idx)
            done = await asyncio.to_thread(run_hook, idx, host_json(task["text"]), "--no-cold",
                                           "--server-timeout", "30")
            found = await s.call_tool("find_skills", {"task": task["text"], "k": 3})
            return record, done, json.loads(found.content[0].text)

    record, done, found = asyncio.run(asyncio.wait_for(session(), 240))
    assert record["url"].startswith("http://127.0.0.1:")
    first = context_of(done).splitlines()[1]
    assert first.startswith(f"- {ON_TOPIC_GOLD} (") and found["hits"][0]["id"] == ON_TOPIC_GOLD
    t0 = time.monotonic()
    while endpoint.endpoint_file(idx).exists() and time.monotonic() - t0 < 30:
        time.sleep(0.1)
    assert endpoint.lookup(idx) is None


def test_serve_withdraws_its_endpoint_when_stopped(calibrated, runtime, tmp_path):
    idx, _ = calibrated
    # stderr goes to a file: an unread pipe fills up (compile notices, warnings) and blocks the server
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen([sys.executable, "-m", "skillsight_fast.cli", "serve", "--http", "-i", str(idx),
                               "--port", "0", "--json"], stdout=subprocess.PIPE, stderr=log,
                              env=os.environ.copy(),
                              # a test run started in the background (`pytest &`) ignores SIGINT, and a
                              # child would inherit that: give the server the default disposition
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    try:
        json.loads(server.stdout.readline())
        assert endpoint.lookup(idx) is not None
        server.send_signal(signal.SIGINT)
        server.wait(60)
        assert not endpoint.endpoint_file(idx).exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(30)
        log.close()


# ---------------------------------------------------------------------- failure modes: never break the host


def _damage_manifest(idx: Path) -> None:
    (idx / "manifest.json").write_text("{damaged", encoding="utf-8")


def _truncate_embeddings(idx: Path) -> None:
    for f in idx.glob("*.npy"):
        f.write_bytes(f.read_bytes()[:100])


def _remove_arrays(idx: Path) -> None:
    for f in idx.glob("*.npy"):
        f.unlink()


def _damage_texts(idx: Path) -> None:
    (idx / "texts.jsonl").write_text('"not the indexed texts"\n', encoding="utf-8")


def _damage_calibration(idx: Path) -> None:
    (idx / "calibration.json").write_text('{"signal": "cosine", "threshold": "high"}', encoding="utf-8")


def _remove_folder(idx: Path) -> None:
    shutil.rmtree(idx)


def _replace_with_file(idx: Path) -> None:
    shutil.rmtree(idx)
    idx.write_text("not an index", encoding="utf-8")


@pytest.mark.parametrize("damage", [_damage_manifest, _truncate_embeddings, _remove_arrays, _damage_texts,
                                    _damage_calibration, _remove_folder, _replace_with_file])
def test_a_damaged_index_gives_no_output_and_exit_0(calibrated, runtime, tmp_path, damage):
    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    broken = tmp_path / "broken"
    shutil.copytree(idx, broken)
    damage(broken)
    done = run_hook(broken, host_json(task["text"]), "--budget", BUDGET)
    if damage is _damage_texts and done.stdout:
        # the texts are not needed to search: a hook that still answers is fine, but only correctly
        assert context_of(done).splitlines()[1].startswith(f"- {ON_TOPIC_GOLD} (")
        return
    assert_silent(done)


@pytest.mark.parametrize("stdin", [
    b"", b"not json", b"[]", b"null", b'"a string"', b"{}", b'{"prompt": 3}', b'{"prompt": "   "}',
    b'{"prompt": ["a list"]}',
    host_json("merge the pdf files", hook_event_name="PreToolUse").encode(),
    b"\xff\xfe\x00 not utf-8 \x80",
    b'{"prompt": "' + b"x" * (1 << 20) + b'"}',  # over the stdin limit
    b'{"prompt": ' * 100_000,  # nesting too deep to parse
], ids=["empty", "not-json", "array", "null", "string", "no-prompt", "prompt-int", "prompt-blank",
        "prompt-list", "other-event", "not-utf8", "huge", "deep"])
def test_bad_host_input_gives_no_output_and_exit_0(calibrated, runtime, stdin):
    idx, _ = calibrated
    assert_silent(run_hook(idx, stdin, "--budget", BUDGET, timeout=60))


@pytest.mark.parametrize("argv", [[], ["claude-code"], ["other-host", "-i", "x"], ["claude-code", "-i"],
                                  ["claude-code", "-i", "x", "-k", "many"], ["--help"]])
def test_bad_arguments_give_no_output_and_exit_0(runtime, argv):
    done = subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "hook", *argv],
                          input=host_json("merge pdf").encode(), capture_output=True, timeout=60)
    assert_silent(done)


def test_over_budget_gives_no_output_and_exit_0(calibrated, runtime):
    """A cold search that cannot finish in the budget: the process leaves at the budget, silently."""
    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    t0 = time.monotonic()
    done = run_hook(idx, host_json(task["text"]), "--budget", "0.05")
    assert_silent(done)
    assert time.monotonic() - t0 < 30  # it did not wait for the search (a loose bound, not a speed claim)


class _Hanging(http.server.BaseHTTPRequestHandler):
    """A 'server' that accepts the request and never answers."""

    def do_POST(self):
        time.sleep(60)

    def log_message(self, *args):
        pass


class _Garbage(http.server.BaseHTTPRequestHandler):
    """A server that answers 200 with something that is not a search answer."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"hits": "not a list"'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("handler", [_Hanging, _Garbage], ids=["hanging", "garbage"])
def test_a_broken_server_falls_back_or_gives_nothing(calibrated, runtime, handler):
    """The endpoint file names a live process whose server hangs or answers garbage: the hook searches
    in-process instead (answer), or with --no-cold prints nothing, in both cases exit 0."""
    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        endpoint.publish(idx, f"http://127.0.0.1:{httpd.server_address[1]}", endpoint.new_secret())  # alive
        assert endpoint.lookup(idx) is not None
        assert_silent(run_hook(idx, host_json(task["text"]), "--no-cold", "--server-timeout", "0.5"))
        ctx = context_of(run_hook(idx, host_json(task["text"]), "--server-timeout", "0.5", "--budget", BUDGET))
        assert ctx.splitlines()[1].startswith(f"- {ON_TOPIC_GOLD} (")
    finally:
        endpoint.withdraw(idx)
        httpd.shutdown()
        httpd.server_close()


def test_endpoint_files_that_are_not_loopback_or_not_records_are_ignored(calibrated, runtime):
    idx, rows = calibrated
    path = endpoint.endpoint_file(idx)
    path.parent.mkdir(parents=True, exist_ok=True)
    for record in ({"url": "http://203.0.113.7:8765", "pid": os.getpid()}, {"url": 5, "pid": os.getpid()},
                   {"url": "http://127.0.0.1:1", "pid": "me"}, [1, 2]):
        path.write_text(json.dumps(record), encoding="utf-8")
        assert endpoint.lookup(idx) is None
    path.write_bytes(b"\xff\xfe")
    assert endpoint.lookup(idx) is None
    # a closed port on loopback: refused at once, the hook searches in-process
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path.write_text(json.dumps({"url": f"http://127.0.0.1:{port}", "pid": os.getpid()}), encoding="utf-8")
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    try:
        assert context_of(run_hook(idx, host_json(task["text"]), "--budget", BUDGET))
    finally:
        path.unlink()


def test_a_closed_stdout_gives_exit_0(calibrated, runtime):
    """The host stopped reading (its hook timeout, or it quit): writing fails, the exit status stays 0."""
    idx, rows = calibrated
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "hook", "claude-code", "-i", str(idx),
                               "--budget", BUDGET], input=host_json(task["text"]).encode(), stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 0 and done.stderr == b""


def test_an_unwritable_runtime_dir_is_no_failure(calibrated, tmp_path, monkeypatch):
    """No usable XDG_RUNTIME_DIR and an unwritable HOME: no server can be found, the cold path answers."""
    from skillsight_fast.models.encoder import cache_root

    idx, rows = calibrated
    # the model cache the index refers to stays where it is (the index names it by sha256)
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(cache_root()))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    monkeypatch.setenv("HOME", str(home))
    task = next(r for r in rows if ON_TOPIC_GOLD in r["gold"])
    try:
        assert context_of(run_hook(idx, host_json(task["text"]), "--budget", BUDGET))
    finally:
        home.chmod(0o700)
