"""Format 3 (string columns), the saved format-2 index, deferred verification and the validation kernels."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.agents.find import find_skills
from skillsight_fast.agents.service import SkillService
from skillsight_fast.engine import validate
from skillsight_fast.engine.columns import SkillTable, StringColumn, name_groups, name_key, rows_by_id
from skillsight_fast.engine.state import SkillMeta
from skillsight_fast.errors import IndexFormatError
from skillsight_fast.kernels import validation as kv

DATA = Path(__file__).resolve().parents[1] / "data"


def _skills():
    skills = toy_skills(12)
    skills[0] = dataclasses.replace(skills[0], tags=("docs", "pdf"), when_to_use="When a PDF is involved.",
                                    description="Helps with pdf tasks — «unicode» ✓.")
    skills[1] = dataclasses.replace(skills[1], name="PDF Tools")  # same name_key as skills[0]
    return skills


@pytest.fixture(scope="module")
def built():
    return SkillIndex.build(_skills(), HashEncoder(), IndexConfig(document_vector="text"))


@pytest.fixture()
def saved(built, tmp_path):
    built.save(tmp_path / "idx")
    return tmp_path / "idx"


def _rehash(folder: Path, file: str) -> None:
    """Rewrite the manifest's sha256 of ``file`` (a deliberate change the content checks must catch)."""
    m = json.loads((folder / "manifest.json").read_text())
    digest = hashlib.sha256((folder / file).read_bytes()).hexdigest()
    for section in (m["arrays"], *m["strings"].values(), m["scan"].get("arrays") or {}):
        for entry in section.values():
            if entry["file"] == file:
                entry["sha256"] = digest
    (folder / "manifest.json").write_text(json.dumps(m))


# ---------------------------------------------------------------------- format 2 still loads
@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("verify", [True, False, "lazy", "background"])
def test_saved_format2_index_loads_and_answers_as_saved(mmap, verify):
    expected = json.loads((DATA / "index_v2_expected.json").read_text())
    assert json.loads((DATA / "index_v2" / "manifest.json").read_text())["format_version"] == 2
    index = SkillIndex.load(DATA / "index_v2", mmap=mmap, verify=verify, encoder=HashEncoder())
    res = index.search(expected["queries"], k=5)
    assert res.skill_ids == expected["skill_ids"] and res.evidence == expected["evidence"]
    np.testing.assert_allclose(res.scores, np.asarray(expected["scores"], np.float32), rtol=1e-6)
    assert index.skills[0].tags == ("docs", "pdf") and "«unicode»" in index.skills[0].description
    if index.state.verification is not None:
        assert index.state.verification.wait(60) == "ok"


def test_format2_index_resaved_as_format3_answers_the_same(tmp_path):
    index = SkillIndex.load(DATA / "index_v2", encoder=HashEncoder())
    index.save(tmp_path / "v3")
    again = SkillIndex.load(tmp_path / "v3", mmap=True, verify="lazy", encoder=HashEncoder())
    assert json.loads((tmp_path / "v3" / "manifest.json").read_text())["format_version"] == 3
    q = ["compute the volume of an stl mesh", "merge pdf pages"]
    a, b = index.search(q, k=5), again.search(q, k=5)
    assert a.skill_ids == b.skill_ids and a.evidence == b.evidence
    np.testing.assert_array_equal(a.scores, b.scores)
    assert list(again.skills) == list(index.skills)
    assert again.state.verification.wait(60) == "ok"


# ---------------------------------------------------------------------- format 3 round trip
@pytest.mark.parametrize("mmap", [False, True])
def test_format3_round_trip_of_records_vocabulary_bodies(built, saved, mmap):
    loaded = SkillIndex.load(saved, mmap=mmap, encoder=HashEncoder())
    assert isinstance(loaded.skills, SkillTable) and isinstance(loaded.lexical.lexicon.vocab, StringColumn)
    assert list(loaded.skills) == list(built.skills) and loaded.skills == built.skills
    assert list(loaded.lexical.lexicon.vocab) == list(built.lexical.lexicon.vocab)
    assert loaded.state.stored_texts is not None and list(loaded.state.stored_texts) == list(built.state.bodies)
    rows = rows_by_id(loaded.skills)
    for j, meta in enumerate(built.skills):
        assert rows[meta.id] == j and loaded.skills.row_of(meta.id) == j
    assert "no-such-skill" not in rows and loaded.skills.row_of("no-such-skill") == -1
    for term, i in built.lexical.lexicon.term_ids.items():
        assert loaded.lexical.lexicon.term_ids[term] == i
    assert loaded.lexical.lexicon.term_ids.get("zzz-not-a-term") is None
    # the stored name groups are the ones find.py computed from the names
    for j, meta in enumerate(built.skills):
        same = [i for i, m in enumerate(built.skills) if name_key(m.name) == name_key(meta.name)]
        assert loaded.skills.same_name(j) == (same if len(same) > 1 else [])
    q = ["merge pdf pages", "docker compose deploy"]
    a, b = built.search(q, k=6), loaded.search(q, k=6)
    assert a.skill_ids == b.skill_ids and a.evidence == b.evidence
    fa = find_skills(built, q, 3)
    fb = find_skills(loaded, q, 3)
    assert [x.to_dict() for x in fa] == [x.to_dict() for x in fb]
    assert fb[0].hits[0].copies  # the two pdf skills collapse through the stored groups


def test_name_groups_match_a_dictionary():
    names = ["PDF Tools", "pdf-tools", "x", "", "pdf_tools", "y", "X"]
    group_of, ptr, rows = name_groups(names)
    by_key: dict[str, list[int]] = {}
    for j, n in enumerate(names):
        by_key.setdefault(name_key(n), []).append(j)
    for j, n in enumerate(names):
        want = by_key[name_key(n)] if name_key(n) and len(by_key[name_key(n)]) > 1 else []
        got = [] if group_of[j] < 0 else rows[ptr[group_of[j]]: ptr[group_of[j] + 1]].tolist()
        assert got == want


def test_string_column_bisect_and_bad_utf8():
    col = StringColumn.of(["a", "b", "é", "ü", "中"])
    assert [col.bisect(s) for s in ["a", "é", "中", "zz", ""]] == [0, 2, 4, -1, -1]
    bad = StringColumn(np.frombuffer(b"ok\xff", np.uint8).copy(), np.array([0, 2, 3]), name="t")
    assert bad[0] == "ok"
    with pytest.raises(IndexFormatError, match="not valid UTF-8"):
        bad[1]
    with pytest.raises(IndexFormatError, match="not valid UTF-8"):
        bad.decode_all()


# ---------------------------------------------------------------------- damaged format-3 columns
def _decreasing_offsets(d: Path) -> None:
    off = np.load(d / "skill_offsets.npy")
    off[5], off[6] = off[6], off[5] - 1
    np.save(d / "skill_offsets.npy", off)
    _rehash(d, "skill_offsets.npy")


def _duplicate_id(d: Path) -> None:
    order = np.load(d / "skill_id_order.npy")
    order[1] = order[0]
    np.save(d / "skill_id_order.npy", order)
    _rehash(d, "skill_id_order.npy")


def _unsorted_vocab(d: Path) -> None:
    blob = np.load(d / "vocab_strings.npy")
    off = np.load(d / "vocab_offsets.npy")
    a, b = off[0], off[1]
    blob[a:b] = ord("z")  # the first term becomes "zz...", greater than the second
    np.save(d / "vocab_strings.npy", blob)
    _rehash(d, "vocab_strings.npy")


def _post_docs_out_of_range(d: Path) -> None:
    post = np.load(d / "post_docs.npy")
    post[3] = 10_000
    np.save(d / "post_docs.npy", post)
    _rehash(d, "post_docs.npy")


def _nan_embedding(d: Path) -> None:
    emb = np.load(d / "embeddings.npy")
    emb[4, 2] = np.nan
    np.save(d / "embeddings.npy", emb)
    _rehash(d, "embeddings.npy")


# name -> (damage, message, raised by a lazy load already (True) or only by its deferred checks); none of
# these is read by a kernel before its check, so every one is deferred (docs/GUARANTEES.md §8)
DAMAGE = {
    "decreasing skill offsets": (_decreasing_offsets, "skill_strings_offsets", False),
    "duplicate skill id": (_duplicate_id, "ids not distinct", False),
    "unsorted vocabulary": (_unsorted_vocab, "not sorted and distinct", False),
    "post_docs out of range": (_post_docs_out_of_range, "post_docs", False),
    "NaN embedding": (_nan_embedding, "NaN or infinity", False),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_columns_are_caught_now_or_by_the_deferred_checks(saved, case):
    """A True load refuses each; a lazy load answers, and its deferred checks find the damage."""
    damage, message, at_load = DAMAGE[case]
    damage(saved)
    for mmap in (False, True):
        with pytest.raises(IndexFormatError, match=message):
            SkillIndex.load(saved, mmap=mmap)  # verify=True: everything before the first answer
    if at_load:
        with pytest.raises(IndexFormatError, match=message):
            SkillIndex.load(saved, mmap=True, verify="lazy")
        return
    lazy = SkillIndex.load(saved, mmap=True, verify="lazy")
    assert lazy.state.verification.wait() == "failed" and message in lazy.state.verification.error
    with pytest.raises(IndexFormatError, match="failed its verification"):
        lazy.state.verification.check()


def test_postings_are_checked_before_a_search_reads_them(saved):
    _post_docs_out_of_range(saved)
    index = SkillIndex.load(saved, mmap=True, verify="lazy", encoder=HashEncoder())
    index.search("merge pdf pages", k=3)  # the default search reads no postings
    with pytest.raises(IndexFormatError, match="post_docs"):
        index.search("merge pdf pages", k=3, lexical_candidates=20)


def test_background_verification_stops_a_server_from_answering(saved):
    raw = bytearray((saved / "embeddings_perp.npy").read_bytes())
    raw[-1] ^= 0x01  # a flipped bit: only the checksum sees it
    (saved / "embeddings_perp.npy").write_bytes(bytes(raw))
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        SkillIndex.load(saved)
    service = SkillService(saved, index=SkillIndex.load(saved, mmap=True, verify="background",
                                                        encoder=HashEncoder()))
    assert service.index.state.verification.wait(60) == "failed"
    assert service.health()["status"] == "failed"
    assert "embeddings_perp.npy: checksum mismatch" in service.health()["verification"]["error"]
    with pytest.raises(IndexFormatError, match="failed its verification"):
        service.find("merge pdf pages", 3)


def test_a_clean_background_verification_passes(saved):
    index = SkillIndex.load(saved, mmap=True, verify="background", encoder=HashEncoder())
    assert index.state.verification.wait(60) == "ok" and index.state.verification.error is None
    service = SkillService(saved, index=index)
    assert service.health()["verification"]["status"] == "ok"
    assert service.find("merge pdf pages", 3)["hits"]


# ---------------------------------------------------------------------- kernels against NumPy
def _random_csr(rng, n_rows, bound):
    rows = [np.sort(rng.choice(bound, size=rng.integers(0, 6), replace=False)) for _ in range(n_rows)]
    indptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    ids = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
    return indptr, ids


def _numpy_verdict(indptr, ids, bound):
    try:
        validate.check_offsets("p", indptr, indptr.shape[0] - 1, ids.shape[0])
        validate.check_ids("i", ids, bound)
        validate.check_sorted_rows("i", indptr, ids)
    except IndexFormatError:
        return False
    return True


@pytest.mark.parametrize("seed", range(30))
def test_check_csr_kernel_agrees_with_the_numpy_checks(seed):
    rng = np.random.default_rng(seed)
    bound = 20
    indptr, ids = _random_csr(rng, 40, bound)
    counts = np.zeros(bound, np.int64)
    assert kv.check_csr(indptr, ids, bound, counts) == (kv.CSR_OK, 0)
    np.testing.assert_array_equal(counts, np.bincount(ids, minlength=bound))
    damage = seed % 4
    ip, ii = indptr.copy(), ids.copy()
    if damage == 0 and ii.size:
        ii[rng.integers(ii.size)] = bound + seed  # out of range
    elif damage == 1 and ii.size:
        ii[rng.integers(ii.size)] = -1
    elif damage == 2:
        r = int(np.argmax(np.diff(ip)))  # a row with >= 2 entries: swap to unsort it
        if ip[r + 1] - ip[r] >= 2:
            ii[ip[r]], ii[ip[r] + 1] = ii[ip[r] + 1], ii[ip[r]]
    else:
        ip[5] = ip[6] + 1 if ip[6] + 1 <= ii.size else ip[5]
        ip[5], ip[6] = max(ip[5], ip[6]), min(ip[5], ip[6]) - (1 if ip[6] > 0 else 0)
    code, pos = kv.check_csr(ip, ii, bound)
    assert (code == kv.CSR_OK) == _numpy_verdict(ip, ii, bound)
    if code == kv.CSR_ID_RANGE:
        assert not 0 <= ii[pos] < bound
    if code != kv.CSR_OK:
        with pytest.raises(IndexFormatError):
            validate.check_csr_kernel("p", "i", ip, ii, bound)


def test_check_csr_kernel_ends():
    assert kv.check_csr(np.array([1, 2], np.int64), np.zeros(2, np.int32), 5)[0] == kv.CSR_ENDS
    assert kv.check_csr(np.array([0, 1], np.int64), np.zeros(2, np.int32), 5)[0] == kv.CSR_ENDS


@pytest.mark.parametrize("seed", range(10))
def test_first_unsorted_string_kernel_agrees_with_python(seed):
    rng = np.random.default_rng(seed)
    words = sorted({"".join(rng.choice(list("abcé中"), size=rng.integers(1, 4))) for _ in range(30)})
    col = StringColumn.of(words)
    identity = np.arange(len(words), dtype=np.int64)
    assert kv.first_unsorted_string(col.blob, col.offsets, identity) == -1
    assert validate._first_unsorted_python(col, identity, 1, 0) == -1
    perm = identity.copy()
    i = int(rng.integers(1, len(words)))
    perm[i - 1], perm[i] = perm[i], perm[i - 1]
    assert kv.first_unsorted_string(col.blob, col.offsets, perm) == validate._first_unsorted_python(col, perm, 1, 0) == i
    dup = identity.copy()
    dup[i] = dup[i - 1]
    assert kv.first_unsorted_string(col.blob, col.offsets, dup) == validate._first_unsorted_python(col, dup, 1, 0)
    # interleaved fields (the skill table's ids are field 0 of 7)
    table = SkillTable.of([toy_skills(0)[j % 10] for j in range(10)], SkillMeta)
    assert kv.first_unsorted_string(table.column.blob, table.column.offsets, table.id_order, 7, 0) == -1


LAZY_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
from fakes import HashEncoder
from skillsight_fast import SkillIndex
from skillsight_fast.errors import SkillsightError
from skillsight_fast.agents.find import find_skills
for d in sys.argv[2:]:
    try:
        index = SkillIndex.load(d, mmap=True, verify="lazy", encoder=HashEncoder())
        index.search(["merge pdf pages", "stl mesh volume"], k=3)
        find_skills(index, ["merge pdf pages"], 3, pins=[index.skills[0].id])
        index.search(["merge pdf pages"], k=3, lexical_candidates=20)
        print(d, "ok", flush=True)
    except SkillsightError as exc:
        print(d, "error", str(exc)[:80], flush=True)
"""


def test_lazy_loads_of_damaged_arrays_never_crash(saved, tmp_path):
    """Every .npy of a format-3 index damaged in turn (values replaced, checksum recomputed), loaded
    lazily and searched (pins, and the postings through lexical_candidates) in one subprocess: each
    answers or raises SkillsightError; none reads out of bounds (a signal would kill the child)."""
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    folders = []
    for name in sorted(p.name for p in saved.glob("*.npy")):
        for trial in range(2):
            d = tmp_path / f"{name[:-4]}-{trial}"
            shutil.copytree(saved, d)
            arr = np.load(d / name)
            flat = arr.reshape(-1).copy()
            if flat.size:
                idx = rng.integers(0, flat.size, size=max(1, flat.size // 8))
                if flat.dtype == bool:
                    flat[idx] = ~flat[idx]
                else:
                    flat[idx] = rng.integers(-2**20, 2**20, size=idx.size).astype(flat.dtype)
            np.save(d / name, flat.reshape(arr.shape))
            _rehash(d, name)
            folders.append(str(d))
    support = Path(__file__).resolve().parents[1] / "support"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(support.parents[1]), str(support)]))
    p = subprocess.run([sys.executable, "-c", LAZY_CHILD, str(support), *folders], capture_output=True, text=True,
                       timeout=600, env=env, check=False)
    assert p.returncode == 0, f"exit {p.returncode} after:\n{p.stdout[-1500:]}\n{p.stderr[-2000:]}"
    assert len(p.stdout.splitlines()) == len(folders)


def test_skill_table_fields_are_the_records_fields():
    metas = toy_skills(0)
    table = SkillTable.of(metas, SkillMeta)
    rows = [3, 0, 3, len(metas) - 1]
    for name in ("id", "name", "path", "description"):
        assert table.fields(rows, name) == [getattr(table[r], name) for r in rows] == \
            [table.field(r, name) for r in rows]
    assert table.fields([], "id") == []
    for bad in ([-1], [len(metas)]):
        with pytest.raises(IndexError):
            table.fields(bad, "id")
