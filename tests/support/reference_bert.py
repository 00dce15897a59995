"""Independent float64 NumPy forward pass of a BERT encoder, used as ground truth in tests.

Written to be obviously correct rather than fast: every step follows the Hugging Face
``BertModel`` definition literally (no fused weights, no folded scales, no ONNX).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def load_reference(model_dir: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Return ``(config, weights)``; weights as float64 under plain BERT names."""
    model_dir = Path(model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    weights: dict[str, np.ndarray] = {}
    for name, value in load_file(str(model_dir / "model.safetensors")).items():
        name = name.removeprefix("bert.")
        if "LayerNorm" in name:
            name = name.replace("gamma", "weight").replace("beta", "bias")
        weights[name] = value.astype(np.float64)
    return cfg, weights


def bert_forward(
    cfg: dict, W: dict[str, np.ndarray], ids: list[int], type_ids: list[int] | None = None
) -> np.ndarray:
    """Hidden states ``(seq, hidden)`` float64 for ONE unpadded sequence of token ids."""
    n = len(ids)
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    d = H // nh
    eps = cfg.get("layer_norm_eps", 1e-12)
    type_ids = type_ids if type_ids is not None else [0] * n

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * W[p + ".weight"] + W[p + ".bias"]

    def dense(x: np.ndarray, p: str) -> np.ndarray:
        return x @ W[p + ".weight"].T + W[p + ".bias"]

    x = (
        W["embeddings.word_embeddings.weight"][ids]
        + W["embeddings.position_embeddings.weight"][np.arange(n)]
        + W["embeddings.token_type_embeddings.weight"][type_ids]
    )
    x = ln(x, "embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q = dense(x, p + ".attention.self.query")
        k = dense(x, p + ".attention.self.key")
        v = dense(x, p + ".attention.self.value")
        ctx = np.zeros((n, H))
        for h in range(nh):
            s = slice(h * d, (h + 1) * d)
            scores = q[:, s] @ k[:, s].T / math.sqrt(d)
            scores = scores - scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx[:, s] = probs @ v[:, s]
        x = ln(dense(ctx, p + ".attention.output.dense") + x, p + ".attention.output.LayerNorm")
        inter = dense(x, p + ".intermediate.dense")
        inter = 0.5 * inter * (1.0 + _erf(inter / math.sqrt(2.0)))
        x = ln(dense(inter, p + ".output.dense") + x, p + ".output.LayerNorm")
    return x


def sentence_embedding(cfg: dict, W: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """Mean of the token states (no padding exists here) divided by its L2 norm, ``(hidden,)``."""
    pooled = bert_forward(cfg, W, ids).mean(0)
    return pooled / max(np.linalg.norm(pooled), 1e-12)
