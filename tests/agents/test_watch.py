"""The live catalog: skill files, skill:// resources, and serve --watch swapping versions under load."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request

import pytest
from fakes import HashEncoder
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents.http import make_http_server
from skillsight_fast.agents.live import SkillFileError, UnknownSkillError, skill_uri
from skillsight_fast.agents.service import SkillService
from skillsight_fast.agents.watch import LiveIndexWatcher, sources_of
from skillsight_fast.errors import SkillsightError
from skillsight_fast.library.skills import load_skills

pytest.importorskip("watchfiles")

SKILLS = {
    "pdf": ("Merge and split PDF files.", "Use pypdf to merge pages and extract tables from pdf."),
    "mesh": ("Analyse STL meshes.", "stl mesh volume connected components mass."),
    "team/csv": ("Clean CSV files.", "csv columns rows dedupe spreadsheet."),
}
#: Longest wait for a change to reach the searches (a bound, not a speed claim).
BOUND_S = 30.0


def _library(root):
    for rel, (desc, body) in SKILLS.items():
        write_skill(root, rel, name=rel.split("/")[-1], description=desc, body=body)
    (root / "pdf" / "scripts").mkdir()
    (root / "pdf" / "scripts" / "merge.py").write_text("import pypdf\nprint('merge')\n")
    (root / "pdf" / "references").mkdir()
    (root / "pdf" / "references" / "FORMS.md").write_text("# Forms\nfill pdf forms\n")
    (root / "pdf" / "logo.bin").write_bytes(b"\x89PNG\xff\xfe\x00")
    return root


@pytest.fixture
def live(tmp_path):
    lib = _library(tmp_path / "lib")
    SkillIndex.build(load_skills([lib]).skills, HashEncoder()).save(tmp_path / "idx")
    service = SkillService(tmp_path / "idx", index=SkillIndex.load(tmp_path / "idx", encoder=HashEncoder()))
    service.warm()
    return service, lib, tmp_path


def _wait_for(pred, bound=BOUND_S):
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"not reached within {bound} s")


# ---------------------------------------------------------------------- files and resources


def test_get_skill_reads_files_inside_the_skill_folder_only(live):
    service, lib, tmp_path = live
    got = service.get_skill("pdf", "scripts/merge.py")
    assert got["text"] == "import pypdf\nprint('merge')\n" and got["uri"] == "skill://pdf/scripts/merge.py"
    assert service.get_skill("pdf", "references/FORMS.md")["mime_type"] == "text/markdown"
    assert service.get_skill("team/csv", "SKILL.md")["text"].startswith("---\nname: csv")
    (tmp_path / "secret.txt").write_text("top secret")
    os.symlink(tmp_path / "secret.txt", lib / "pdf" / "references" / "link.md")
    os.symlink(tmp_path, lib / "pdf" / "up")
    for bad in ("../mesh/SKILL.md", "scripts/../../mesh/SKILL.md", "/etc/passwd", str(lib / "pdf" / "SKILL.md"),
                "references/link.md", "up/secret.txt", "scripts", "", "scripts//merge.py", "nope.txt",
                "scripts\\merge.py", "~/x", None, 3):
        with pytest.raises(SkillFileError):
            service.get_skill("pdf", bad if bad is not None else "")  # None means SKILL.md; "" is refused
    with pytest.raises(SkillFileError, match="not UTF-8"):
        service.get_skill("pdf", "logo.bin")
    with pytest.raises(UnknownSkillError):
        service.get_skill("nope", "scripts/merge.py")


def test_skill_uris_round_trip(live):
    service, _, _ = live
    cat = service.live()
    assert {r["uri"] for r in cat.resources()} == {"skill://pdf/SKILL.md", "skill://mesh/SKILL.md",
                                                   "skill://team/csv/SKILL.md"}
    assert cat.parse_uri("skill://team/csv/SKILL.md") == ("team/csv", "SKILL.md")
    assert cat.parse_uri(skill_uri("pdf", "scripts/merge.py")) == ("pdf", "scripts/merge.py")
    text, mime = service.read_uri("skill://pdf/scripts/merge.py")
    assert "pypdf" in text and mime.startswith("text/")
    data, mime = service.read_uri("skill://pdf/logo.bin")
    assert data == b"\x89PNG\xff\xfe\x00"
    for bad in ("skill://nope/SKILL.md", "http://pdf/SKILL.md", "skill://pdf/../mesh/SKILL.md"):
        with pytest.raises((UnknownSkillError, SkillFileError)):
            service.read_uri(bad)
    hits = service.find("merge pdf pages", 2)["hits"]
    assert hits[0]["uri"] == "skill://pdf/SKILL.md"


def test_sources_are_read_back_from_the_index(live):
    service, lib, _ = live
    assert sources_of(service.index) == [lib.absolute()]


# ---------------------------------------------------------------------- watching


def test_a_new_skill_is_found_after_it_is_written(live):
    service, lib, _ = live
    with LiveIndexWatcher(service, [lib], rule=lambda d: None, debounce_ms=50) as watcher:
        assert service.live().version == 0  # the initial refresh found nothing to change
        write_skill(lib, "docker", name="docker", description="Build Docker images.",
                    body="docker build compose deploy containers kubernetes")
        _wait_for(lambda: service.find("docker compose deploy containers", 1)["hits"][0]["id"] == "docker")
        assert watcher.updates == 1 and watcher.last_report.added == ["docker"]
        assert watcher.last_report.encoded == 1
        assert service.get_skill("docker")["text"].startswith("---\nname: docker")
        (lib / "mesh" / "SKILL.md").unlink()
        (lib / "mesh").rmdir()
        _wait_for(lambda: "mesh" not in service.live().row_of)
        with pytest.raises(UnknownSkillError):
            service.get_skill("mesh")
    assert json.loads((service.directory / "manifest.json").read_text())["n_skills"] == 3


def test_swap_listeners_hear_each_swap_and_cannot_undo_it(live):
    """Each swap calls the listeners (the MCP server's list_changed sender) with the new version, on
    the watcher's thread; a listener that raises is logged and the new version still serves."""
    service, lib, _ = live
    heard = []

    def broken(new):
        raise RuntimeError("the client is gone")

    service.add_swap_listener(broken)
    service.add_swap_listener(lambda new: heard.append((new.version, threading.current_thread().name)))
    with LiveIndexWatcher(service, [lib], rule=lambda d: None, debounce_ms=50):
        assert heard == []  # the initial refresh changed nothing: no swap, no call
        write_skill(lib, "docker", name="docker", description="Build Docker images.",
                    body="docker build compose deploy containers kubernetes")
        _wait_for(lambda: heard)
    assert heard == [(1, "skillsight-watch")]
    assert service.live().version == 1 and "docker" in service.live().row_of


def test_no_request_fails_while_versions_are_swapped(live):
    """Searches from several threads while the watcher writes and swaps versions: none fails and each
    answer comes from one version (its hits all exist in the version it reports)."""
    service, lib, _ = live
    errors: list[BaseException] = []
    answers: list[dict] = []
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            try:
                out = service.find("merge pdf pages and docker containers", 5)
                answers.append(out)
                service.get_skill(out["hits"][0]["id"])
                service.live().resources()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

    with LiveIndexWatcher(service, [lib], rule=lambda d: None, debounce_ms=20):
        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            for i in range(4):
                write_skill(lib, f"extra{i}", name=f"extra{i}", description=f"Extra helper {i}.",
                            body=f"extra words number{i} docker pdf")
                _wait_for(lambda i=i: f"extra{i}" in service.live().row_of)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
    assert not errors, errors[:3]
    versions = {a["version"] for a in answers}
    assert len(versions) >= 3, versions  # the searches really ran across swaps
    assert all(h["id"] != "extra3" for a in answers if a["version"] < 4 for h in a["hits"])


def test_a_broken_library_keeps_the_current_version(live):
    service, lib, _ = live
    watcher = LiveIndexWatcher(service, [lib], rule=lambda d: None)
    write_skill(lib, "dup", name="dup", description="x", body="y")
    write_skill(lib, "bad", raw=b"\xff\xfe not utf8")
    watcher.refresh()  # a broken file is skipped, the good one added
    assert "dup" in service.live().row_of and "bad" not in service.live().row_of
    for rel in ("pdf", "mesh", "team/csv", "dup"):
        (lib / rel / "SKILL.md").unlink()
    watcher._safe_refresh()
    assert watcher.last_error and "no skills found" in watcher.last_error
    assert len(service.index) == 4  # still serving the last good version
    with pytest.raises(SkillsightError, match="no such file"):
        LiveIndexWatcher(service, [lib / "missing"], rule=lambda d: None)


def test_watch_over_http(live):
    service, lib, _ = live
    server = make_http_server(service, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def search(task):
        req = urllib.request.Request(server.url + "/search", data=json.dumps({"task": task, "k": 1}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    try:
        with LiveIndexWatcher(service, [lib], rule=lambda d: None, debounce_ms=50):
            write_skill(lib, "git", name="git", description="Git helper.", body="git rebase branch commit history")
            _wait_for(lambda: search("git rebase branch history")["hits"][0]["id"] == "git")
            with urllib.request.urlopen(server.url + "/skill/pdf?path=scripts/merge.py", timeout=10) as resp:
                assert json.loads(resp.read())["text"].startswith("import pypdf")
            with urllib.request.urlopen(server.url + "/health", timeout=10) as resp:
                assert json.loads(resp.read())["version"] == 1
            try:
                urllib.request.urlopen(server.url + "/skill/pdf?path=../mesh/SKILL.md", timeout=10)
                raise AssertionError("traversal answered")
            except urllib.error.HTTPError as exc:
                assert exc.code == 404
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------- replaced and missing roots


def test_a_library_root_replaced_as_a_whole_is_watched_anew(live):
    """M4: rm -rf lib && cp -r new lib: the copy is picked up, and so is every later change."""
    import shutil

    service, lib, tmp = live
    new = _library(tmp / "new")
    write_skill(new, "docker", name="docker", description="Build Docker images.",
                body="docker build compose deploy containers kubernetes")
    with LiveIndexWatcher(service, [lib], rule=lambda d: None, debounce_ms=50) as watcher:
        shutil.rmtree(lib)
        shutil.copytree(new, lib)
        _wait_for(lambda: "docker" in service.live().row_of)
        write_skill(lib, "git", name="git", description="Git helper.", body="git rebase branch commit history")
        _wait_for(lambda: "git" in service.live().row_of)
        assert watcher.root_swaps >= 1 and watcher.status()["ok"]


def test_a_symlinked_root_swapped_atomically_is_followed(live):
    """M4: the deploy layout: root -> releases/v1, then root -> releases/v2 by an atomic rename."""
    _, lib, tmp = live
    v1, v2 = tmp / "releases" / "v1", tmp / "releases" / "v2"
    v1.parent.mkdir()
    lib.rename(v1)
    _library(v2)
    write_skill(v2, "docker", name="docker", description="Build Docker images.",
                body="docker build compose deploy containers kubernetes")
    root = tmp / "root"
    root.symlink_to(v1)
    SkillIndex.build(load_skills([root]).skills, HashEncoder()).save(tmp / "idx2")
    service = SkillService(tmp / "idx2", index=SkillIndex.load(tmp / "idx2", encoder=HashEncoder()))
    with LiveIndexWatcher(service, [root], rule=lambda d: None, debounce_ms=50):
        (tmp / "root.new").symlink_to(v2)
        os.replace(tmp / "root.new", root)
        _wait_for(lambda: "docker" in service.live().row_of)
        write_skill(v2, "git", name="git", description="Git helper.", body="git rebase branch commit history")
        _wait_for(lambda: "git" in service.live().row_of)


def test_a_root_that_is_gone_is_reported_by_health_until_it_is_back(live):
    """M4: a removed root is logged and /health says degraded; when it is back it is watched again."""
    import shutil

    service, lib, tmp = live
    backup = _library(tmp / "backup")
    server = make_http_server(service, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def health():
        with urllib.request.urlopen(server.url + "/health", timeout=10) as resp:
            return json.loads(resp.read())

    try:
        with LiveIndexWatcher(service, [lib], rule=lambda d: None, debounce_ms=50):
            assert health()["status"] == "ok" and health()["watch"]["ok"]
            shutil.rmtree(lib)
            _wait_for(lambda: health()["status"] == "degraded")
            assert health()["watch"]["missing"] == [str(lib)]
            assert len(service.index) == 3  # the last version is still served
            shutil.copytree(backup, lib)
            write_skill(lib, "git", name="git", description="Git helper.", body="git rebase branch history")
            _wait_for(lambda: "git" in service.live().row_of)
            assert health()["status"] == "ok"
    finally:
        server.shutdown()
        server.server_close()
