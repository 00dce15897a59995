"""The catalogue of bad inputs (issue 6): every case through the CLI and through the API.

CLI contract: exit code 1, exactly one ``skillsight: error: ...`` line on stderr that names the
problem, no traceback, and no index folder written (or the previous index left intact).
API contract: a specific subclass of :class:`skillsight_fast.errors.SkillsightError`.

Query policy (documented in docs/GUARANTEES.md):

* empty, whitespace-only, or nothing but control characters -> ``QueryError`` ("empty query");
* longer than ``MAX_QUERY_CHARS`` (100,000) characters, e.g. 1 MB -> ``QueryError`` ("over the");
* control characters mixed with text -> accepted (the analyzer and tokenizer ignore them);
* non-English text -> accepted: the dense side ranks it, lexical evidence may be empty;
* lone surrogates (undecodable argv bytes, ``"\\ud800"`` in JSON) -> replaced by U+FFFD, accepted;
* k <= 0, a non-integer k, or k > max(10,000, library size) -> ``QueryError``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder

from skillsight_fast import SkillIndex, models
from skillsight_fast.cli import main
from skillsight_fast.engine.index import MAX_QUERY_CHARS
from skillsight_fast.errors import (
    DuplicateSkillError,
    EmbeddingError,
    EmptyLibraryError,
    IndexFormatError,
    ModelMismatchError,
    QueryError,
    SkillFormatError,
)
from skillsight_fast.library.skills import load_skills

GOOD = {
    "pdf": ("pdf", "Merge and split PDF files.", "pdf pages merge split extract tables"),
    "mesh": ("mesh", "Analyse STL meshes.", "stl mesh volume triangles"),
    "csv": ("csv", "Clean CSV files.", "csv columns rows dedupe"),
}


def write_skill(root: Path, rel: str, raw: str | bytes) -> Path:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_bytes(raw.encode("utf-8") if isinstance(raw, str) else raw)
    return folder / "SKILL.md"


def good_library(root: Path) -> Path:
    for rel, (name, desc, body) in GOOD.items():
        write_skill(root, rel, f"---\nname: {name}\ndescription: {desc}\n---\n{body}\n")
    return root


class NaNEncoder(HashEncoder):
    """An encoder gone wrong: NaN in every vector."""

    def encode(self, texts):
        out = super().encode(texts)
        out[:, 0] = np.nan
        return out


@pytest.fixture
def fake_model(monkeypatch):
    """Every load_encoder call (CLI index/search, lazy index.encoder) gets ``state['encoder']``."""
    state = {"encoder": HashEncoder()}
    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: state["encoder"])
    return state


def run_cli(capsys, argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_cli_error(code, err, needle):
    assert code == 1, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("skillsight: error:")]
    assert len(lines) == 1, err
    assert needle.lower() in lines[0].lower(), lines[0]


def index_snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# ====================================================================== bad libraries
def _symlink_loop(root: Path) -> None:
    (root / "a").mkdir(parents=True)
    os.symlink(root, root / "a" / "loop")  # folder loop: walked once
    (root / "b").mkdir()
    os.symlink(root / "b" / "SKILL.md", root / "b" / "SKILL.md")  # a SKILL.md that links to itself


def _huge(root: Path) -> None:
    path = write_skill(root, "huge", "---\nname: huge\ndescription: Big.\n---\n")
    with open(path, "r+b") as fh:  # 50 MB (sparse): rejected by size before it is read
        fh.truncate(50 * 1024 * 1024)


# name -> (make the library under root, reason that --strict / strict=True reports)
BROKEN_SKILLS = {
    "no front matter": (lambda r: write_skill(r, "x", "# Title\nno front matter\n"), "no YAML front matter"),
    "unclosed front matter": (lambda r: write_skill(r, "x", "---\nname: x\ndescription: y\n"), "not closed"),
    "malformed YAML": (lambda r: write_skill(r, "x", "---\nname: [oops\ndescription: y\n---\n"),
                       "invalid YAML"),
    "missing name": (lambda r: write_skill(r, "x", "---\ndescription: y\n---\nbody"), "'name'"),
    "front matter not a mapping": (lambda r: write_skill(r, "x", "---\n- a\n- b\n---\n"), "not a mapping"),
    "non-UTF-8 bytes": (lambda r: write_skill(r, "x", b"---\nname: x\ndescription: caf\xe9\n---\n"), "UTF-8"),
    "binary SKILL.md": (lambda r: write_skill(r, "x", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "binary"),
    "invalid date in YAML": (lambda r: write_skill(
        r, "x", "---\nname: x\ndescription: y\nupdated: 2024-13-45\n---\n"),
                             "invalid YAML"),
    "deeply nested YAML": (lambda r: write_skill(r, "x", "---\nname: " + "[" * 5000 + "\n---\n"),
                           "invalid YAML"),
    "50 MB SKILL.md": (_huge, "limit"),
    "symlink loop": (_symlink_loop, "cannot read"),
}


@pytest.mark.parametrize("case", list(BROKEN_SKILLS))
def test_broken_skill_api(tmp_path, case):
    make, reason = BROKEN_SKILLS[case]
    make(tmp_path / "lib")
    with pytest.raises(SkillFormatError, match=reason):
        load_skills([tmp_path / "lib"], strict=True)
    with pytest.raises(EmptyLibraryError, match=reason):  # the only skill was skipped: say why
        load_skills([tmp_path / "lib"])
    good_library(tmp_path / "lib")
    report = load_skills([tmp_path / "lib"])  # next to good skills, a broken one is skipped
    assert sorted(s.id for s in report.skills) == sorted(GOOD)
    assert len(report.problems) == 1 and reason in report.problems[0].reason


@pytest.mark.parametrize("case", list(BROKEN_SKILLS))
def test_broken_skill_cli(tmp_path, capsys, fake_model, case):
    make, reason = BROKEN_SKILLS[case]
    make(tmp_path / "lib")
    out = tmp_path / "idx"
    code, _, err = run_cli(capsys, ["index", tmp_path / "lib", "-o", out, "--strict"])
    assert_cli_error(code, err, reason)
    code, _, err = run_cli(capsys, ["index", tmp_path / "lib", "-o", out])
    assert_cli_error(code, err, "no skills found")
    assert reason.lower() in err.lower()
    assert not out.exists() and not list(tmp_path.glob(".idx*"))


def test_broken_library_leaves_previous_index_intact(tmp_path, capsys, fake_model):
    out = tmp_path / "idx"
    assert run_cli(capsys, ["index", good_library(tmp_path / "good"), "-o", out])[0] == 0
    before = index_snapshot(out)
    BROKEN_SKILLS["binary SKILL.md"][0](tmp_path / "bad")
    code, _, err = run_cli(capsys, ["index", tmp_path / "bad", "-o", out, "--strict"])
    assert_cli_error(code, err, "binary")
    fake_model["encoder"] = NaNEncoder()  # fails after reading, while encoding
    code, _, err = run_cli(capsys, ["index", tmp_path / "good", "-o", out])
    assert_cli_error(code, err, "NaN")
    assert index_snapshot(out) == before
    assert sorted(SkillIndex.load(out).ids) == sorted(GOOD)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _duplicate_jsonl(root: Path) -> list[Path]:
    root.mkdir(parents=True)
    rec = {"id": "pdf", "name": "pdf", "description": "d", "body": "b"}
    (root / "a.jsonl").write_text(json.dumps(rec) + "\n")
    (root / "b.jsonl").write_text(json.dumps(rec) + "\n")
    return [root / "a.jsonl", root / "b.jsonl"]


def _empty(root: Path) -> list[Path]:
    root.mkdir(parents=True)
    (root / "README.md").write_text("no skills here")
    return [root]


def _missing(root: Path) -> list[Path]:
    return [root / "does-not-exist"]


def _not_a_source(root: Path) -> list[Path]:
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("hello")
    return [root / "notes.txt"]


def _gzip_garbage(root: Path) -> list[Path]:
    root.mkdir(parents=True)
    (root / "s.jsonl.gz").write_bytes(b"this is not gzip")
    return [root / "s.jsonl.gz"]


# name -> (make sources under root, API exception, message)
BAD_LIBRARIES = {
    "empty library": (_empty, EmptyLibraryError, "no skills found"),
    "duplicate ids": (_duplicate_jsonl, DuplicateSkillError, "duplicate skill id 'pdf'"),
    "missing source": (_missing, SkillFormatError, "no such file"),
    "unsupported source": (_not_a_source, SkillFormatError, "not a folder"),
    "corrupt .jsonl.gz": (_gzip_garbage, SkillFormatError, "cannot read"),
}


@pytest.mark.parametrize("case", list(BAD_LIBRARIES))
def test_bad_library(tmp_path, capsys, fake_model, case):
    make, exc, message = BAD_LIBRARIES[case]
    sources = make(tmp_path / "lib")
    with pytest.raises(exc, match=message):
        load_skills(sources)
    out = tmp_path / "idx"
    code, _, err = run_cli(capsys, ["index", *sources, "-o", out])
    assert_cli_error(code, err, message)
    assert not out.exists()


def test_nan_embeddings(tmp_path, capsys, fake_model):
    skills = load_skills([good_library(tmp_path / "lib")]).skills
    emb = HashEncoder().encode([s.text for s in skills])
    emb[1, 3] = np.nan
    with pytest.raises(EmbeddingError, match="NaN"):
        SkillIndex.from_embeddings(skills, emb)
    with pytest.raises(EmbeddingError, match="NaN"):
        SkillIndex.build(skills, NaNEncoder())
    with pytest.raises(EmbeddingError, match="do not match"):
        SkillIndex.from_embeddings(skills, emb[:2])
    fake_model["encoder"] = NaNEncoder()
    code, _, err = run_cli(capsys, ["index", tmp_path / "lib", "-o", tmp_path / "idx"])
    assert_cli_error(code, err, "NaN")
    assert not (tmp_path / "idx").exists()


def test_query_embedding_nan(tmp_path, capsys, fake_model):
    index = SkillIndex.build(load_skills([good_library(tmp_path / "lib")]).skills, HashEncoder())
    index.save(tmp_path / "idx")
    index.encoders.attach(NaNEncoder(), check=False)
    with pytest.raises(QueryError, match="NaN"):
        index.search("merge pdf")
    fake_model["encoder"] = NaNEncoder()
    code, _, err = run_cli(capsys, ["search", "-i", tmp_path / "idx", "merge pdf"])
    assert_cli_error(code, err, "NaN")


@pytest.mark.parametrize("output", ["file-as-parent", "non-index-folder"])
def test_unwritable_output(tmp_path, capsys, fake_model, output):
    lib = good_library(tmp_path / "lib")
    if output == "file-as-parent":
        (tmp_path / "plain.txt").write_text("x")
        out, exc, message = tmp_path / "plain.txt" / "idx", OSError, "plain.txt"
    else:
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("precious")
        out, exc, message = tmp_path / "mine", IndexFormatError, "refusing"
    code, _, err = run_cli(capsys, ["index", lib, "-o", out])
    assert_cli_error(code, err, message)
    with pytest.raises(exc, match=message):
        SkillIndex.build(load_skills([lib]).skills, HashEncoder()).save(out)
    if output == "non-index-folder":
        assert [p.name for p in out.iterdir()] == ["notes.txt"]


# ====================================================================== bad queries
@pytest.fixture(scope="module")
def saved_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_inputs")
    index = SkillIndex.build(load_skills([good_library(root / "lib")]).skills, HashEncoder())
    index.save(root / "idx")
    return root / "idx"


# name -> (query, k, None if accepted else the QueryError message)
QUERIES = {
    "empty": ("", 3, "empty query"),
    "whitespace only": (" \n\t\u00a0\u3000 ", 3, "empty query"),
    "control characters only": ("\x00\x01\x07\x1b\x7f", 3, "empty query"),
    "1 MB": ("merge pdf " * 100_000, 3, "over the"),
    "control characters in text": ("merge\x00 pdf\x1b[0m pages\x07", 3, None),
    "non-English (French)": ("fusionner deux fichiers PDF", 3, None),
    "non-English (Chinese)": ("合并两个PDF文件", 3, None),
    "non-English (Russian)": ("объединить файлы", 3, None),
    "emoji": ("📄➕📄", 3, None),
    "lone surrogate": ("\ud800 merge pdf \udcff", 3, None),
    "k = 0": ("merge pdf", 0, "k must be at least 1"),
    "k < 0": ("merge pdf", -5, "k must be at least 1"),
    "k absurdly large": ("merge pdf", 10**12, "too large"),
    "k larger than the library": ("merge pdf", 50, None),
}


@pytest.mark.parametrize("case", list(QUERIES))
def test_query_api(saved_index, case):
    query, k, message = QUERIES[case]
    index = SkillIndex.load(saved_index, encoder=HashEncoder())
    if message is not None:
        with pytest.raises(QueryError, match=message):
            index.search(query, k=k)
        return
    res = index.search(query, k=k)
    assert res.ids.shape == (1, k) and res.scores.dtype == np.float32
    n = min(k, len(index))
    assert (res.ids[0, :n] >= 0).all() and (res.ids[0, n:] == -1).all()
    assert np.isfinite(res.scores[0, :n]).all()
    if "pdf" in query:
        assert res.skill_ids[0][0] == "pdf"


@pytest.mark.parametrize("case", list(QUERIES))
def test_query_cli(saved_index, capsys, fake_model, case):
    query, k, message = QUERIES[case]
    # --min-cosine none: the hash vectors' derived threshold would drop hits these inputs do get
    code, out, err = run_cli(capsys, ["-c", "min-cosine=none", "search", "-i", saved_index, "-k", k, "--json",
                                      "--", query])
    if message is not None:
        assert_cli_error(code, err, message)
        assert out == ""
        return
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert len(hits) == min(k, len(GOOD))


def test_query_batch_with_one_bad_query_is_rejected_whole(saved_index):
    index = SkillIndex.load(saved_index, encoder=HashEncoder())
    with pytest.raises(QueryError, match="empty query"):
        index.search(["merge pdf", "\x00\x00", "stl mesh"])


def test_query_not_a_string(saved_index):
    index = SkillIndex.load(saved_index, encoder=HashEncoder())
    with pytest.raises(QueryError, match="string"):
        index.search(["merge pdf", 42])  # type: ignore[list-item]
    with pytest.raises(QueryError, match="integer"):
        index.search("merge pdf", k=2.5)  # type: ignore[arg-type]
    assert len(" " * MAX_QUERY_CHARS) == MAX_QUERY_CHARS


def test_cli_k_not_an_integer(saved_index, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse: usage message, exit 2
        main(["search", "-i", str(saved_index), "-k", "lots", "merge pdf"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid int value" in err and "Traceback" not in err


# ====================================================================== bad index folders
def _rewrite_manifest(d: Path, change) -> None:
    m = json.loads((d / "manifest.json").read_text())
    change(m)
    (d / "manifest.json").write_text(json.dumps(m))


def _wrong_dtype(d: Path) -> None:
    arr = np.load(d / "embeddings.npy").astype(np.float64)
    np.save(d / "embeddings.npy", arr)
    import hashlib

    digest = hashlib.sha256((d / "embeddings.npy").read_bytes()).hexdigest()
    _rewrite_manifest(d, lambda m: m["arrays"]["embeddings"].update(sha256=digest))


def _truncate(d: Path) -> None:
    raw = (d / "embeddings_perp.npy").read_bytes()
    (d / "embeddings_perp.npy").write_bytes(raw[: len(raw) // 2])


def _flip_byte(d: Path) -> None:
    raw = bytearray((d / "idf.npy").read_bytes())
    raw[-3] ^= 0x55
    (d / "idf.npy").write_bytes(bytes(raw))


def _del_model(m: dict) -> None:
    del m["model"]


def _drop_tf(m: dict) -> None:
    """A BM25 index whose manifest lost its term frequencies."""
    del m["arrays"]["doc_tf"], m["arrays"]["doc_len"]
    m["decisions"]["lexical"] = "bm25"


def _short_doc_len(d: Path) -> None:
    np.save(d / "doc_len.npy", np.zeros(1, np.int32))
    import hashlib

    digest = hashlib.sha256((d / "doc_len.npy").read_bytes()).hexdigest()
    _rewrite_manifest(d, lambda m: m["arrays"]["doc_len"].update(sha256=digest, shape=[1]))


# name -> (corrupt the folder, message); verify=False is checked separately where it differs
BROKEN_INDEXES = {
    "missing folder": (lambda d: shutil.rmtree(d), "no such index"),
    "missing manifest": (lambda d: (d / "manifest.json").unlink(), "not an index"),
    "malformed manifest": (lambda d: (d / "manifest.json").write_text("{not json"), "unreadable manifest"),
    "foreign manifest": (lambda d: (d / "manifest.json").write_text('{"format": "other"}'),
                         "not a skillsight"),
    "wrong format version": (lambda d: _rewrite_manifest(d, lambda m: m.update(format_version=99)),
                             "format version 99"),
    "manifest without model": (lambda d: _rewrite_manifest(d, _del_model), "malformed manifest"),
    "missing array": (lambda d: (d / "basis.npy").unlink(), "basis.npy is missing"),
    "truncated array": (_truncate, "checksum mismatch"),
    "wrong-dtype array": (_wrong_dtype, "expected float32"),
    "checksum mismatch": (_flip_byte, "checksum mismatch"),
    "tampered skills.jsonl": (lambda d: (d / "skills.jsonl").write_text('{"id": "evil"}\n'),
                              "checksum mismatch"),
    "missing vocab.json": (lambda d: (d / "vocab.json").unlink(), "cannot read vocab.json"),
    "BM25 index without tf": (lambda d: _rewrite_manifest(d, _drop_tf), "needs term frequencies"),
    "doc_len of wrong length": (_short_doc_len, "array doc_len"),
    "unknown lexical side": (lambda d: _rewrite_manifest(d, lambda m: m["decisions"].update(lexical="x")),
                             "unknown lexical side"),
}


@pytest.fixture
def index_copy(saved_index, tmp_path):
    d = tmp_path / "idx"
    shutil.copytree(saved_index, d)
    return d


@pytest.mark.parametrize("case", list(BROKEN_INDEXES))
def test_broken_index(index_copy, capsys, fake_model, case):
    corrupt, message = BROKEN_INDEXES[case]
    corrupt(index_copy)
    for mmap in (False, True):
        with pytest.raises(IndexFormatError, match=message):
            SkillIndex.load(index_copy, mmap=mmap)
    code, out, err = run_cli(capsys, ["search", "-i", index_copy, "merge pdf"])
    assert_cli_error(code, err, message)
    assert out == ""


def test_every_array_is_verified(index_copy):
    """The arrays are hashed on a thread while the rest loads: a changed byte in any of them, alone
    or with other damage, is still reported as that file's checksum mismatch."""
    names = sorted(p.name for p in index_copy.glob("*.npy"))
    assert len(names) >= 10
    for name in names:
        raw = (index_copy / name).read_bytes()
        damaged = bytearray(raw)
        damaged[-1] ^= 0x01
        (index_copy / name).write_bytes(bytes(damaged))
        for mmap in (False, True):
            with pytest.raises(IndexFormatError, match=f"{name}: checksum mismatch"):
                SkillIndex.load(index_copy, mmap=mmap)
        (index_copy / "vocab.json").rename(index_copy / "vocab.moved")  # and a second fault after it
        with pytest.raises(IndexFormatError, match=f"{name}: checksum mismatch"):
            SkillIndex.load(index_copy)
        (index_copy / "vocab.moved").rename(index_copy / "vocab.json")
        (index_copy / name).write_bytes(raw)
    SkillIndex.load(index_copy)


def test_broken_index_without_checksums(index_copy):
    _truncate(index_copy)
    with pytest.raises(IndexFormatError, match="truncated"):
        SkillIndex.load(index_copy, verify=False)
    with pytest.raises(IndexFormatError, match="truncated"):
        SkillIndex.load(index_copy, verify=False, mmap=True)


@pytest.mark.parametrize("other", ["checksum", "dimension"])
def test_model_mismatch(saved_index, capsys, fake_model, other):
    encoder = HashEncoder(checksum="another-model") if other == "checksum" else HashEncoder(dim=32)
    message = "built with model" if other == "checksum" else "dimension"
    with pytest.raises(ModelMismatchError, match=message):
        SkillIndex.load(saved_index, encoder=encoder)
    index = SkillIndex.load(saved_index)
    with pytest.raises(ModelMismatchError, match=message):
        index.encoder = encoder
    fake_model["encoder"] = encoder  # what `skillsight search` loads for the index's model name
    code, out, err = run_cli(capsys, ["search", "-i", saved_index, "merge pdf"])
    assert_cli_error(code, err, message)
    assert out == ""


@pytest.mark.model
def test_real_encoder_survives_hostile_queries(tmp_path):
    """The ONNX tokenizer raises TypeError on lone surrogates: search must sanitise them first."""
    from skillsight_fast.models import load_encoder

    encoder = load_encoder("all-MiniLM-L6-v2")
    skills = load_skills([good_library(tmp_path / "lib")]).skills
    index = SkillIndex.build(skills, encoder)
    for query in ("\ud800 merge pdf \udcff", "merge\x00 pdf\x1b[0m", "合并两个PDF文件",
                  "x" * MAX_QUERY_CHARS):
        res = index.search(query, k=2)
        assert (res.ids[0] >= 0).all() and np.isfinite(res.scores).all()
