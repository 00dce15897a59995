"""Issue 41, L7: a ``rescan`` run while an ``update`` is between its load and its save used to report
success and be silently undone by the update's save (5 of 5 runs). Both now hold the index's write
lock from load to save, so the rescan waits for the update and then applies to its result."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from fakes import HashEncoder

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.cli import main
from skillsight_fast.engine.update import update_index
from skillsight_fast.library.skills import Skill


def _skills(n: int) -> list[Skill]:
    topics = ["merge pdf pages", "clean csv rows", "stl mesh volume", "polite email replies", "resize png images",
              "parse yaml files", "plot a bar chart"]
    return [Skill(f"s{i}", f"skill {i}", topics[i % len(topics)], f"Use this to {topics[i % len(topics)]} ({i}).")
            for i in range(n)]


def test_a_rescan_during_an_update_is_not_undone(tmp_path, capsys):
    d = SkillIndex.build(_skills(6), HashEncoder(), IndexConfig(scan="exact")).save(tmp_path / "idx")
    results: dict[str, object] = {}

    def rescan() -> None:
        results["code"] = main(["rescan", "-i", str(d), "--scan", "int8"])

    worker = threading.Thread(target=rescan)

    def in_the_window(encoder):  # called after the update loaded the index, before it saves
        worker.start()
        worker.join(timeout=3.0)  # without the lock the rescan finishes here, inside the window
        results["finished_inside"] = not worker.is_alive()
        return encoder

    report = update_index(d, _skills(7), encoder=HashEncoder(), wrap_encoder=in_the_window)
    worker.join(timeout=120)
    assert not worker.is_alive() and results["code"] == 0
    assert report.added == ["s6"]
    assert results["finished_inside"] is False  # the rescan waited for the update
    manifest = json.loads((Path(d) / "manifest.json").read_text())
    assert manifest["scan"]["kind"] == "int8"  # the rescan holds: applied after the update, not undone
    loaded = SkillIndex.load(d, encoder=HashEncoder())
    assert len(loaded) == 7 and loaded.scan.kind == "int8"
