"""Cross-encoder reranker on ONNX: score (query, document) pairs with a BERT + 1-logit head.

The architecture is that of ``cross-encoder/ms-marco-MiniLM-L-6-v2`` (BertForSequenceClassification:
BERT encoder, ``pooler`` = tanh(W·h_[CLS] + b), ``classifier`` = one logit). Its trained weights are
not obtainable offline here, so :func:`load_cross_encoder` without a path builds the same graph from
the bundled all-MiniLM-L6-v2 encoder weights (encoder and pooler) plus a **seeded, untrained**
classification head. Such a model has the exact cost of the real reranker (same layers, same
sequence lengths), so it is right for timing, but its scores are not meaningful for quality:
``CrossEncoder.trained`` is False for it.

A real trained cross-encoder can be used through ``load_cross_encoder(path)`` with either

- a BERT-family folder (``config.json`` + ``model.safetensors`` with ``classifier.weight`` +
  ``tokenizer.json``), exported here once without torch; or
- a ready ``.onnx`` file with ``tokenizer.json`` beside it (inputs ``input_ids``, ``attention_mask``,
  optionally ``token_type_ids``; first output ``[batch, n_labels]`` logits).

Examples
--------
>>> from skillsight_fast.lab.baselines.cross_encoder import load_cross_encoder
>>> ce = load_cross_encoder()                                        # doctest: +SKIP
>>> ce.score("merge two pdf files", ["pdf tools", "git helper"])      # doctest: +SKIP
array([...], dtype=float32)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError
from skillsight_fast.files import atomic_write_bytes, sha256_file
from skillsight_fast.models.export import OUTPUT_NAME, build_bert_onnx, load_bert_weights, read_bert_config

logger = logging.getLogger(__name__)

#: Name of the architecture the default (untrained) reranker reproduces.
ARCHITECTURE = "cross-encoder/ms-marco-MiniLM-L-6-v2"
LOGITS = "logits"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def append_classification_head(
    model: Any,
    pooler_weight: np.ndarray,
    pooler_bias: np.ndarray,
    classifier_weight: np.ndarray,
    classifier_bias: np.ndarray,
) -> Any:
    """Turn a BERT encoder graph (output ``last_hidden_state``) into a sequence classifier.

    Adds ``logits = classifier(tanh(pooler(h[:, 0])))`` as the only graph output.

    Parameters
    ----------
    model : onnx.ModelProto
        Output of :func:`~skillsight_fast.models.export.build_bert_onnx` (modified in place).
    pooler_weight, pooler_bias : float32 (H, H), (H,)
        torch ``Linear`` layout (out, in).
    classifier_weight, classifier_bias : float32 (L, H), (L,)

    Returns
    -------
    onnx.ModelProto
        The same object, with output ``logits`` float32 ``[batch, L]``.
    """
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    n_labels = int(classifier_weight.shape[0])

    def const(name: str, value: np.ndarray) -> str:
        graph.initializer.append(numpy_helper.from_array(np.array(value, order="C"), name))  # keeps 0-d
        return name

    nodes = [
        helper.make_node("Gather", [OUTPUT_NAME, const("cls_index", np.array(0, np.int64))], ["cls_state"],
                         name="cls_gather", axis=1),
        helper.make_node("MatMul", ["cls_state", const("pooler.weight_t", pooler_weight.T.astype(np.float32))],
                         ["pooler_mm"], name="pooler_mm"),
        helper.make_node("Add", ["pooler_mm", const("pooler.bias", pooler_bias.astype(np.float32))],
                         ["pooler_lin"], name="pooler_add"),
        helper.make_node("Tanh", ["pooler_lin"], ["pooled"], name="pooler_tanh"),
        helper.make_node("MatMul", ["pooled", const("classifier.weight_t", classifier_weight.T.astype(np.float32))],
                         ["cls_mm"], name="classifier_mm"),
        helper.make_node("Add", ["cls_mm", const("classifier.bias", classifier_bias.astype(np.float32))],
                         [LOGITS], name="classifier_add"),
    ]
    graph.node.extend(nodes)
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, ["batch", n_labels]))
    return model


def export_cross_encoder_onnx(
    model_dir: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    seed: int | None = None,
) -> tuple[Path, bool]:
    """Export a BERT folder as a cross-encoder ONNX graph (no torch).

    Parameters
    ----------
    model_dir : path
        ``config.json`` + ``model.safetensors``. If the weights hold ``classifier.weight`` (a trained
        BertForSequenceClassification) that head is used; otherwise a head is drawn from
        N(0, initializer_range²) with ``seed`` (an untrained model).
    out_path : path
        Destination ``.onnx`` (written atomically).
    seed : int, optional
        Seed of the untrained head (default 0).

    Returns
    -------
    (pathlib.Path, bool)
        The file written and whether the classification head was trained.
    """
    import onnx

    model_dir = Path(model_dir)
    cfg = read_bert_config(model_dir)
    weights = load_bert_weights(model_dir)
    hidden = cfg["hidden_size"]
    std = float(cfg.get("initializer_range", 0.02))
    rng = np.random.default_rng(0 if seed is None else seed)
    trained = "classifier.weight" in weights and seed is None
    if trained:
        cw = np.asarray(weights["classifier.weight"], np.float32)
        cb = np.asarray(weights["classifier.bias"], np.float32)
    else:
        cw = rng.normal(0.0, std, size=(1, hidden)).astype(np.float32)
        cb = np.zeros(1, np.float32)
    if "pooler.dense.weight" in weights:
        pw = np.asarray(weights["pooler.dense.weight"], np.float32)
        pb = np.asarray(weights["pooler.dense.bias"], np.float32)
    else:  # no pooler in the checkpoint: seeded like the head
        pw = rng.normal(0.0, std, size=(hidden, hidden)).astype(np.float32)
        pb = np.zeros(hidden, np.float32)
        trained = False
    sha = sha256_file(model_dir / "model.safetensors")
    meta = {
        "skillsight.source_sha256": sha,
        "skillsight.kind": "cross-encoder",
        "skillsight.trained": "true" if trained else "false",
        "skillsight.architecture": ARCHITECTURE if not trained else str(cfg.get("_name_or_path", model_dir.name)),
        "skillsight.head_seed": "" if trained else str(0 if seed is None else seed),
    }
    model = build_bert_onnx(cfg, weights, with_token_type_ids=True, metadata=meta)
    append_classification_head(model, pw, pb, cw, cb)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:  # pragma: no cover - would be a bug here
        raise ModelError(f"cross-encoder graph for {model_dir} is invalid: {exc}") from exc
    out = Path(out_path)
    atomic_write_bytes(out, model.SerializeToString())
    logger.info("exported cross-encoder %s -> %s (trained head: %s)", model_dir, out, trained)
    return out, trained


def int8_copy(onnx_path: str | os.PathLike[str]) -> Path:
    """The dynamically int8-quantised copy of a cross-encoder graph, ``<name>.int8.onnx`` beside it
    (made once by :func:`~skillsight_fast.models.export.quantize_onnx_int8`: per-channel int8 weights of
    every MatMul with a constant weight, the task encoder's own recipe; reused afterwards)."""
    from skillsight_fast.models.export import quantize_onnx_int8

    src = Path(onnx_path)
    out = src.with_name(src.stem + ".int8.onnx")
    if not out.is_file():
        quantize_onnx_int8(src, out)
    return out


class CrossEncoder:
    """Score (query, document) pairs with an ONNX cross-encoder.

    Parameters
    ----------
    onnx_path : path
        Graph with inputs ``input_ids``, ``attention_mask`` (and optionally ``token_type_ids``),
        int64 ``[batch, sequence]``; first output logits ``[batch, n_labels]`` (n_labels 1: that
        logit is the score; 2: the second logit, the "relevant" class).
    tokenizer_path : path
        Hugging Face ``tokenizer.json`` (pairs are encoded as ``[CLS] q [SEP] d [SEP]``).
    max_length : int
        Token budget per pair (longest-first truncation), 512 like ms-marco-MiniLM-L-6-v2.
    batch_size : int
        Pairs per ``session.run``.
    threads : int, optional
        onnxruntime intra-op threads (default: all cores).
    trained : bool, optional
        Whether the scores are meaningful. Default: the ONNX metadata ``skillsight.trained``
        (True when absent, e.g. for a model exported elsewhere).
    int8 : bool
        Run the dynamically int8-quantised copy of ``onnx_path`` (:func:`int8_copy`).

    Attributes
    ----------
    trained : bool
    max_length : int
    """

    def __init__(
        self,
        onnx_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        max_length: int = 512,
        batch_size: int = 16,
        threads: int | None = None,
        trained: bool | None = None,
        int8: bool = False,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path, tokenizer_path = Path(onnx_path), Path(tokenizer_path)
        if not onnx_path.is_file():
            raise ModelError(f"cross-encoder ONNX model {onnx_path} not found")
        if int8:
            onnx_path = int8_copy(onnx_path)
        if tokenizer_path.is_dir():
            tokenizer_path = tokenizer_path / "tokenizer.json"
        if not tokenizer_path.is_file():
            raise ModelError(f"{tokenizer_path} not found: the cross-encoder needs a tokenizer.json")
        if batch_size < 1 or max_length < 4:
            raise ValueError("batch_size must be >= 1 and max_length >= 4")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(str(onnx_path), sess_options=options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"onnxruntime cannot load {onnx_path}: {exc}") from exc
        declared = {i.name: i for i in self._session.get_inputs()}
        if "input_ids" not in declared or set(declared) - set(_INPUTS):
            raise ModelError(f"{onnx_path}: unsupported inputs {sorted(declared)}")
        self._feeds = {n: (np.int32 if "int32" in declared[n].type else np.int64) for n in _INPUTS if n in declared}
        out = self._session.get_outputs()[0]
        if len(out.shape) != 2:
            raise ModelError(f"{onnx_path}: output {out.name!r} has shape {out.shape}, expected [batch, labels]")
        self._output = out.name
        meta = self._session.get_modelmeta().custom_metadata_map
        max_pos = int(meta.get("skillsight.max_position_embeddings", 0) or 0)
        self.max_length = min(max_length, max_pos) if max_pos else max_length
        self.trained = (meta.get("skillsight.trained", "true") == "true") if trained is None else bool(trained)
        self.architecture = meta.get("skillsight.architecture", onnx_path.parent.name)
        self.onnx_path = onnx_path
        self.batch_size = batch_size
        self.threads = options.intra_op_num_threads
        self.int8 = bool(int8)
        tok = Tokenizer.from_file(str(tokenizer_path))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_length, strategy="longest_first")
        self._tokenizer = tok
        pad = tok.token_to_id("[PAD]")
        self._pad_id = 0 if pad is None else int(pad)

    def __repr__(self) -> str:
        return f"CrossEncoder({self.onnx_path}, trained={self.trained}, max_length={self.max_length})"

    def describe(self) -> dict[str, Any]:
        """How this reranker runs: architecture, weights, token budget, batch, threads (the bench's record)."""
        return {"architecture": self.architecture, "trained": self.trained, "int8": self.int8,
                "max_length": self.max_length, "batch_size": self.batch_size, "threads": self.threads}

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        n = len(encodings)
        ids = np.full((n, width), self._pad_id, np.int64)
        mask = np.zeros((n, width), np.int64)
        types = np.zeros((n, width), np.int64)
        for r, e in enumerate(encodings):
            m = len(e.ids)
            ids[r, :m] = e.ids
            mask[r, :m] = 1
            types[r, :m] = e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {k: arrays[k].astype(t, copy=False) for k, t in self._feeds.items()}
        logits = np.asarray(self._session.run([self._output], feed)[0], np.float32)
        return logits[:, 0] if logits.shape[1] == 1 else logits[:, -1]

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Score (query, document) pairs, float32 (n,) (higher = more relevant).

        Pairs are sorted by length so each batch carries little padding; output is in input order.
        """
        pairs = list(pairs)
        out = np.zeros(len(pairs), np.float32)
        if not pairs:
            return out
        enc = self._tokenizer.encode_batch([(q, d) for q, d in pairs])
        order = np.argsort([-len(e.ids) for e in enc], kind="stable")
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([enc[i] for i in idx])
        return out

    def score(self, query: str, docs: Sequence[str]) -> np.ndarray:
        """Relevance of each document to ``query``, float32 (len(docs),).

        Parameters
        ----------
        query : str
        docs : sequence of str

        Returns
        -------
        numpy.ndarray
            One logit per document (meaningless when ``trained`` is False).
        """
        if isinstance(docs, str):
            raise TypeError("docs must be a sequence of strings, not one string")
        return self.score_pairs([(query, d) for d in docs])

    def rerank(self, query: str, docs: Sequence[str], k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Order ``docs`` by score: (positions best first, their scores), at most ``k``."""
        s = self.score(query, docs)
        order = np.argsort(-s, kind="stable")[: k or len(docs)]
        return order, s[order]


def load_cross_encoder(
    path: str | os.PathLike[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    max_length: int = 512,
    batch_size: int = 16,
    threads: int | None = None,
    int8: bool = False,
) -> CrossEncoder:
    """A ready cross-encoder.

    Parameters
    ----------
    path : path, optional
        ``None``: the ms-marco-MiniLM-L-6-v2 architecture built from the bundled all-MiniLM-L6-v2
        weights with a seeded untrained head (``trained`` False; exported once into the cache).
        A BERT folder with ``config.json`` + ``model.safetensors`` + ``tokenizer.json``: exported once
        (its ``classifier`` head is used if present). A ``.onnx`` file (``tokenizer.json`` beside it)
        or a folder with ``model.onnx`` + ``tokenizer.json``: used as is.
    cache_dir : path, optional
        Cache root (default :func:`skillsight_fast.models.cache_root`).
    seed : int
        Seed of the untrained head (only when no trained head exists).
    max_length, batch_size, threads
        See :class:`CrossEncoder`.
    int8 : bool
        Run a dynamically int8-quantised copy of the graph (:func:`int8_copy`: every MatMul with a
        constant weight, per channel; what a CPU user gets from onnxruntime's ``quantize_dynamic``).

    Returns
    -------
    CrossEncoder
    """
    from skillsight_fast.models.encoder import _copy_atomic, cache_root
    from skillsight_fast.models.registry import DEFAULT_MODEL, find_model_dir, get_spec

    kwargs = {"max_length": max_length, "batch_size": batch_size, "threads": threads, "int8": int8}
    root = cache_root(cache_dir)
    if path is None:
        spec = get_spec(DEFAULT_MODEL)
        assert spec is not None
        model_dir = find_model_dir(spec.name)
        target = root / f"ms-marco-MiniLM-L-6-v2-untrained-{spec.sha256[:12]}-seed{seed}"
        onnx_file = target / "model.onnx"
        if not onnx_file.is_file():
            target.mkdir(parents=True, exist_ok=True)
            export_cross_encoder_onnx(model_dir, onnx_file, seed=seed)
        if not (target / "tokenizer.json").is_file():
            _copy_atomic(model_dir / "tokenizer.json", target / "tokenizer.json")
        return CrossEncoder(onnx_file, target / "tokenizer.json", **kwargs)
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise ModelError(f"cross-encoder path {p} does not exist")
    if p.is_dir() and (p / "config.json").is_file() and not (p / "model.onnx").is_file():
        sha = sha256_file(p / "model.safetensors")
        target = root / f"cross-{p.name}-{sha[:12]}"
        onnx_file = target / "model.onnx"
        if not onnx_file.is_file():
            target.mkdir(parents=True, exist_ok=True)
            export_cross_encoder_onnx(p, onnx_file, seed=None)
        if not (target / "tokenizer.json").is_file():
            _copy_atomic(p / "tokenizer.json", target / "tokenizer.json")
        return CrossEncoder(onnx_file, target / "tokenizer.json", **kwargs)
    onnx_file = p / "model.onnx" if p.is_dir() else p
    if onnx_file.suffix != ".onnx" or not onnx_file.is_file():
        raise ModelError(f"{p} is neither a .onnx file, a folder with model.onnx, nor a BERT folder")
    return CrossEncoder(onnx_file, onnx_file.parent / "tokenizer.json", **kwargs)


#: The smallest reranker a CPU user would pick: FlashRank's default, cross-encoder/ms-marco-TinyBERT-L-2-v2
#: (BertForSequenceClassification, 2 layers, hidden 128, 2 heads, FFN 512, 512 positions, uncased
#: WordPiece vocabulary of 30,522, one logit).
TINYBERT_ARCHITECTURE = "cross-encoder/ms-marco-TinyBERT-L-2-v2"
TINYBERT_CONFIG: dict[str, Any] = {
    "model_type": "bert", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 512, "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 30522,
    "hidden_act": "gelu", "layer_norm_eps": 1e-12, "initializer_range": 0.02,
}


def random_bert_weights(cfg: dict[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded N(0, initializer_range²) weights (LayerNorm 1 / 0, biases 0) for a BERT of ``cfg``,
    with the names of :func:`~skillsight_fast.models.export.load_bert_weights` (pooler included)."""
    rng = np.random.default_rng(seed)
    std = float(cfg.get("initializer_range", 0.02))
    h, ff = cfg["hidden_size"], cfg["intermediate_size"]

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    out: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": normal(cfg["vocab_size"], h),
        "embeddings.position_embeddings.weight": normal(cfg["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": normal(cfg["type_vocab_size"], h),
        "embeddings.LayerNorm.weight": np.ones(h, np.float32), "embeddings.LayerNorm.bias": np.zeros(h, np.float32),
        "pooler.dense.weight": normal(h, h), "pooler.dense.bias": np.zeros(h, np.float32),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name, (n_out, n_in) in {"attention.self.query": (h, h), "attention.self.key": (h, h),
                                    "attention.self.value": (h, h), "attention.output.dense": (h, h),
                                    "intermediate.dense": (ff, h), "output.dense": (h, ff)}.items():
            out[f"{p}.{name}.weight"] = normal(n_out, n_in)
            out[f"{p}.{name}.bias"] = np.zeros(n_out, np.float32)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            out[f"{p}.{name}.weight"] = np.ones(h, np.float32)
            out[f"{p}.{name}.bias"] = np.zeros(h, np.float32)
    return out


def load_tinybert_reranker(*, cache_dir: str | os.PathLike[str] | None = None, seed: int = 0,
                           max_length: int = 512, batch_size: int = 16, threads: int | None = None,
                           int8: bool = False) -> CrossEncoder:
    """The ms-marco-TinyBERT-L-2-v2 architecture with **seeded random** weights, for timing only.

    Its trained weights are not obtainable offline here; the graph has the trained model's layers,
    widths and sequence lengths, hence its cost, but ``trained`` is False and its scores mean
    nothing. The tokenizer is the bundled MiniLM's (the same uncased 30,522-token WordPiece
    vocabulary as TinyBERT's). Exported once into the cache; ``int8``: its quantised copy (FlashRank
    ships TinyBERT-L-2 quantised).
    """
    import onnx

    from skillsight_fast.models.encoder import _copy_atomic, cache_root
    from skillsight_fast.models.registry import DEFAULT_MODEL, find_model_dir

    target = cache_root(cache_dir) / f"ms-marco-TinyBERT-L-2-v2-random-seed{seed}"
    onnx_file = target / "model.onnx"
    if not onnx_file.is_file():
        target.mkdir(parents=True, exist_ok=True)
        cfg = dict(TINYBERT_CONFIG)
        weights = random_bert_weights(cfg, seed)
        meta = {"skillsight.kind": "cross-encoder", "skillsight.trained": "false",
                "skillsight.architecture": TINYBERT_ARCHITECTURE, "skillsight.head_seed": str(seed)}
        model = build_bert_onnx(cfg, weights, with_token_type_ids=True, metadata=meta)
        rng = np.random.default_rng(seed + 1)
        h = cfg["hidden_size"]
        append_classification_head(model, weights["pooler.dense.weight"], weights["pooler.dense.bias"],
                                   rng.normal(0.0, 0.02, size=(1, h)).astype(np.float32), np.zeros(1, np.float32))
        onnx.checker.check_model(model)
        atomic_write_bytes(onnx_file, model.SerializeToString())
    if not (target / "tokenizer.json").is_file():
        _copy_atomic(find_model_dir(DEFAULT_MODEL) / "tokenizer.json", target / "tokenizer.json")
    return CrossEncoder(onnx_file, target / "tokenizer.json", max_length=max_length, batch_size=batch_size,
                        threads=threads, int8=int8)
