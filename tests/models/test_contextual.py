"""The contextual query encoder tier: a table of the transformer's token states averaged over the
library's texts (skillsight_fast/models/contextual.py, docs/ENCODERS.md).

Reference checks: the table against per-text forward passes, the encoder against a plain NumPy mean,
and one exact identity: for a library of one text, the contextual vector of that text is the
transformer's own mean-pooled vector (the table keeps each token's sum of states). Real data: SKILL.md
documents and tasks of data/skillsbench, the bundled MiniLM, a static model distilled from it over the
tokens those texts use.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.errors import IndexFormatError, ModelError, SkillsightError
from skillsight_fast.models.contextual import ContextualEncoder, contextual_table, token_state_sums

ROOT = Path(__file__).parents[2]


class _Tokenizer:
    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab

    def get_vocab(self) -> dict[str, int]:
        return self.vocab


class _Static:
    """Word-level stand-in for a StaticEncoder: ids of known words, in order."""

    model_id, checksum = "words", "w0"

    def __init__(self, words: list[str]) -> None:
        self.tokenizer = _Tokenizer({w: i for i, w in enumerate(["[PAD]", "[CLS]", "[SEP]", *words])})

    def tokenize(self, texts):
        v = self.tokenizer.vocab
        return [np.array([v[w] for w in t.split() if w in v], np.int64) for t in texts]


def _reference(static, ids, vectors, texts, fallback, max_length):
    rows = dict(zip(ids.tolist(), vectors))
    out = []
    for t, tok in zip(texts, static.tokenize(texts)):
        known = [rows[i] for i in tok[: max_length - 2].tolist() if i in rows]
        if not known:
            out.append(fallback([t])[0])
            continue
        specials = [rows[i] for i in (1, 2) if i in rows]
        v = np.sum(known + specials, axis=0) / (len(known) + len(specials))
        out.append(v / np.linalg.norm(v))
    return np.asarray(out, np.float32)


def test_encoder_matches_a_numpy_mean_on_random_tables() -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    static = _Static(words)
    ids = np.sort(rng.choice(np.arange(1, 43), size=25, replace=False)).astype(np.int32)  # some words unseen
    if 1 not in ids:
        ids = np.sort(np.append(ids, 1)).astype(np.int32)
    vectors = rng.standard_normal((ids.size, 8)).astype(np.float32)
    fallback_vec = np.eye(8, dtype=np.float32)[3]

    def fallback(texts):
        return np.tile(fallback_vec, (len(texts), 1))

    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 30)))) for _ in range(30)]
    texts += ["nothing known here", "w1 " * 50, ""]
    for max_length in (256, 6):
        enc = ContextualEncoder(static, ids, vectors, fallback, max_length=max_length)
        got = enc.encode(texts)
        np.testing.assert_allclose(got, _reference(static, ids, vectors, texts, fallback, max_length),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert enc.encode([]).shape == (0, 8)
    with pytest.raises(TypeError):
        enc.encode("one string")
    with pytest.raises(ModelError, match="outside"):
        ContextualEncoder(static, np.array([1, 999], np.int32), vectors[:2], fallback)


def test_table_of_sums_and_counts() -> None:
    sums = np.zeros((6, 3))
    sums[1], sums[4] = [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]
    counts = np.array([0, 2, 0, 0, 1, 0])
    ids, vectors = contextual_table(sums, counts)
    np.testing.assert_array_equal(ids, [1, 4])
    np.testing.assert_allclose(vectors, [[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    assert ids.dtype == np.int32 and vectors.dtype == np.float32


def test_token_states_need_a_transformer() -> None:
    from fakes import HashEncoder

    with pytest.raises(ModelError, match="token states"):
        token_state_sums(HashEncoder(), ["a text"])


@pytest.fixture(scope="module")
def real(small_skillsbench):
    """(skills, tasks, static folder): tests/conftest.py's ``small_skillsbench``."""
    return small_skillsbench


@pytest.mark.model
def test_token_sums_equal_per_text_forward_passes(teacher, real) -> None:
    skills, _, _ = real
    texts = [s.text for s in skills[:6]] + ["short", ""]
    sums, counts = token_state_sums(teacher, texts)  # batched, padded
    ref_sums, ref_counts = np.zeros_like(sums), np.zeros_like(counts)
    for ids in teacher.tokenize(texts):
        _, hidden = teacher.hidden_states([ids])  # alone: no padding
        np.add.at(ref_sums, ids, hidden[0].astype(np.float64))
        np.add.at(ref_counts, ids, 1)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-4, atol=1e-4)


@pytest.mark.model
def test_one_text_library_gives_the_transformer_vector_back(teacher, real) -> None:
    """Σ over a text's tokens of (each token's mean state) = Σ of its states: the pooled vector."""
    from skillsight_fast.models.static import load_static_encoder

    _, tasks, folder = real
    static = load_static_encoder(folder)
    for text in tasks[:3]:
        ids, vectors = contextual_table(*token_state_sums(teacher, [text]))
        enc = ContextualEncoder(static, ids, vectors, fallback=lambda t: pytest.fail("no fallback expected"),
                                max_length=teacher.max_length)
        if len(teacher.tokenize([text])[0]) < teacher.max_length:  # the same tokens on both sides
            np.testing.assert_allclose(enc.encode([text]), teacher.encode([text]), atol=2e-5)


@pytest.mark.model
def test_contextual_index_builds_saves_loads_and_updates(teacher, real, tmp_path: Path) -> None:
    from skillsight_fast.engine.update import update_index
    from skillsight_fast.models.static import apply_query_map, load_static_encoder

    skills, tasks, folder = real
    config = IndexConfig(query_encoder="contextual", query_model=str(folder))
    index = SkillIndex.build(skills, teacher, config)
    ids, vectors = contextual_table(*token_state_sums(teacher, [s.text for s in skills]))
    np.testing.assert_array_equal(index.dense.query_table_ids, ids)
    np.testing.assert_allclose(index.dense.query_table, vectors, atol=1e-5)
    static = load_static_encoder(folder)
    qmap = index.dense.query_map
    ref = ContextualEncoder(static, ids, vectors, lambda t: apply_query_map(static.encode(t), qmap),
                            max_length=teacher.max_length)
    q = index.encode(tasks)
    np.testing.assert_allclose(q, ref.encode(tasks), atol=1e-5)
    # skills: fp32
    np.testing.assert_allclose(index.dense.embeddings, teacher.encode([s.text for s in skills]), atol=1e-5)
    got = index.search(tasks, k=5)
    want = index.search_vectors(ref.encode(tasks), tasks, 5)
    np.testing.assert_array_equal(got.ids, want.ids)

    index.save(tmp_path / "idx")
    loaded = SkillIndex.load(tmp_path / "idx")
    np.testing.assert_allclose(loaded.encode(tasks), q, atol=1e-6)
    assert loaded.encoders.attached is None  # a search never loads the transformer
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["config"]["query_encoder"] == "contextual"

    report = update_index(tmp_path / "idx", skills[:-3])  # the table is kept, the rest is updated
    assert len(report.removed) == 3
    again = SkillIndex.load(tmp_path / "idx")
    np.testing.assert_array_equal(again.dense.query_table_ids, ids)
    assert len(again) == len(skills) - 3

    with pytest.raises(SkillsightError, match="token states"):
        # no transformer to take states from
        SkillIndex.from_embeddings(skills, index.dense.embeddings, config)


@pytest.mark.model
def test_a_table_without_its_tier_or_a_bad_table_is_refused(teacher, real, tmp_path: Path) -> None:
    skills, _, folder = real
    SkillIndex.build(skills, teacher, IndexConfig(query_encoder="contextual", query_model=str(folder))).save(
        tmp_path / "idx")
    manifest = tmp_path / "idx" / "manifest.json"
    m = json.loads(manifest.read_text())
    m["config"]["query_encoder"] = "static-mapped"
    manifest.write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="contextual token table"):
        SkillIndex.load(tmp_path / "idx", verify=False)


@pytest.mark.model
def test_eval_tier_gives_what_an_index_of_it_gives(teacher, real, tmp_path: Path) -> None:
    from skillsight_fast.lab.evaluation.datasets import Dataset, EvalQuery
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext

    skills, tasks, folder = real
    ds = Dataset("sample", list(skills), [EvalQuery(f"q{i}", t, frozenset({0})) for i, t in enumerate(tasks)])
    ctx = EvalContext(ds, cache_dir=tmp_path, query_encoder="contextual", query_model=str(folder),
                      encoder=teacher)
    index = SkillIndex.build(skills, teacher,
                             IndexConfig(query_encoder="contextual", query_model=str(folder)))
    np.testing.assert_allclose(ctx.query_emb, index.encode(tasks), atol=1e-5)
    again = EvalContext(ds, cache_dir=tmp_path, query_encoder="contextual", query_model=str(folder),
                        encoder=teacher)
    np.testing.assert_allclose(again.query_emb, ctx.query_emb, atol=1e-6)  # the cached table
    assert METHODS["skillsight"](ctx).shape[0] == len(tasks)


@pytest.mark.model
def test_cli_contextual_index_and_refusals(real, tmp_path: Path, capsys) -> None:
    from skillsight_fast.cli import main

    skills, tasks, folder = real
    src = tmp_path / "skills.jsonl"
    src.write_text("".join(json.dumps({"id": s.id, "name": s.name, "description": s.description,
                                       "body": s.body})
                           + "\n" for s in skills), encoding="utf-8")
    assert main(["-c", "query-encoder=contextual", "-c", f"query-model={folder}", "index", str(src), "-o",
                 str(tmp_path / "a"), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["query_encoder"] == "contextual"
    # no abstention: this tests the tier's mechanics, not whether the task fits this small library
    assert main(["-c", "min-cosine=none", "search", "-i", str(tmp_path / "a"), tasks[-1], "-k", "2",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"]
    assert main(["-c", "query-encoder=contextual", "-c", "stream=true", "index", str(src), "-o",
                 str(tmp_path / "b")]) == 1
    assert "--stream" in capsys.readouterr().err
    assert main(["-c", "query-encoder=contextual", "-c", "query-int8=true", "index", str(src), "-o",
                 str(tmp_path / "c")]) == 1
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


@pytest.mark.model
def test_bench_view_searches_like_a_contextual_index(teacher, real) -> None:
    from skillsight_fast.lab.benchmark.driver import tier_views
    from skillsight_fast.models.static import load_static_encoder

    skills, tasks, folder = real
    index = SkillIndex.build(skills, teacher,
                             IndexConfig(query_encoder="contextual", query_model=str(folder)))
    base = SkillIndex.build(skills, teacher, IndexConfig(query_encoder="transformer"))
    static = load_static_encoder(folder)
    views = tier_views(base, static, index.dense.query_map,
                       contextual=(index.dense.query_table_ids, index.dense.query_table))
    assert {"static-mapped", "contextual", "static"} <= set(views)
    np.testing.assert_allclose(views["contextual"].encode(tasks), index.encode(tasks), atol=1e-6)
    assert base.dense.query_table is None  # the view does not change the index it shares arrays with


@pytest.mark.model
def test_one_shot_contextual_search_imports_neither_onnxruntime_nor_numba(teacher, real,
                                                                            tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    skills, tasks, folder = real
    SkillIndex.build(skills, teacher, IndexConfig(query_encoder="contextual", query_model=str(folder))).save(
        tmp_path / "idx")
    code = ("import json, sys; from skillsight_fast.cli import main; "
            f"main(['-c', 'min-cosine=none', 'search', '-i', {str(tmp_path / 'idx')!r}, {tasks[-1]!r}, "
            "'-k', '2', '--json']); "
            "print(json.dumps(['onnxruntime' in sys.modules, 'numba' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = out.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == [False, False]
    assert json.loads("\n".join(lines[:-1]))["hits"]
