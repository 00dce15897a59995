"""Dense candidate scans (exact, int8, binary, ivf): same contract, saved and loaded, chosen from the CLI."""

from __future__ import annotations

import json
import random
import sys

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import IndexConfig, SkillIndex, models
from skillsight_fast.cli import main
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.scan import AUTO_INT8_FROM, AUTO_IVF_FROM, ivf_nlist, resolve_scan
from skillsight_fast.engine.update import update_index
from skillsight_fast.errors import IndexFormatError, SkillsightError
from skillsight_fast.library.skills import Skill

QUERIES = ["merge pdf pages", "docker compose deploy", "stl mesh volume", "git rebase conflicts", "csv clean"]


@pytest.fixture(scope="module")
def skills():
    return toy_skills(n_extra=400, seed=3)


@pytest.fixture(scope="module")
def exact(skills):
    return SkillIndex.build(skills, HashEncoder(), IndexConfig(scan="exact", candidates=500))


def _same_hits(a, b):
    """Same fused scores per rank (ties may order differently) and the same hits outside ties."""
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-5)
    for ra, rb, sa in zip(a.ids.tolist(), b.ids.tolist(), a.scores.tolist()):
        untied = [i for i, s in enumerate(sa) if sa.count(s) == 1]
        assert [ra[i] for i in untied] == [rb[i] for i in untied]


@pytest.mark.parametrize("kind, params", [("int8", {}), ("binary", {}), ("ivf", {"ivf_nlist": 8, "ivf_nprobe": 8})])
def test_scans_keep_the_result_contract(skills, exact, kind, params):
    # K = 500 > N: every scan must return the whole corpus, so the fusion sees the same candidates
    # (Eq. 15 standardises over the candidate set; a different tie at rank K would shift it)
    index = SkillIndex.build(skills, HashEncoder(), IndexConfig(scan=kind, candidates=500, **params))
    assert index.scan.kind == kind
    cand, dense = index.scan.candidates(np.ascontiguousarray(index.dense.embeddings_perp[:3]), 50)
    assert cand.dtype == np.int64 and dense.dtype == np.float32 and cand.shape == (3, 50)
    # scores are the exact inner products of the returned documents, best first
    expect = np.einsum("ij,ikj->ik", index.dense.embeddings_perp[:3], index.dense.embeddings_perp[cand])
    np.testing.assert_allclose(dense, expect, atol=1e-5)
    assert (np.diff(dense, axis=1) <= 1e-6).all()
    a, b = index.search(QUERIES, k=5), exact.search(QUERIES, k=5)
    _same_hits(a, b)  # visiting every IVF cell, and int8 with 4x survivors, find the exact hits
    assert a.evidence and a.skill_ids and np.isfinite(a.dense).all() and np.isfinite(a.lexical).all()


def test_ivf_visiting_few_cells_pads_and_stays_valid(skills):
    index = SkillIndex.build(skills, HashEncoder(), IndexConfig(scan="ivf", ivf_nlist=10, ivf_nprobe=1))
    cand, dense = index.scan.candidates(np.ascontiguousarray(index.dense.embeddings_perp[:4]), 300)
    assert cand.shape == (4, 300) and (cand < 0).any()  # one cell holds fewer than 300 documents
    assert np.isneginf(dense[cand < 0]).all() and np.isfinite(dense[cand >= 0]).all()
    res = index.search(QUERIES, k=5)
    assert res.ids.shape == (len(QUERIES), 5)
    assert all((s is None) == (i < 0) for row_s, row_i in zip(res.skill_ids, res.ids) for s, i in zip(row_s, row_i))


@pytest.mark.parametrize("kind", ["exact", "int8", "binary", "ivf"])
@pytest.mark.parametrize("mmap", [False, True])
def test_scans_save_and_load(skills, tmp_path, kind, mmap):
    index = SkillIndex.build(skills, HashEncoder(), IndexConfig(scan=kind, ivf_nlist=6, ivf_nprobe=3))
    before = index.search(QUERIES, k=5)
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    section = manifest["scan"]
    assert section["kind"] == kind
    for entry in [*section["arrays"].values(), *section["files"].values()]:
        assert len(entry["sha256"]) == 64
    loaded = SkillIndex.load(tmp_path / "idx", mmap=mmap, encoder=HashEncoder())
    assert loaded.scan.kind == kind and loaded.scan.params() == index.scan.params()
    after = loaded.search(QUERIES, k=5)
    np.testing.assert_array_equal(before.ids, after.ids)
    np.testing.assert_allclose(before.scores, after.scores, rtol=1e-6)
    assert before.evidence == after.evidence
    if mmap and kind in ("int8", "binary"):
        assert isinstance(loaded.scan.codes, np.memmap)
    if kind == "binary":
        assert isinstance(loaded.scan.bits, np.memmap) == mmap and loaded.scan.bits.dtype == np.uint64
        np.testing.assert_array_equal(loaded.scan.bits, index.scan.bits)


def test_binary_scan_equals_int8_when_it_reranks_everything_and_rescans_in_place(skills):
    """rerank ≥ N: the binary scan scores every row, so its answer is the int8 scan's exactly; a rescan
    from int8 to binary keeps the int8 arrays (same matrix) and adds only the bits."""
    int8 = SkillIndex.build(skills, HashEncoder(), IndexConfig(scan="int8"))
    codes = int8.scan.codes
    q = np.ascontiguousarray(int8.dense.embeddings_perp[:6] + 0.01)
    want = int8.scan.candidates(q, 40)
    int8.rebuild_scan("binary", rerank=len(int8))
    assert int8.scan.kind == "binary" and int8.scan.codes is codes and int8.scan.rerank_factor == len(int8)
    got = int8.scan.candidates(q, 40)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert int8.scan.describe()["scan_bytes"] == codes.nbytes + int8.scan.scales.nbytes + int8.scan.bits.nbytes


def test_corrupt_or_missing_scan_files_are_refused(skills, tmp_path):
    index = SkillIndex.build(skills, HashEncoder(), IndexConfig(scan="ivf", ivf_nlist=6))
    index.save(tmp_path / "idx")
    path = tmp_path / "idx" / "scan_ivf.faiss"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="checksum"):
        SkillIndex.load(tmp_path / "idx")
    path.write_bytes(b"not a faiss index")
    with pytest.raises(IndexFormatError, match="unreadable faiss"):
        SkillIndex.load(tmp_path / "idx", verify=False)
    path.unlink()
    with pytest.raises(IndexFormatError, match="missing"):
        SkillIndex.load(tmp_path / "idx", verify=False)


def test_a_manifest_needs_a_known_scan_section(exact, tmp_path):
    exact.save(tmp_path / "idx")
    mf = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(mf.read_text())
    del manifest["scan"]  # every version-2 index has one (v1 indexes are refused: rebuild)
    mf.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="'scan' must be a JSON object"):
        SkillIndex.load(tmp_path / "idx")
    manifest["scan"] = {"kind": "hnsw", "params": {}, "arrays": {}, "files": {}}
    mf.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="unknown scan"):
        SkillIndex.load(tmp_path / "idx")


def test_auto_picks_by_size_and_bad_names_are_refused():
    assert resolve_scan("auto", AUTO_INT8_FROM - 1) == "exact"
    assert resolve_scan("auto", AUTO_INT8_FROM) == "binary"
    assert resolve_scan("auto", AUTO_IVF_FROM) == "ivf"
    assert resolve_scan("ivf", 10) == "ivf"
    with pytest.raises(SkillsightError, match="unknown scan"):
        resolve_scan("hnsw", 10)
    with pytest.raises(ValueError, match="scan"):
        IndexConfig(scan="hnsw")
    assert ivf_nlist(1_000_000) == 4000 and ivf_nlist(100) == 2 and ivf_nlist(10) == 1


def test_ivf_without_faiss_names_the_extra(skills, monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss raises ImportError
    with pytest.raises(SkillsightError, match=r"the \[large\] extra"):
        SkillIndex.build(skills[:50], HashEncoder(), IndexConfig(scan="ivf"))


def test_cli_index_rescan_info(tmp_path, monkeypatch, capsys):
    from skill_files import write_skill

    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    root = tmp_path / "skills"
    for name, body in [("pdf", "pdf pages merge split"), ("mesh", "stl mesh volume"), ("csv", "csv columns")]:
        write_skill(root, name, name=name, description=f"{name} helper.", body=body)
    idx = tmp_path / "idx"
    assert main(["index", str(root), "-o", str(idx), "-q", "--scan", "int8"]) == 0
    assert main(["info", "-i", str(idx), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["scan"]["scan"] == "int8" and info["scan"]["oversample"] == 4 and info["scan"]["scan_bytes"] > 0
    assert main(["rescan", "-i", str(idx), "--scan", "ivf", "--nprobe", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scan"] == "ivf" and out["nprobe"] == 1  # clamped to the single cell of 3 skills
    for mmap in ([], ["-c", "mmap=true"]):
        assert main([*mmap, "search", "-i", str(idx), "merge pdf pages", "-k", "1", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["hits"][0]["id"] == "pdf"
    assert main(["info", "-i", str(idx)]) == 0
    assert "scan ivf, nlist=1, nprobe=1" in capsys.readouterr().out
    assert main(["rescan", "-i", str(idx), "--scan", "binary", "--rerank", "7", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scan"] == "binary" and out["rerank_factor"] == 7 and out["oversample"] == 4
    assert main(["-c", "mmap=true", "search", "-i", str(idx), "merge pdf pages", "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["id"] == "pdf"
    with pytest.raises(SystemExit):
        main(["rescan", "-i", str(idx), "--scan", "bogus"])


def test_update_keeps_the_scan_and_reuses_ivf_cells(tmp_path):
    old = toy_skills(n_extra=300, seed=5)
    index = SkillIndex.build(old, HashEncoder(), IndexConfig(scan="ivf", ivf_nlist=6, ivf_nprobe=6))
    index.save(tmp_path / "idx")
    centroids = index.scan.ivf.quantizer.reconstruct_n(0, 6)
    new = list(old)
    new[3] = Skill(id=new[3].id, name=new[3].name, description=new[3].description, body=new[3].body + " csv")
    enc = HashEncoder()
    report = update_index(tmp_path / "idx", new, encoder=enc)
    assert report.encoded == 1 and set(report.phases) == {"load", "compare", "encode", "rebuild", "save"}
    up = SkillIndex.load(tmp_path / "idx", encoder=HashEncoder())
    assert up.scan.kind == "ivf" and up.scan.trained_on == len(old)
    np.testing.assert_array_equal(up.scan.ivf.quantizer.reconstruct_n(0, 6), centroids)
    full = SkillIndex.build(new, HashEncoder(), IndexConfig(scan="ivf", ivf_nlist=6, ivf_nprobe=6))
    _same_hits(up.search(QUERIES, k=5), full.search(QUERIES, k=5))  # all cells visited: exact


def test_lexicon_reuse_rows_equals_a_full_build():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(200)] + ["ab", "zz_top", "a1"]

    def text():
        return " ".join(rng.choice(words) for _ in range(rng.randint(0, 25)))

    for _ in range(25):
        old_texts = [text() for _ in range(rng.randint(0, 30))]
        old = Lexicon.build(old_texts)
        rows, texts, fresh = [], [], []
        for _ in range(rng.randint(0, 40)):
            if old_texts and rng.random() < 0.7:
                r = rng.randrange(len(old_texts))
                rows.append(r)
                texts.append(old_texts[r])
            else:
                t = text()
                rows.append(-1)
                texts.append(t)
                fresh.append(t)
        a, b = old.reuse_rows(np.array(rows, np.int64), fresh), Lexicon.build(texts)
        assert a.vocab == b.vocab and a.term_ids == b.term_ids
        for name in ("doc_indptr", "doc_terms", "post_indptr", "post_docs", "doc_tf", "doc_len"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    with pytest.raises(ValueError, match="texts"):
        Lexicon.build(["a b"]).reuse_rows(np.array([-1, -1]), ["x"])


def test_default_nprobe_visits_every_cell_when_the_default_would_visit_most_of_them():
    from skillsight_fast.engine.scan import IVF_NPROBE, ivf_nlist, ivf_nprobe

    assert ivf_nprobe(1) == 1 and ivf_nprobe(88) == 88 and ivf_nprobe(2 * IVF_NPROBE - 1) == 2 * IVF_NPROBE - 1
    assert ivf_nprobe(2 * IVF_NPROBE) == IVF_NPROBE and ivf_nprobe(4000) == IVF_NPROBE
    # a library the size of the shared datasets is scanned whole; a large one visits 64 cells
    assert ivf_nprobe(ivf_nlist(3_646)) == ivf_nlist(3_646)
    assert ivf_nprobe(ivf_nlist(1_000_000)) == IVF_NPROBE


def test_update_keeps_the_binary_scan_with_codes_and_bits_of_the_new_matrix(tmp_path):
    from skillsight_fast.kernels.binary import pack_signs
    from skillsight_fast.kernels.compressed import quantize_int8

    old = toy_skills(n_extra=300, seed=6)
    index = SkillIndex.build(old, HashEncoder(), IndexConfig(scan="binary", binary_rerank=3))
    index.save(tmp_path / "idx")
    new = list(old)
    new[5] = Skill(id=new[5].id, name=new[5].name, description=new[5].description, body=new[5].body + " yaml")
    update_index(tmp_path / "idx", new, encoder=HashEncoder())
    up = SkillIndex.load(tmp_path / "idx", encoder=HashEncoder(), mmap=True)
    assert up.scan.kind == "binary" and up.scan.rerank_factor == 3
    perp = np.asarray(up.dense.embeddings_perp)
    np.testing.assert_array_equal(up.scan.bits, pack_signs(perp))
    codes, scales = quantize_int8(perp)
    np.testing.assert_array_equal(up.scan.codes, codes)
    np.testing.assert_array_equal(up.scan.scales, scales)
    full = SkillIndex.build(new, HashEncoder(), IndexConfig(scan="binary", binary_rerank=3))
    a, b = up.search(QUERIES, k=5), full.search(QUERIES, k=5)
    np.testing.assert_array_equal(a.ids, b.ids)


@pytest.mark.parametrize("params", [{"oversample": 4, "rerank_factor": 0}, {"oversample": 4, "rerank_factor": "x"},
                                    {"oversample": None, "rerank_factor": 8}])
def test_malformed_binary_scan_parameters_are_refused(skills, tmp_path, params):
    index = SkillIndex.build(skills, HashEncoder(), IndexConfig(scan="binary"))
    index.save(tmp_path / "idx")
    path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["scan"]["params"] = params
    path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="binary scan parameters"):
        SkillIndex.load(tmp_path / "idx", verify=False)
