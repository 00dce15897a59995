"""Issue 41: values a loaded index must refuse, each with a one-line IndexFormatError naming the
folder and the array or key (every case loaded fine, searched wrongly or crashed before):

- M2: NaN, infinite or zero scales of the int8 / binary scan (checksums recomputed) made every
  search return no hits while full verification passed;
- L1: ``Infinity`` as a scan parameter (``oversample``, ``rerank_factor``) gave an OverflowError;
- L2: ``verify=True`` skipped the UTF-8 check of the stored texts that the lazy verification runs;
- L3: the background verification's error named ``/proc/self/fd/N``, not the index folder;
- L4: NaN or unsorted query tables were refused with a message about their shape;
- L5: a negative ``idf`` was accepted;
- L6: the manifest's ``query_model`` could name any folder outside the index.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.errors import IndexFormatError
from skillsight_fast.library.skills import load_skills

SKILLS = [("pdf", "Merge and split PDF files.", "Use pypdf to merge pages of pdf documents."),
          ("email", "Draft polite emails.", "Write email replies with a friendly tone."),
          ("mesh", "Compute STL mesh volume.", "Load an stl mesh and compute its volume."),
          ("csv", "Clean CSV tables.", "Use pandas to clean csv columns and rows.")]


def _build(tmp_path: Path, **config) -> Path:
    root = tmp_path / "lib"
    for name, desc, body in SKILLS:
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n{body}\n")
    report = load_skills([root])
    index = SkillIndex.build(report.skills, HashEncoder(), IndexConfig(**config) if config else None)
    index.state.roots = report.roots
    return index.save(tmp_path / "idx")


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _write_manifest(d: Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m))  # allow_nan: Infinity is what the manifest reader takes


def _rewrite(d: Path, name: str, arr: np.ndarray, *, section: str = "arrays", bundle: str | None = None) -> None:
    """Replace (or add) one array with its checksum recomputed: a 'valid' damaged index."""
    np.save(d / f"{name}.npy", arr, allow_pickle=False)
    m = _manifest(d)
    entries = m["scan"]["arrays"] if section == "scan" else m["arrays"]
    entry = entries.setdefault(name, {"file": f"{name}.npy", "dtype": str(arr.dtype),
                                      **({"bundle": bundle} if bundle else {})})
    entry["sha256"] = hashlib.sha256((d / f"{name}.npy").read_bytes()).hexdigest()
    entry["shape"] = list(arr.shape)
    _write_manifest(d, m)


def _load(d: Path, verify=True) -> SkillIndex:
    return SkillIndex.load(d, encoder=HashEncoder(), verify=verify)


@pytest.mark.parametrize("scan", ["int8", "binary"])
@pytest.mark.parametrize("value", [np.nan, np.inf, 0.0, -1.0])
def test_scan_scales_must_be_finite_and_positive(tmp_path, scan, value):
    d = _build(tmp_path, scan=scan)
    scales = np.load(d / "scan_int8_scales.npy")
    assert _load(d).search(["merge pdf pages"], k=2).ids[0, 0] >= 0  # the intact index answers
    scales[1] = value
    _rewrite(d, "scan_int8_scales", scales, section="scan")
    for verify in (True, "background"):
        with pytest.raises(IndexFormatError, match=r"scan_int8_scales") as err:
            _load(d, verify)
        assert str(d) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("scan", "key"), [("int8", "oversample"), ("binary", "oversample"),
                                           ("binary", "rerank_factor")])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 2.5, True, 0, 10**30])
def test_scan_parameters_must_be_sane_integers(tmp_path, scan, key, value):
    d = _build(tmp_path, scan=scan)
    m = _manifest(d)
    m["scan"]["params"][key] = value
    _write_manifest(d, m)
    with pytest.raises(IndexFormatError, match=key) as err:
        _load(d, verify=False)
    assert str(d) in str(err.value)


def test_negative_idf_is_refused(tmp_path):
    d = _build(tmp_path)
    idf = np.load(d / "idf.npy")
    idf[0] = -1.0
    _rewrite(d, "idf", idf)
    with pytest.raises(IndexFormatError, match=r"array idf: negative value at 0"):
        _load(d)


@pytest.mark.parametrize("damage", ["nan", "unsorted", "negative"])
def test_query_tables_refused_for_their_values_not_their_shape(tmp_path, damage):
    d = _build(tmp_path)
    dim = _manifest(d)["stats"]["dim"]
    ids = np.array([3, 5, 9], np.int32)
    table = np.ones((3, dim), np.float32)
    if damage == "nan":
        table[1, 2] = np.nan
    elif damage == "unsorted":
        ids = np.array([3, 9, 5], np.int32)
    else:
        ids = np.array([-1, 5, 9], np.int32)
    _rewrite(d, "query_table_ids", ids, bundle="dense")
    _rewrite(d, "query_table", table, bundle="dense")
    want = {"nan": r"array query_table: NaN or infinity \(row 1\)",
            "unsorted": r"array query_table_ids: .*not strictly increasing at 2",
            "negative": r"array query_table_ids: .*negative"}[damage]
    with pytest.raises(IndexFormatError, match=want):
        _load(d)


def test_nan_query_map_is_refused_for_its_values(tmp_path):
    d = _build(tmp_path)
    dim = _manifest(d)["stats"]["dim"]
    qmap = np.zeros((5, dim), np.float32)
    qmap[2, 0] = np.nan
    _rewrite(d, "query_map", qmap, bundle="dense")
    with pytest.raises(IndexFormatError, match=r"array query_map: NaN or infinity \(row 2\)"):
        _load(d)


@pytest.mark.parametrize("where", ["/etc", "../../..", "static_model/../../x", ".hidden", "/tmp/../etc"])
def test_query_model_cannot_name_a_folder_outside_the_index(tmp_path, where):
    d = _build(tmp_path)
    m = _manifest(d)
    m["config"]["query_model"] = where
    _write_manifest(d, m)
    with pytest.raises(IndexFormatError, match="query_model"):
        _load(d, verify=False)


def test_verify_true_checks_the_utf8_of_the_stored_texts(tmp_path):
    d = _build(tmp_path)
    m = _manifest(d)
    assert "texts" in m["strings"]
    blob = np.load(d / "text_strings.npy")
    blob[1] = 0xFF  # inside the first body: not UTF-8
    np.save(d / "text_strings.npy", blob, allow_pickle=False)
    m["strings"]["texts"]["blob"]["sha256"] = hashlib.sha256((d / "text_strings.npy").read_bytes()).hexdigest()
    _write_manifest(d, m)
    lazy = _load(d, verify="lazy")
    assert lazy.state.verification.wait() == "failed"  # what the lazy verification already found
    with pytest.raises(IndexFormatError, match="UTF-8"):
        _load(d, verify=True)


def test_background_verification_names_the_index_folder(tmp_path):
    d = _build(tmp_path)
    emb = np.load(d / "embeddings.npy")
    emb[0, 0] += 1.0
    np.save(d / "embeddings.npy", emb, allow_pickle=False)  # checksum left stale: corrupt
    index = _load(d, verify="lazy")
    assert index.state.verification.wait() == "failed"
    with pytest.raises(IndexFormatError) as err:
        index.state.verification.check()
    assert str(err.value).startswith(f"{d}:") and "/proc/" not in str(err.value)
