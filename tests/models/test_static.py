"""Static (model2vec-format) encoder distilled from the bundled MiniLM: reference, round trips, index."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast.errors import ModelError
from skillsight_fast.models.distill import distill, distill_to_folder, zipf_sif_weights
from skillsight_fast.models.static import StaticEncoder, is_static_model_dir, load_static_encoder

pytestmark = pytest.mark.model

TEXTS = [
    "merge two PDF files into one document",
    "turn this CSV into a bar chart with matplotlib",
    "Use this skill when the user asks to deploy a Docker container to Kubernetes.",
    "résumé naïve façade — unicode ✓",
    "zzqqxx",
]


@pytest.fixture(scope="module")
def folder(teacher, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # distil only the tokens of the test texts (the full vocabulary takes a minute)
    ids = sorted({i for enc in teacher._tokenizer.encode_batch(TEXTS, add_special_tokens=False)
                  for i in enc.ids})
    return distill_to_folder(teacher, tmp_path_factory.mktemp("m2v") / "minilm-static", token_ids=ids)


def reference_encode(folder: Path, texts: list[str]) -> np.ndarray:
    """Plain NumPy: tokenizer ids without specials, unknown dropped, rows averaged, normalised."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    table = load_file(str(folder / "model.safetensors"))["embeddings"].astype(np.float64)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    unk = tok.token_to_id("[UNK]")
    out = []
    for t in texts:
        ids = [i for i in tok.encode(t, add_special_tokens=False).ids if i != unk][:512]
        v = table[ids].mean(0) if ids else np.zeros(table.shape[1])
        n = np.linalg.norm(v)
        out.append(v / n if n > 0 else v)
    return np.asarray(out)


def test_distilled_rows_are_token_forward_passes(teacher) -> None:
    tok = teacher._tokenizer
    pdf = tok.token_to_id("pdf")
    static = distill(teacher, token_ids=[pdf], sif_coefficient=None)
    _, pooled = teacher._run([[tok.token_to_id("[CLS]"), pdf, tok.token_to_id("[SEP]")]])
    np.testing.assert_allclose(static.table[pdf], pooled[0], atol=1e-5)
    assert not static.table[tok.token_to_id("[CLS]")].any()  # special tokens stay zero
    w = zipf_sif_weights(5)
    assert np.all(np.diff(w) > 0) and np.all((w > 0) & (w < 1))  # frequent (low rank) tokens weigh less


def test_static_encoder_matches_numpy_reference(folder: Path) -> None:
    enc = load_static_encoder(folder)
    got = enc.encode(TEXTS)
    np.testing.assert_allclose(got, reference_encode(folder, TEXTS), atol=1e-5)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(got[:4], axis=1), 1.0, atol=1e-5)
    # the static vector points the teacher's way (same space: no PCA)
    from skillsight_fast.models import load_encoder

    t = load_encoder("all-MiniLM-L6-v2").encode(TEXTS[:3])
    assert (np.argmax(got[:3] @ t.T, axis=1) == np.arange(3)).all()  # each closest to its own text


def test_model2vec_loads_what_we_write(folder: Path) -> None:
    model2vec = pytest.importorskip("model2vec")
    m = model2vec.StaticModel.from_pretrained(str(folder))
    theirs = np.asarray(m.encode(TEXTS), dtype=np.float32)
    ours = load_static_encoder(folder).encode(TEXTS)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "model2vec" and cfg["normalize"] is True and cfg["hidden_dim"] == 384


def test_model2vec_written_folder_loads_into_skillsight(folder: Path, tmp_path: Path) -> None:
    model2vec = pytest.importorskip("model2vec")
    from skillsight_fast.models import load_encoder

    m = model2vec.StaticModel.from_pretrained(str(folder))
    out = tmp_path / "theirs"
    m.save_pretrained(str(out))  # model2vec's own writer (model card, modules.json)
    assert is_static_model_dir(out)
    enc = load_encoder(out)
    assert isinstance(enc, StaticEncoder)
    np.testing.assert_allclose(enc.encode(TEXTS), np.asarray(m.encode(TEXTS)), atol=1e-5)
    with pytest.raises(ModelError):
        load_encoder(out, int8=True)


def test_bad_static_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "model2vec"}')
    with pytest.raises(ModelError, match="missing"):
        load_static_encoder(tmp_path)
    assert not is_static_model_dir(tmp_path)


def test_static_index_searches_and_round_trips(folder: Path, tmp_path: Path) -> None:
    from skillsight_fast import IndexConfig, SkillIndex
    from skillsight_fast.library.skills import Skill

    docs = [("pdf", "pdf", "merge and split PDF files"), ("chart", "chart", "plot a CSV as a bar chart"),
            ("k8s", "kubernetes", "deploy a Docker container to Kubernetes")]
    skills = [Skill(id=i, name=n, description=d, body=d, path=i) for i, n, d in docs]
    enc = load_static_encoder(folder)
    index = SkillIndex.build(skills, enc, IndexConfig(model=str(folder)))
    hits = index.search(["merge two PDF files into one document"], k=3)
    assert hits.skill_ids[0][0] == "pdf"
    index.save(tmp_path / "idx")
    loaded = SkillIndex.load(tmp_path / "idx")  # the encoder comes back from config.encoder.model
    again = loaded.search(["merge two PDF files into one document"], k=3)
    assert again.skill_ids == hits.skill_ids
    np.testing.assert_allclose(again.scores, hits.scores, atol=1e-5)
    # a one-shot search with a static index never imports onnxruntime
    code = ("import sys; from skillsight_fast import SkillIndex; "
            f"i = SkillIndex.load({str(tmp_path / 'idx')!r}); r = i.search(['deploy to kubernetes'], k=1); "
            "print(r.skill_ids[0][0], 'onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__('os').environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert out.stdout.split() == ["k8s", "False"]


def test_the_table_is_mapped_and_other_files_still_load(folder: Path, tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    enc = load_static_encoder(folder)
    table = load_file(str(folder / "model.safetensors"))["embeddings"]
    assert not enc.table.flags.owndata and not enc.table.flags.writeable  # a read-only map of the file
    np.testing.assert_array_equal(enc.table, table)
    # float16 tables, extra tensors and a damaged header go through the safetensors library
    for name, tensors in (("f16", {"embeddings": table.astype(np.float16)}),
                          ("weighted", {"embeddings": table,
                                        "weights": np.full(table.shape[0], 2, np.float32)})):
        other = tmp_path / name
        other.mkdir()
        for f in ("tokenizer.json", "config.json"):
            (other / f).write_bytes((folder / f).read_bytes())
        save_file(tensors, str(other / "model.safetensors"))
        got = load_static_encoder(other)
        assert got.table.flags.owndata
        np.testing.assert_allclose(got.table, table * (2 if name == "weighted" else 1), atol=1e-3)
    raw = bytearray((folder / "model.safetensors").read_bytes())
    raw[8:12] = b"{{{{"
    (other / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ModelError, match="cannot load the static model"):
        load_static_encoder(other)
