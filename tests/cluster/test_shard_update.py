"""Updates of shard folders (skillsight_fast.cluster.update): while the background basis holds, only the
shards whose rows changed are rewritten, the others stay byte for byte, added rows fill the last shard
and then new ones, and the sharded index answers as the updated single index; past the rule the
statistics are recomputed and the answers are a fresh build's."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder
from test_cluster import QUERIES, ROOT
from test_shard_folders import _same

from skillsight_fast.cluster.index import ShardedIndex
from skillsight_fast.cluster.layout import read_folder, read_layout, split_index
from skillsight_fast.cluster.update import basis_drift, layout_order, update_layout
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.errors import IndexFormatError
from skillsight_fast.library.skills import Skill, load_skills


@pytest.fixture(scope="module")
def library():
    return load_skills([ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"]).skills  # 3292 real skills


@pytest.fixture
def sharded(library, tmp_path):
    """An index of 600 skills split into 3 shard folders of 200 rows."""
    index = SkillIndex.build(library[:600], HashEncoder(dim=48), IndexConfig(candidates=40))
    folder = index.save(tmp_path / "idx")
    split_index(folder, tmp_path / "L", 3)
    return folder, tmp_path / "L"


def _files(root: Path) -> dict[str, tuple[int, str]]:
    """Every file of the layout: (mtime, bytes' checksum)."""
    import hashlib

    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def _edited(library):
    """The library with one skill of shard 1 changed and one removed, and 150 skills added."""
    new = list(library[:600])
    s = new[250]
    new[250] = Skill(s.id, s.name, s.description, s.body + " now also converts spreadsheets to parquet")
    del new[300]
    return new + list(library[600:750])


def test_an_update_rewrites_only_the_shards_whose_rows_changed(sharded, library):
    folder, layout = sharded
    before = _files(layout)
    served = ShardedIndex.from_layout(folder, layout, remote=False)
    out = update_layout(folder, layout, _edited(library), encoder=HashEncoder(dim=48), max_drift=1.0)
    assert not out["recomputed"] and out["rewritten"] == [1, 3] and out["kept"] == [0, 2]
    assert out["appended"] == 1 and out["shared_changed"]
    plan = read_layout(layout)
    assert [(e["start"], e["stop"]) for e in plan["shards"]] == [(0, 200), (200, 399), (399, 599), (599, 749)]
    after = _files(layout)
    for name, stamp in before.items():  # shards 0 and 2: not rewritten, not even touched
        if name.startswith(("shard-000", "shard-002")):
            assert after[name] == stamp, name
    assert after["shard-001/manifest.json"] != before["shard-001/manifest.json"]
    # the updated single index holds the library in the layout's order, with the basis it had
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    assert single.ids == [s.id for s in layout_order([s.id for s in library[:600]], _edited(library))]
    np.testing.assert_array_equal(single.dense.basis, served.head.dense.basis)
    for e in plan["shards"]:  # every shard folder holds exactly the updated index's rows
        _, arrays = read_folder(layout / e["folder"])
        np.testing.assert_array_equal(arrays["perp"], single.dense.embeddings_perp[e["start"]:e["stop"]])
    # the served version moves to the update: only the rewritten and the new shard re-open their folders
    nxt = served.next_version(folder)
    assert nxt.reopened == [False, True, False, True] and len(nxt) == 749
    nxt.head.encoder = HashEncoder(dim=48)
    fresh = ShardedIndex.from_layout(folder, layout, remote=False)
    fresh.head.encoder = HashEncoder(dim=48)
    for k in (1, 10):
        want = single.search(QUERIES, k=k)
        _same(want, nxt.search(QUERIES, k=k))
        _same(want, fresh.search(QUERIES, k=k))
        _same(single.search(QUERIES, k=k, lexical_candidates=50),
              nxt.search(QUERIES, k=k, lexical_candidates=50))
    # a task naming a term only the added skills have finds them through the layout's new term ids
    new_terms = set(single.lexical.lexicon.vocab) - set(served.head.lexical.lexicon.vocab)
    assert new_terms and nxt._to_layout is not None
    task = [" ".join(sorted(new_terms)[:3])]
    _same(single.search(task, k=5), nxt.search(task, k=5))


def test_added_rows_fill_the_last_shard_before_a_new_one(sharded, library):
    folder, layout = sharded
    new = [s for i, s in enumerate(library[:600]) if i not in range(500, 540)] + list(library[600:630])
    out = update_layout(folder, layout, new, encoder=HashEncoder(dim=48), max_drift=1.0)
    assert out["rewritten"] == [2] and out["kept"] == [0, 1] and out["appended"] == 0
    plan = read_layout(layout)
    assert [(e["start"], e["stop"]) for e in plan["shards"]] == [(0, 200), (200, 400), (400, 590)]
    # nothing changed: no shard is rewritten
    before = _files(layout)
    again = update_layout(folder, layout, new, encoder=HashEncoder(dim=48), max_drift=1.0)
    assert again["rewritten"] == [] and _files(layout) == before


def test_past_the_rule_the_statistics_are_recomputed_as_a_fresh_build(sharded, library):
    folder, layout = sharded
    new = _edited(library)
    out = update_layout(folder, layout, new, encoder=HashEncoder(dim=48), max_drift=0.0)
    assert out["drift"] > 0 and out["recomputed"] and out["rewritten"] == [0, 1, 2]
    ordered = layout_order([s.id for s in library[:600]], new)
    rebuilt = SkillIndex.build(ordered, HashEncoder(dim=48), IndexConfig(candidates=40))
    served = ShardedIndex.from_layout(folder, layout, remote=False)
    served.head.encoder = HashEncoder(dim=48)
    np.testing.assert_array_equal(served.head.dense.basis, rebuilt.dense.basis)
    _same(rebuilt.search(QUERIES, k=10), served.search(QUERIES, k=10))


def test_basis_drift_is_the_sine_of_the_largest_principal_angle():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((16, 3)))
    b = q.T
    assert basis_drift(b, b) == pytest.approx(0.0, abs=1e-6)
    assert basis_drift(b, b[[2, 0, 1]]) == pytest.approx(0.0, abs=1e-6)  # the same span
    theta = 0.3
    tilted = b.copy()
    normal = np.linalg.qr(np.c_[b.T, rng.standard_normal(16)])[0][:, 3]  # orthogonal to the basis
    tilted[0] = np.cos(theta) * b[0] + np.sin(theta) * normal
    assert basis_drift(b, tilted) == pytest.approx(np.sin(theta), abs=1e-6)
    assert basis_drift(b, b[:2]) == 1.0 and basis_drift(b[:0], b) == 0.0


def test_a_layout_behind_the_index_is_refused_in_one_line(sharded, library, tmp_path):
    folder, layout = sharded
    from skillsight_fast.engine.update import update_index

    update_index(folder, library[:599], encoder=HashEncoder(dim=48))  # the index moved without its shards
    with pytest.raises(IndexFormatError, match="skillsight split") as err:
        update_layout(folder, layout, library[:598], encoder=HashEncoder(dim=48))
    assert "\n" not in str(err.value)


def test_cli_update_on_shard_folders(tmp_path, monkeypatch, capsys):
    import json

    from skill_files import write_skill

    from skillsight_fast import models
    from skillsight_fast.cli import main
    from skillsight_fast.cluster.layout import shards_folder

    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    lib = tmp_path / "lib"
    for i in range(12):
        write_skill(lib, f"s{i:02d}", name=f"s{i:02d}", description=f"Skill number {i} for files.",
                    body=f"tool {i} converts format{i} files")
    idx = tmp_path / "idx"
    assert main(["index", str(lib), "-o", str(idx), "-q"]) == 0
    assert main(["split", "-i", str(idx), "3"]) == 0
    capsys.readouterr()
    shutil.rmtree(lib / "s05")
    write_skill(lib, "s99", name="s99", description="A new skill for meshes.", body="stl mesh volume")
    assert main(["update", "-i", str(idx), str(lib), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["removed"] == ["s05"] and out["added"] == ["s99"] and "shards" in out
    assert 1 in out["shards"]["rewritten"] and 0 not in out["shards"]["rewritten"]
    assert out["shards"]["directions"] == "summed"  # the first update after a split: then kept
    write_skill(lib, "s98", name="s98", description="A new skill for point clouds.", body="ply point cloud")
    assert main(["update", "-i", str(idx), str(lib)]) == 0
    assert "token directions moved by the changed rows" in capsys.readouterr().out
    assert main(["update", "-i", str(idx), str(lib)]) == 0
    assert "shard folders: 0 rewritten" in capsys.readouterr().out
    assert read_layout(shards_folder(idx))["n_skills"] == 13


def test_an_update_of_ivf_shard_folders_keeps_the_cells_and_the_other_folders(library, tmp_path):
    pytest.importorskip("faiss")
    index = SkillIndex.build(library[:600], HashEncoder(dim=48), IndexConfig(candidates=40))
    index.rebuild_scan("ivf", nlist=20, nprobe=5)
    folder = index.save(tmp_path / "idx")
    split_index(folder, tmp_path / "L", 3)
    before = _files(tmp_path / "L")
    new = list(library[:600])
    s = new[250]
    new[250] = Skill(s.id, s.name, s.description, s.body + " now also converts spreadsheets to parquet")
    out = update_layout(folder, tmp_path / "L", new, encoder=HashEncoder(dim=48), max_drift=1.0)
    assert out["rewritten"] == [1] and out["kept"] == [0, 2]  # the cells were kept: one shard rewritten
    after = _files(tmp_path / "L")
    assert all(after[n] == t for n, t in before.items() if n.startswith(("shard-000", "shard-002")))
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    assert single.scan.kind == "ivf"
    served = ShardedIndex.from_layout(folder, tmp_path / "L", remote=False)
    served.head.encoder = HashEncoder(dim=48)
    _same(single.search(QUERIES, k=10), served.search(QUERIES, k=10))


def test_a_watched_update_of_served_shard_folders_rewrites_only_the_changed_one(sharded, library, tmp_path):
    """`serve --ray --watch` on shard folders: the watcher runs the shard-folder update, so a change to one
    skill rewrites and re-opens only its shard (the basis holds: drift within the rule), the other
    folders stay byte for byte, and the service answers as the single updated index."""
    import json

    from skillsight_fast.agents.service import SkillService
    from skillsight_fast.agents.watch import LiveIndexWatcher

    folder, layout = sharded

    def write(skills):
        src.write_text("".join(json.dumps({"id": s.id, "name": s.name, "description": s.description,
                                           "body": s.body}) + "\n" for s in skills), encoding="utf-8")

    src = tmp_path / "library.jsonl"
    write(library[:600])
    served = ShardedIndex.from_layout(folder, layout, remote=False)
    served.head.encoder = HashEncoder(dim=48)
    service = SkillService(folder, index=served)
    watcher = LiveIndexWatcher(service, [src], rule=lambda d: None)
    watcher._encoder = HashEncoder(dim=48)
    assert watcher.refresh() is None
    before = _files(layout)
    edited = list(library[:600])
    s = edited[250]
    edited[250] = Skill(s.id, s.name, s.description, s.body + " now also converts spreadsheets to parquet")
    write(edited)
    report = watcher.refresh()
    assert report is not None and report.changed == [s.id]
    shards = watcher.last_shards
    assert shards is not None and not shards["recomputed"] and shards["drift"] <= shards["max_drift"]
    assert shards["rewritten"] == [1] and shards["kept"] == [0, 2]
    live = service.live().index
    assert live.reopened == [False, True, False]
    after = _files(layout)
    for name, stamp in before.items():
        if name.startswith(("shard-000", "shard-002")):
            assert after[name] == stamp, name
    assert after["shard-001/manifest.json"] != before["shard-001/manifest.json"]
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    for k in (1, 10):
        _same(single.search(QUERIES, k=k), live.search(QUERIES, k=k))
