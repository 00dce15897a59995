"""Build an ONNX graph of a BERT encoder straight from ``model.safetensors`` (no torch).

The graph uses only standard ONNX operators (opset 17): ``Gather`` embeddings,
``LayerNormalization``, fused Q/K/V ``MatMul``, softmax attention with an additive mask
bias, and exact (erf) GELU. onnxruntime fuses these patterns itself at session creation.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError
from skillsight_fast.files import atomic_output, atomic_write_bytes, sha256_file

logger = logging.getLogger(__name__)

OPSET = 17
#: Additive attention bias for padding positions (exp(-1e4) == 0 in float32, never NaN).
MASK_BIAS = -1e4
OUTPUT_NAME = "last_hidden_state"


def read_bert_config(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate ``config.json`` of a BERT-family model folder.

    Raises
    ------
    ModelError
        If the file is missing/unreadable, or the model is not a plain BERT encoder
        (``model_type`` other than ``bert``, activation other than ``gelu``, relative positions).
    """
    path = Path(model_dir) / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{path} not found: a BERT model folder needs config.json") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc
    model_type = cfg.get("model_type", "")
    if model_type != "bert":
        raise ModelError(
            f"{path}: model_type {model_type!r} is not supported; only BERT encoders "
            "(model_type 'bert', e.g. MiniLM, bge, e5, gte) can be exported"
        )
    act = cfg.get("hidden_act", "gelu")
    if act != "gelu":
        raise ModelError(f"{path}: hidden_act {act!r} is not supported (only exact 'gelu')")
    pos = cfg.get("position_embedding_type", "absolute")
    if pos != "absolute":
        raise ModelError(f"{path}: position_embedding_type {pos!r} is not supported")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            raise ModelError(f"{path}: missing or invalid {key!r}")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ModelError(f"{path}: hidden_size is not divisible by num_attention_heads")
    return cfg


def load_bert_weights(model_dir: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load ``model.safetensors`` with names normalised to the plain BERT naming.

    The ``bert.`` prefix is dropped and LayerNorm ``gamma``/``beta`` become
    ``weight``/``bias``; non-encoder tensors (MLM/pooler heads) are kept but unused.

    Returns
    -------
    dict of str to numpy.ndarray
        E.g. ``"encoder.layer.0.attention.self.query.weight"`` -> float32 ``(out, in)``.
    """
    from safetensors.numpy import load_file

    path = Path(model_dir) / "model.safetensors"
    if not path.is_file():
        raise ModelError(f"{path} not found: a BERT model folder needs model.safetensors")
    try:
        raw = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types
        raise ModelError(f"cannot read {path}: {exc}") from exc
    out: dict[str, np.ndarray] = {}
    for key, value in raw.items():
        key = key.removeprefix("bert.")
        if ".LayerNorm." in key or key.startswith("LayerNorm."):
            key = key.replace(".gamma", ".weight").replace(".beta", ".bias")
        out[key] = value
    return out


class _GraphBuilder:
    """Tiny helper around onnx.helper that names nodes and stores initializers."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        from onnx import helper

        self._n += 1
        outs = [f"{op_type.lower()}_{self._n}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self._n}", **attrs))
        return outs[0] if n_out == 1 else outs


def quantize_weight_int8(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-column int8 of a ``MatMul`` weight, as onnxruntime's ``quantize_dynamic`` makes it
    (``per_channel=True``, ``weight_type=QInt8``: range ``[-127, 127]``, zero point 0).

    Parameters
    ----------
    weight : float32 (in, out)

    Returns
    -------
    quantized : int8 (in, out)
        ``round(weight / scale)`` (half to even), clipped to ``[-127, 127]``.
    scale : float32 (out,)
        ``max |weight[:, j]| / 127`` per output column (1 for an all-zero column).
    """
    weight = np.asarray(weight, np.float32)
    absmax = np.maximum(np.abs(weight.min(axis=0)), np.abs(weight.max(axis=0))).astype(np.float64)
    absmax = np.maximum(absmax, 0.0)
    scale = (2.0 * absmax / 254.0).astype(np.float32)
    scale = np.where(scale < np.finfo(np.float32).tiny, np.float32(1.0), scale)
    quantized = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
    return np.ascontiguousarray(quantized), scale


def build_bert_onnx(
    cfg: dict[str, Any],
    weights: dict[str, np.ndarray],
    *,
    with_token_type_ids: bool = True,
    metadata: dict[str, str] | None = None,
    int8: bool = False,
) -> Any:
    """Build the ONNX ``ModelProto`` of a BERT encoder.

    Parameters
    ----------
    cfg : dict
        Parsed ``config.json`` (see :func:`read_bert_config`).
    weights : dict of str to numpy.ndarray
        Output of :func:`load_bert_weights`.
    with_token_type_ids : bool
        Declare the ``token_type_ids`` input. If False, segment 0 embeddings are baked in.
    metadata : dict of str to str, optional
        Extra ``metadata_props`` stored in the model.
    int8 : bool
        Write every weight ``MatMul`` as dynamically quantised int8 (:func:`quantize_weight_int8`):
        ``DynamicQuantizeLinear`` of the input, ``MatMulInteger`` with the per-channel int8 weight,
        ``Cast`` and a ``Mul`` by the two scales; the nodes onnxruntime's ``quantize_dynamic`` writes
        (``per_channel=True``, ``QInt8``) and fuses into ``DynamicQuantizeMatMul``, written here in the
        same pass as the float graph (no second load of the model, no onnxruntime.quantization import).

    Returns
    -------
    onnx.ModelProto
        Inputs ``input_ids``, ``attention_mask`` (and ``token_type_ids``), int64
        ``[batch, sequence]``; output ``last_hidden_state`` float32 ``[batch, sequence, hidden]``.
    """
    from onnx import TensorProto, helper

    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))

    def w(name: str) -> np.ndarray:
        try:
            return np.asarray(weights[name], dtype=np.float32)
        except KeyError:
            raise ModelError(f"model.safetensors has no tensor {name!r} (not a BERT checkpoint?)") from None

    g = _GraphBuilder()

    def layer_norm(x: str, prefix: str) -> str:
        return g.op(
            "LayerNormalization",
            [
                x,
                g.const(f"{prefix}.weight", w(f"{prefix}.weight")),
                g.const(f"{prefix}.bias", w(f"{prefix}.bias")),
            ],
            axis=-1,
            epsilon=eps,
        )

    def linear(x: str, prefix: str, weight: np.ndarray | None = None, bias: np.ndarray | None = None) -> str:
        wt = (w(f"{prefix}.weight") if weight is None else weight).T  # torch Linear is (out, in)
        b = w(f"{prefix}.bias") if bias is None else bias
        if not int8:
            y = g.op("MatMul", [x, g.const(f"{prefix}.weight_t", wt)])
            return g.op("Add", [y, g.const(f"{prefix}.bias", b)])
        q, w_scale = quantize_weight_int8(wt)
        xq, x_scale, x_zero = g.op("DynamicQuantizeLinear", [x], n_out=3)
        scales = g.op("Mul", [x_scale, g.const(f"{prefix}.weight_t_scale", w_scale)])
        acc = g.op("MatMulInteger", [xq, g.const(f"{prefix}.weight_t_quantized", q), x_zero,
                                     g.const(f"{prefix}.weight_t_zero_point", np.zeros(q.shape[1], np.int8))])
        y = g.op("Mul", [g.op("Cast", [acc], to=TensorProto.FLOAT), scales])
        return g.op("Add", [y, g.const(f"{prefix}.bias", b)])

    # --- embeddings -------------------------------------------------------------------------
    word_table = g.const("word_embeddings", w("embeddings.word_embeddings.weight"))
    words = g.op("Gather", [word_table, "input_ids"], axis=0)
    seq_len = g.op("Shape", ["input_ids"], start=1, end=2)  # [S]
    pos = g.op(
        "Slice",
        [
            g.const("position_embeddings", w("embeddings.position_embeddings.weight")),
            g.const("zero_1d", np.array([0], dtype=np.int64)),
            seq_len,
            g.const("axis0_1d", np.array([0], dtype=np.int64)),
        ],
    )  # [S, H]
    type_table = w("embeddings.token_type_embeddings.weight")
    if with_token_type_ids:
        types = g.op("Gather", [g.const("token_type_embeddings", type_table), "token_type_ids"], axis=0)
        x = g.op("Add", [g.op("Add", [words, pos]), types])
    else:
        x = g.op("Add", [g.op("Add", [words, pos]), g.const("token_type_embedding_0", type_table[0])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # --- additive attention mask bias: (1 - mask) * -1e4, shape [B, 1, 1, S] --------------------
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inv = g.op("Sub", [g.const("one", np.array(1.0, dtype=np.float32)), mask_f])
    bias = g.op("Mul", [inv, g.const("mask_bias", np.array(MASK_BIAS, dtype=np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const("axes_1_2", np.array([1, 2], dtype=np.int64))])

    split_sizes = g.const("qkv_split", np.array([hidden] * 3, dtype=np.int64))
    heads_shape = g.const("heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merged_shape = g.const("merged_shape", np.array([0, 0, hidden], dtype=np.int64))
    scale = 1.0 / math.sqrt(head_dim)
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    one = "one"
    half = g.const("half", np.array(0.5, dtype=np.float32))

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        # Fused Q/K/V projection; the 1/sqrt(head_dim) score scale is folded into Q.
        wq = w(f"{p}.attention.self.query.weight").astype(np.float64) * scale
        bq = w(f"{p}.attention.self.query.bias").astype(np.float64) * scale
        wk, wv = w(f"{p}.attention.self.key.weight"), w(f"{p}.attention.self.value.weight")
        bk, bv = w(f"{p}.attention.self.key.bias"), w(f"{p}.attention.self.value.bias")
        wqkv = np.concatenate([wq, wk, wv], axis=0)  # (3 * hidden, hidden)
        bqkv = np.concatenate([bq, bk, bv], axis=0)
        qkv = linear(x, f"{p}.attention.self.qkv", wqkv.astype(np.float32), bqkv.astype(np.float32))
        q, k, v = g.op("Split", [qkv, split_sizes], n_out=3, axis=-1)
        q = g.op("Transpose", [g.op("Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])  # [B, h, S, d]
        k = g.op("Transpose", [g.op("Reshape", [k, heads_shape])], perm=[0, 2, 3, 1])  # [B, h, d, S]
        v = g.op("Transpose", [g.op("Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])  # [B, h, S, d]
        scores = g.op("Add", [g.op("MatMul", [q, k]), bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])  # [B, S, h, d]
        ctx = g.op("Reshape", [ctx, merged_shape])
        attn = linear(ctx, f"{p}.attention.output.dense")
        x = layer_norm(g.op("Add", [attn, x]), f"{p}.attention.output.LayerNorm")
        # Feed-forward with exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
        h = linear(x, f"{p}.intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, sqrt2])])
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, one])]), half])
        out = linear(h, f"{p}.output.dense")
        x = layer_norm(g.op("Add", [out, x]), f"{p}.output.LayerNorm")

    g.nodes.append(helper.make_node("Identity", [x], [OUTPUT_NAME], name="output"))
    dyn = ["batch", "sequence"]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, dyn),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dyn),
    ]
    if with_token_type_ids:
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, dyn))
    outputs = [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", "sequence", hidden])]
    graph = helper.make_graph(g.nodes, "bert_encoder", inputs, outputs, initializer=g.inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="skillsight_fast"
    )
    model.ir_version = 8  # readable by any onnxruntime >= 1.10
    meta = {
        "skillsight.hidden_size": str(hidden),
        "skillsight.max_position_embeddings": str(cfg.get("max_position_embeddings", 512)),
        "skillsight.pooled": "false",
        **({"skillsight.int8": "dynamic, per-channel symmetric weights"} if int8 else {}),
        **(metadata or {}),
    }
    helper.set_model_props(model, meta)
    if int8:
        # the value types quantize_dynamic leaves in its output: onnxruntime fuses the same nodes only
        # when they are there (SkipLayerNormalization), so the int8 answers are today's to the bit
        from onnx import shape_inference

        model = shape_inference.infer_shapes(model)
    return model


def export_bert_onnx(
    model_dir: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    with_token_type_ids: bool = True,
    source_sha256: str | None = None,
    int8_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Export a BERT-family folder (``config.json`` + ``model.safetensors``) to ONNX.

    Parameters
    ----------
    model_dir : path
        Folder with ``config.json`` and ``model.safetensors`` (plain or ``bert.``-prefixed
        names, LayerNorm ``weight/bias`` or ``gamma/beta``).
    out_path : path
        Destination ``.onnx`` file, written atomically (temp file + :func:`os.replace`).
    with_token_type_ids : bool
        Whether the graph declares a ``token_type_ids`` input.
    source_sha256 : str, optional
        SHA-256 of ``model.safetensors`` if already known (stored in the model metadata).
    int8_path : path, optional
        Also write the dynamically int8-quantised graph there (``build_bert_onnx(..., int8=True)``),
        from the same loaded weights.

    Returns
    -------
    pathlib.Path
        ``out_path``. The graph maps int64 ``[batch, sequence]`` inputs to float32
        ``last_hidden_state`` ``[batch, sequence, hidden]``.

    Raises
    ------
    ModelError
        Missing files, non-BERT config, missing tensors, or an invalid resulting graph.
    """
    import onnx

    model_dir = Path(model_dir)
    cfg = read_bert_config(model_dir)
    weights = load_bert_weights(model_dir)
    sha = source_sha256 or sha256_file(model_dir / "model.safetensors")
    # the int8 graph first: a cache holding model.onnx is complete (see encoder._prepare_cache)
    targets = ([(Path(int8_path), True)] if int8_path is not None else []) + [(Path(out_path), False)]
    for out, int8 in targets:
        model = build_bert_onnx(cfg, weights, with_token_type_ids=with_token_type_ids,
                                metadata={"skillsight.source_sha256": sha}, int8=int8)
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:  # pragma: no cover - would be a bug here
            raise ModelError(f"exported graph for {model_dir} is invalid: {exc}") from exc
        atomic_write_bytes(out, model.SerializeToString())
        logger.info("exported %s -> %s%s", model_dir, out, " (int8)" if int8 else "")
    return Path(out_path)


class _DropPreprocessAdvice(logging.Filter):
    """Drop the quantiser's advice to pre-process (not needed, see :func:`quantize_onnx_int8`) and its
    per-tensor INFO lines on the root logger (a hundred lines under ``-v`` that say nothing to a user)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING and "onnxruntime" in record.pathname.replace("\\", "/"):
            return False
        return "pre-processing before quantization" not in record.getMessage()


def quantize_onnx_int8(fp32_path: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> Path:
    """Dynamically quantize the weights of every ``MatMul`` to per-channel int8.

    Uses :func:`onnxruntime.quantization.quantize_dynamic` (``per_channel=True``,
    ``weight_type=QInt8``). Only MatMuls with a constant weight are quantized; the
    activation x activation attention MatMuls stay float32. The result is written
    atomically to ``out_path``. onnxruntime's ``quant_pre_process`` is not needed: the
    exported graph is already in the form it would produce (measured: identical int8 output).

    onnxruntime writes a shape-inferred copy beside its input under a fixed name
    (``<model>-inferred.onnx``): two first runs at once raced on it. The input is therefore linked
    (or copied) into a private temporary folder beside ``out_path`` and quantized from there.

    Returns
    -------
    pathlib.Path
        ``out_path``.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # importing it runs logging.basicConfig (matmul_nbits_quantizer): undo that, logging is the app's
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    fp32_path, out = Path(fp32_path), Path(out_path)
    if not fp32_path.is_file():
        raise ModelError(f"{fp32_path} not found: nothing to quantize")
    advice = _DropPreprocessAdvice()  # quantize_dynamic's advice to pre-process: not needed (above)
    root.addFilter(advice)
    out.parent.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix=f".{out.name}.quant-", dir=out.parent))
    try:
        source = private / "model.onnx"
        try:
            os.link(fp32_path, source)
        except OSError:  # another file system, or no hard links: a copy
            shutil.copyfile(fp32_path, source)
        with atomic_output(out, suffix=".onnx") as tmp:
            quantize_dynamic(
                str(source),
                str(tmp),
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                weight_type=QuantType.QInt8,
            )
    finally:
        root.removeFilter(advice)
        # its module-level logging calls install a root handler too: leave logging as it was
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
        shutil.rmtree(private, ignore_errors=True)
    logger.info("quantized %s -> %s", fp32_path, out)
    return out
