"""Every path that opens a user-supplied file, fed a FIFO, /dev/zero, a billion-laughs YAML and a
100,000-deep JSON: a clear error or a bounded answer, never a hang, a traceback or a memory blow-up.

Each case runs in a fresh process (the command line where there is one) with a timeout and an
address-space cap; its peak RSS is read from ``wait4``. ``REPORT`` (env ``SKILLSIGHT_HOSTILE_REPORT``)
names a JSON file to write the per-surface counts and worst peak RSS to (the issue's note).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a case may take (a hang is what this catches, not speed).
TIMEOUT = 60.0
#: Address-space cap of a case (MB): far above a bounded read, far below a blow-up.
AS_LIMIT_MB = 2048

LAUGHS = (
    "\n".join(
        ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"{c}: &{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
        + [
            "name: *i",
            "description: *i",
            "openapi: '3.0.0'",
            "paths: {/x: {get: {summary: *i, description: *i}}}",
        ]
    )
    + "\n"
)
DEEP_JSON = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"


def plant(path: Path, kind: str, *, front_matter: bool = False) -> None:
    """Put a hostile file of ``kind`` at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "laughs":
        path.write_text(f"---\n{LAUGHS}---\nbody\n" if front_matter else LAUGHS)
    elif kind == "deep":
        path.write_text(f"---\nname: {'[' * 100_000}\n---\n" if front_matter else DEEP_JSON)
    path.chmod(0o600) if not path.is_symlink() else None


#: Runs the command as its own child and writes "exit-status peak-RSS-KB" to argv[1]: the launcher is
#: small when it forks, so the peak is the command's own (Linux carries a forking parent's peak over).
_LAUNCHER = (
    "import os, resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]) << 20, int(sys.argv[2]) << 20))\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execvp(sys.argv[3], sys.argv[3:])\n"
    "_, st, ru = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(f'{os.waitstatus_to_exitcode(st)} {ru.ru_maxrss}')\n"
)


def run_case(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int | None, str, int]:
    """(exit status or None on timeout, stderr, peak RSS in KB) of one command in a fresh process."""
    stamp = time.monotonic_ns()
    err_path, out_path = cwd / f".stderr-{stamp}", cwd / f".status-{stamp}"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCHER, str(out_path), str(AS_LIMIT_MB), *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        proc.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    text = err_path.read_text(errors="replace")
    err_path.unlink()
    if not out_path.exists():
        return None, text, 0
    status, rss = map(int, out_path.read_text().split())
    out_path.unlink()
    return status, text, rss


def _api(code: str) -> list[str]:
    """A Python snippet as a command: a SkillsightError becomes one line on stderr and exit 1."""
    wrapped = (
        "import sys\nfrom skillsight_fast.errors import SkillsightError\ntry:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "except SkillsightError as exc:\n    print(exc, file=sys.stderr); sys.exit(1)\n"
    )
    return [sys.executable, "-c", wrapped]


CLI = [sys.executable, "-m", "skillsight_fast.cli"]


def surfaces(tmp: Path, idx: Path) -> dict[str, tuple[Path, bool, list[str]]]:
    """name -> (where the hostile file goes, whether it is SKILL.md front matter, the command)."""
    proj = tmp / "proj"
    return {
        "skill": (
            tmp / "lib" / "x" / "SKILL.md",
            True,
            [*CLI, "index", str(tmp / "lib"), "-o", str(tmp / "o1"), "-q"],
        ),
        "skills-jsonl": (
            tmp / "skills.jsonl",
            False,
            [*CLI, "index", str(tmp / "skills.jsonl"), "-o", str(tmp / "o2"), "-q"],
        ),
        "openapi-yaml": (
            tmp / "spec.yaml",
            False,
            [*CLI, "index", "--openapi", str(tmp / "spec.yaml"), "-o", str(tmp / "o3")],
        ),
        "openapi-json": (
            tmp / "spec.json",
            False,
            [*CLI, "index", "--openapi", str(tmp / "spec.json"), "-o", str(tmp / "o4")],
        ),
        "proxy-config": (
            tmp / "servers.json",
            False,
            [*CLI, "serve", "--mcp", "--proxy", str(tmp / "servers.json")],
        ),
        "settings": (
            proj / ".claude" / "settings.json",
            False,
            [*CLI, "install", "claude-code", "--project", "--dir", str(proj), "-i", str(idx), "--no-mcp"],
        ),
        "mcp-json": (
            proj / ".mcp.json",
            False,
            [*CLI, "install", "claude-code", "--project", "--dir", str(proj), "-i", str(idx), "--no-hook"],
        ),
        "token-file": (
            tmp / "token",
            False,
            [*CLI, "serve", "--http", "-i", str(idx), "--token-file", str(tmp / "token")],
        ),
        "calibration": (
            idx / "calibration.json",
            False,
            _api(
                "from skillsight_fast.engine.abstention import resolve_abstention\n"
                f"resolve_abstention({str(idx)!r})"
            ),
        ),
        "queries": (
            tmp / "queries.jsonl",
            False,
            _api(
                "from skillsight_fast.library.queries import read_queries\n"
                f"read_queries({str(tmp / 'queries.jsonl')!r})"
            ),
        ),
        "triggers": (
            tmp / "triggers.json",
            False,
            _api(
                f"from skillsight_fast.authoring.triggers import read_triggers\n"
                f"read_triggers({str(tmp / 'triggers.json')!r})"
            ),
        ),
        "manifest": (
            tmp / "idx2" / "manifest.json",
            False,
            _api(
                "from pathlib import Path\nfrom skillsight_fast.engine.io import read_manifest\n"
                f"read_manifest(Path({str(tmp / 'idx2')!r}))"
            ),
        ),
        "endpoint-record": (
            None,
            False,  # placed by the test: its path depends on the runtime folder
            [*CLI, "hook", "claude-code", "-i", str(idx), "--no-cold"],
        ),
    }


KINDS = ("fifo", "zero", "laughs", "deep")
RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    idx = tmp / "idx"
    SkillIndex.build(toy_skills(), HashEncoder()).save(idx)
    (tmp / "idx2").mkdir()
    (tmp / "run").mkdir(mode=0o700)
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_RUNTIME_DIR=str(tmp / "run"), HOME=str(tmp / "home"))
    yield tmp, idx, env
    report = os.environ.get("SKILLSIGHT_HOSTILE_REPORT")
    if report:
        Path(report).write_text(json.dumps(RESULTS, indent=1, sort_keys=True))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "surface",
    [
        "skill",
        "skills-jsonl",
        "openapi-yaml",
        "openapi-json",
        "proxy-config",
        "settings",
        "mcp-json",
        "token-file",
        "calibration",
        "queries",
        "triggers",
        "manifest",
        "endpoint-record",
    ],
)
def test_a_hostile_file_gets_a_clear_error_or_a_bounded_answer(world, surface, kind):
    tmp, idx, env = world
    where, front, argv = surfaces(tmp, idx)[surface]
    if surface == "endpoint-record":
        from skillsight_fast.agents import endpoint

        old = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"]
        try:
            where = endpoint.endpoint_file(idx)
        finally:
            os.environ.pop("XDG_RUNTIME_DIR") if old is None else os.environ.__setitem__(
                "XDG_RUNTIME_DIR", old
            )
    plant(where, kind, front_matter=front)
    try:
        status, err, rss_kb = run_case(argv, tmp, env)
    finally:
        if where.exists() or where.is_symlink():
            where.unlink()
    row = RESULTS.setdefault(surface, {"tried": 0, "clean": 0, "worst_rss_mb": 0.0, "worst_case": ""})
    row["tried"] += 1
    clean = (
        status is not None and "Traceback" not in err and status in (0, 1) and (status == 0 or err.strip())
    )
    if clean:
        row["clean"] += 1
    if rss_kb / 1024 > row["worst_rss_mb"]:
        row["worst_rss_mb"], row["worst_case"] = round(rss_kb / 1024, 1), kind
    assert status is not None, f"{surface}/{kind}: no answer within {TIMEOUT:g} s"
    assert "Traceback" not in err, err[-3000:]
    assert status in (0, 1), (status, err[-2000:])
    if status == 1:  # a clear message: its last line says what is wrong, on one line
        last = err.strip().splitlines()[-1]
        assert last.startswith(("skillsight", "/", "error")) or ":" in last, err[-2000:]
    if surface == "endpoint-record":
        assert status == 0 and err == ""  # the hook stays silent
