"""Shard folders (skillsight_fast.cluster.layout): each shard's rows in its own folder plus a shared part;
hosts that open only their folder answer as the single index; a folder failing its checksum is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder
from test_cluster import CORPUS, QUERIES

from skillsight_fast.agents.find import find_skills
from skillsight_fast.cluster.index import ShardedIndex, shard_ranges
from skillsight_fast.cluster.layout import read_folder, read_layout, split_index
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.errors import IndexFormatError
from skillsight_fast.library.skills import load_skills


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """Per scan: (index folder, layout folder with 3 shards)."""
    root = tmp_path_factory.mktemp("layout")
    index = SkillIndex.build(load_skills([CORPUS]).skills[:600], HashEncoder(dim=48),
                             IndexConfig(candidates=40))
    out = {}
    for scan in ("exact", "int8"):
        index.rebuild_scan(scan)
        folder = index.save(root / scan)
        split_index(folder, root / f"{scan}-shards", 3)
        out[scan] = (folder, root / f"{scan}-shards")
    return out


def _same(a, b):
    """The same hits in the same order; scores equal up to float32 rounding (the single index and the
    shards sum the same products in a different order)."""
    assert a.skill_ids == b.skill_ids
    np.testing.assert_array_equal(a.ids, b.ids)
    for name in ("scores", "dense", "lexical", "cosine"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-6, err_msg=name)
    assert a.evidence == b.evidence


def test_shard_folders_hold_disjoint_rows_covering_the_index(split):
    folder, layout = split["int8"]
    plan = read_layout(layout)
    single = SkillIndex.load(folder, mmap=True)
    assert [(e["start"], e["stop"]) for e in plan["shards"]] == shard_ranges(len(single), 3)
    rows = []
    for e in plan["shards"]:
        _, arrays = read_folder(layout / e["folder"])
        n = e["stop"] - e["start"]
        assert arrays["perp"].shape[0] == arrays["raw"].shape[0] == arrays["codes"].shape[0] == n
        np.testing.assert_array_equal(arrays["perp"], single.dense.embeddings_perp[e["start"]:e["stop"]])
        docs = np.asarray(arrays["post_docs"])
        assert docs.size == 0 or (docs.min() >= 0 and docs.max() < n)  # only its own rows (local ids)
        rows.append(set(range(e["start"], e["stop"])))
    assert set.union(*rows) == set(range(len(single))) and sum(map(len, rows)) == len(single)
    # a shard folder holds about its share of the rows' bytes, the shared part only per-term arrays
    sizes = [sum(p.stat().st_size for p in (layout / e["folder"]).iterdir()) for e in plan["shards"]]
    whole = sum(p.stat().st_size for p in Path(folder).iterdir() if p.suffix == ".npy")
    assert max(sizes) < 0.6 * whole


@pytest.mark.parametrize("scan", ["exact", "int8"])
def test_hosts_on_their_own_folders_answer_as_the_single_index(split, scan):
    folder, layout = split[scan]
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    sharded = ShardedIndex.from_layout(folder, layout, remote=False)
    sharded.head.encoder = HashEncoder(dim=48)
    assert all(h.engines[0].directory.startswith(str(layout)) for h in sharded.shards)
    for k in (1, 5, 12):
        _same(single.search(QUERIES, k=k), sharded.search(QUERIES, k=k))
    for lc in (10, 1000):  # the LEC coverage candidates read each shard's own postings
        _same(single.search(QUERIES, k=8, lexical_candidates=lc),
              sharded.search(QUERIES, k=8, lexical_candidates=lc))
    for x, y in zip(find_skills(single, QUERIES, 5), find_skills(sharded, QUERIES, 5), strict=True):
        assert [h.id for h in x.hits] == [h.id for h in y.hits] and x.abstained == y.abstained


def test_a_folder_failing_its_checksum_is_refused_in_one_line(split, tmp_path):
    import shutil

    folder, layout = split["exact"]
    bad = tmp_path / "bad"
    shutil.copytree(layout, bad)
    path = bad / "shard-001" / "perp.npy"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # one byte of one row
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="checksum mismatch") as err:
        ShardedIndex.from_layout(folder, bad, remote=False)
    assert "\n" not in str(err.value) and "shard-001" in str(err.value)
    (bad / "shared" / "manifest.json").unlink()
    with pytest.raises(IndexFormatError, match="not a shard folder"):
        read_folder(bad / "shared")


def test_a_layout_of_another_index_is_refused(split):
    folder, _ = split["exact"]
    _, other = split["int8"]
    small = SkillIndex.load(folder, mmap=True)
    assert read_layout(other)["n_skills"] == len(small)  # same rows: accepted; a different count is refused
    with pytest.raises(IndexFormatError, match="no shard layout"):
        read_layout(folder)


def single_id(folder):
    return SkillIndex.load(folder, mmap=True).ids[0]


def test_cli_split_writes_the_folders_serve_ray_opens(split, tmp_path, capsys):
    import json
    import shutil

    from skillsight_fast.cli import main
    from skillsight_fast.cluster.layout import shards_folder

    folder = tmp_path / "idx"
    shutil.copytree(split["int8"][0], folder)
    assert main(["info", "-i", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shards"] is None
    assert main(["split", "-i", str(folder), "2"]) == 0
    assert "2 shard folders" in capsys.readouterr().out
    assert main(["info", "-i", str(folder), "--json"]) == 0  # info names them, of this index
    said = json.loads(capsys.readouterr().out)["shards"]
    assert said == {"folder": str(tmp_path / "idx.shards"), "shards": 2, "scan": "int8", "current": True}
    assert main(["pin", "-i", str(folder), single_id(folder)]) == 0  # the index moves on, the folders not
    capsys.readouterr()
    assert main(["info", "-i", str(folder)]) == 0
    assert "shard folders: 2 in" in (out := capsys.readouterr().out) and "behind this index" in out
    assert main(["split", "-i", str(folder), "2"]) == 0
    capsys.readouterr()
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))  # the index still loads, folders and all
    assert shards_folder(folder) == tmp_path / "idx.shards"
    sharded = ShardedIndex.from_layout(folder, shards_folder(folder), remote=False)
    sharded.head.encoder = HashEncoder(dim=48)
    _same(single.search(QUERIES, k=6), sharded.search(QUERIES, k=6))
    assert main(["split", "-i", str(tmp_path / "missing"), "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err


def test_an_update_holding_the_statistics_rewrites_only_the_changed_shard(split, tmp_path):
    """Rows of shard 1 re-encoded (their vectors moved) while the library-wide statistics hold (the same
    lexicon, basis and decisions): only shard 1's folder is rewritten and re-opened, the others' files are
    untouched, and the sharded index answers as the updated single index."""
    import shutil

    from skillsight_fast.cluster.layout import refresh_layout

    folder, _ = split["exact"]
    work = tmp_path / "idx"
    shutil.copytree(folder, work)
    split_index(work, tmp_path / "L", 3)
    sharded = ShardedIndex.from_layout(work, tmp_path / "L", remote=False)
    sharded.head.encoder = HashEncoder(dim=48)
    old = SkillIndex.load(work)
    a, b = read_layout(tmp_path / "L")["shards"][1]["start"], read_layout(tmp_path / "L")["shards"][1]["stop"]
    emb = np.array(old.dense.embeddings, np.float32)
    rng = np.random.default_rng(0)
    emb[a:b] += 0.05 * rng.standard_normal((b - a, emb.shape[1])).astype(np.float32)
    emb[a:b] /= np.linalg.norm(emb[a:b], axis=1, keepdims=True)
    new = SkillIndex.from_embeddings(old.skills, emb, old.config, model_id=old.state.model.id,
                                     model_checksum=old.state.model.checksum, lexicon=old.lexical.lexicon,
                                     basis=(old.dense.basis, old.dense.singular_values),
                                     decisions=old.decisions,
                                     namedesc=np.array(old.dense.namedesc, np.float32))
    new.state.bodies = old.state.bodies
    new.save(work)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "L").rglob("*.npy")}
    assert refresh_layout(work, tmp_path / "L") == ([1], False)  # nothing left to rewrite: idempotent
    # reset the folders to the old index and let next_version do it
    split_index(folder, tmp_path / "L", 3)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "L").rglob("*.npy")}
    nxt = sharded.next_version(work)
    assert nxt.reopened == [False, True, False]
    for p, t in mtimes.items():
        assert (p.stat().st_mtime_ns == t) == ("shard-001" not in str(p)), p
    updated = SkillIndex.load(work, encoder=HashEncoder(dim=48))
    _same(updated.search(QUERIES, k=6), nxt.search(QUERIES, k=6))


def test_shard_folders_carry_the_binary_scan_and_answer_as_the_single_index(tmp_path):
    """Each folder holds its rows' sign bits and int8 codes; the coordinator sums the shards' Hamming
    histograms into the library's, so every shard keeps the rows the single index's prefilter keeps."""
    from test_cluster import ROOT

    skills = load_skills([ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"]).skills[:1500]
    index = SkillIndex.build(skills, HashEncoder(dim=48), IndexConfig(candidates=40))
    index.rebuild_scan("binary", rerank=2)  # max(2 × 40, 4 × 40 int8 survivors) < 1,500: the prefilter cuts
    folder = index.save(tmp_path / "idx")
    split_index(folder, tmp_path / "L", 3)
    _, arrays = read_folder(tmp_path / "L" / "shard-001")
    np.testing.assert_array_equal(arrays["bits"], index.scan.bits[500:1000])
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    assert single.scan.kind == "binary"
    sharded = ShardedIndex.from_layout(folder, tmp_path / "L", remote=False)
    sharded.head.encoder = HashEncoder(dim=48)
    for k in (1, 5, 12):
        _same(single.search(QUERIES, k=k), sharded.search(QUERIES, k=k))
    _same(single.search(QUERIES, k=8, lexical_candidates=20),
          sharded.search(QUERIES, k=8, lexical_candidates=20))


def test_a_binary_shard_reads_its_sign_bits_once_per_search(tmp_path, monkeypatch):
    """The filter round uses the distances the histogram round computed (one Hamming pass per search),
    and answers as a shard that computes them afresh; the kept distances are bounded."""
    from test_cluster import ROOT

    from skillsight_fast.cluster.shard import DISTANCES_KEPT, ShardEngine
    from skillsight_fast.kernels import binary

    skills = load_skills([ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"]).skills[:600]
    index = SkillIndex.build(skills, HashEncoder(dim=48), IndexConfig(candidates=40))
    index.rebuild_scan("binary", rerank=2)
    folder = index.save(tmp_path / "idx")
    split_index(folder, tmp_path / "L", 2)
    engine = ShardEngine.from_folder(tmp_path / "L" / "shard-001", tmp_path / "L" / "shared", 300)
    fresh = ShardEngine.from_folder(tmp_path / "L" / "shard-001", tmp_path / "L" / "shared", 300)
    calls = []
    real = binary.hamming
    monkeypatch.setattr(binary, "hamming", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(0)
    for _ in range(DISTANCES_KEPT + 3):
        q = rng.standard_normal(48).astype(np.float32)
        hist = engine.hamming_counts(q)
        thr = int(np.searchsorted(np.cumsum(hist), 60))  # the distance that keeps about 60 rows
        n = len(calls)
        got = engine.binary_top(q, thr, 25)
        assert len(calls) == n  # no second pass over the bits
        want = fresh.binary_top(q, thr, 25)  # computed afresh (nothing kept for this query)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert len(engine._kept_distances) == DISTANCES_KEPT


def test_shard_folders_carry_the_ivf_cells_and_answer_as_the_single_index(tmp_path):
    """Each folder holds its rows grouped by the library's IVF cell; the coordinator picks the probed
    cells with the library's centroids, every shard scores its rows in them, and the answers are the
    single index's IVF answers (faiss scores the same rows; the shards' float32 loop agrees within
    float32 rounding)."""
    pytest.importorskip("faiss")
    from test_cluster import ROOT

    skills = load_skills([ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"]).skills[:1500]
    index = SkillIndex.build(skills, HashEncoder(dim=48), IndexConfig(candidates=40))
    index.rebuild_scan("ivf", nlist=40, nprobe=4)  # a tenth of the cells: rows outside them are not scored
    folder = index.save(tmp_path / "idx")
    split_index(folder, tmp_path / "L", 3)
    _, arrays = read_folder(tmp_path / "L" / "shard-002")
    assert int(arrays["cell_indptr"][-1]) == 500
    assert sorted(np.asarray(arrays["cell_rows"]).tolist()) == list(range(500))
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    assert single.scan.kind == "ivf"
    sharded = ShardedIndex.from_layout(folder, tmp_path / "L", remote=False)
    sharded.head.encoder = HashEncoder(dim=48)
    exact = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    exact.rebuild_scan("exact")
    probed_only = single.search(QUERIES, k=12).skill_ids
    assert probed_only != exact.search(QUERIES, k=12).skill_ids  # the probe leaves rows out
    for k in (1, 5, 12):
        _same(single.search(QUERIES, k=k), sharded.search(QUERIES, k=k))
