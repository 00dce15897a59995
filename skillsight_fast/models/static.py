"""Static (model2vec-format) sentence encoder: tokenization, a table lookup and a mean.

A static model is a folder in model2vec's on-disk format (``StaticModel.save_pretrained``):

- ``model.safetensors``: ``embeddings`` float (V, d), one row per tokenizer id (weights such as SIF
  are already multiplied into the rows); optionally ``weights`` (V,) and ``mapping`` (V,) int
  (model2vec's vocabulary quantisation);
- ``tokenizer.json``: the Hugging Face tokenizer;
- ``config.json``: ``{"model_type": "model2vec", "normalize": true, "hidden_dim": d, ...}``.

Encoding follows ``model2vec.StaticModel.encode``: the text is tokenized without special tokens,
unknown tokens are dropped, the first ``max_length`` ids kept, their rows averaged and the mean
L2-normalised (when ``normalize``). No onnxruntime, no torch.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError
from skillsight_fast.files import sha256_files_in_background
from skillsight_fast.models.wordpiece import FastWordPiece

logger = logging.getLogger(__name__)

#: Files a model2vec folder holds.
STATIC_FILES: tuple[str, ...] = ("model.safetensors", "tokenizer.json", "config.json")


def is_static_model_dir(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a folder in model2vec's format (config.json says ``model2vec``)."""
    p = Path(path)
    if not (p.is_dir() and all((p / f).is_file() for f in STATIC_FILES)):
        return False
    try:
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(cfg, dict) and cfg.get("model_type") == "model2vec"


class StaticEncoder:
    """Encode texts as the normalised mean of per-token rows of a static table.

    Parameters
    ----------
    embeddings : numpy.ndarray
        float (V, d) table, one row per token id (or per cluster when ``mapping`` is given).
    tokenizer : tokenizers.Tokenizer
    model_id, checksum : str
        Identity recorded in an index.
    normalize : bool
        L2-normalise each sentence vector (model2vec's ``normalize``).
    weights : numpy.ndarray, optional
        (V,) per-token multipliers (model2vec vocabulary quantisation).
    mapping : numpy.ndarray, optional
        (V,) token id -> row of ``embeddings``.
    max_length : int or None
        Keep only the first ``max_length`` tokens of a text (model2vec's default 512).

    Attributes
    ----------
    dim : int
    """

    def __init__(
        self,
        embeddings: np.ndarray,
        tokenizer: Any,
        *,
        model_id: str,
        checksum: str,
        normalize: bool = True,
        weights: np.ndarray | None = None,
        mapping: np.ndarray | None = None,
        max_length: int | None = 512,
    ) -> None:
        table = np.ascontiguousarray(embeddings, dtype=np.float32)
        if table.ndim != 2:
            raise ModelError(f"static embeddings must be 2-D, got shape {table.shape}")
        vocab = tokenizer.get_vocab()
        n_tokens = max(vocab.values()) + 1 if vocab else 0
        if mapping is None and table.shape[0] != n_tokens:
            raise ModelError(
                f"static table has {table.shape[0]} rows but the tokenizer has {n_tokens} tokens")
        # one row per token id: fold the mapping and the weights in once, so encoding is one gather
        if mapping is not None:
            table = table[np.asarray(mapping, dtype=np.int64)]
        if weights is not None:
            table = table * np.asarray(weights, dtype=np.float32)[:, None]
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.tokenizer = tokenizer
        tokenizer.no_truncation()
        tokenizer.no_padding()
        #: Exact ASCII fast path of BERT WordPiece tokenizers (None for any other pipeline).
        self.fast = FastWordPiece.from_tokenizer(tokenizer)
        unk = getattr(tokenizer.model, "unk_token", None)
        self.unk_id: int | None = vocab.get(unk) if unk is not None else None
        self.model_id = model_id
        self.checksum = checksum
        self.normalize = normalize
        self.max_length = max_length
        self.dim = int(self.table.shape[1])
        #: The model2vec folder it was loaded from (None when built in memory).
        self.folder: Path | None = None

    def __repr__(self) -> str:
        return f"StaticEncoder(model_id={self.model_id!r}, dim={self.dim}, vocab={self.table.shape[0]})"

    @property
    def quantized(self) -> bool:
        """Static tables are not int8-quantised graphs."""
        return False

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text: no special tokens, unknown tokens dropped, truncated to ``max_length``."""
        texts = list(texts)
        if self.fast is not None:
            all_ids = self.fast.encode_ids(texts)
        else:
            all_ids = [enc.ids for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False)]
        out = []
        for raw in all_ids:
            ids = np.asarray(raw, dtype=np.int64)
            if self.unk_id is not None:
                ids = ids[ids != self.unk_id]
            if self.max_length is not None:
                ids = ids[: self.max_length]
            out.append(ids)
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), dim): the mean of each text's token rows, L2-normalised.

        A text without any known token gives a zero row.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, ids in enumerate(self.tokenize(texts)):
            if ids.size:
                out[i] = self.table[ids].mean(axis=0)
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.where(norms > 0, norms, 1.0)
        return out

    # ------------------------------------------------------------------ persistence
    def save(self, folder: str | os.PathLike[str], config: dict[str, Any] | None = None) -> Path:
        """Write the model in model2vec's format (loadable by ``StaticModel.from_pretrained``)."""
        return save_static_model(folder, self.table, self.tokenizer, config=config, normalize=self.normalize)


def save_static_model(
    folder: str | os.PathLike[str],
    embeddings: np.ndarray,
    tokenizer: Any,
    *,
    config: dict[str, Any] | None = None,
    normalize: bool = True,
) -> Path:
    """Write ``embeddings`` + ``tokenizer`` as model2vec's ``save_pretrained`` does.

    Files: ``model.safetensors`` (key ``embeddings``), ``tokenizer.json``, ``config.json`` (with
    ``model_type: model2vec``, ``hidden_dim``, ``normalize``, ``embedding_dtype``) and
    ``modules.json`` (the sentence-transformers StaticEmbedding layout model2vec also writes).
    """
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    emb = np.ascontiguousarray(embeddings)
    save_file({"embeddings": emb}, str(folder / "model.safetensors"))
    tokenizer.save(str(folder / "tokenizer.json"), pretty=False)
    cfg = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": "",
        "apply_pca": None,
        "sif_coefficient": None,
        "hidden_dim": int(emb.shape[1]),
        "seq_length": 1000000,
        "normalize": bool(normalize),
        "pooling": "mean",
        **(config or {}),
        "embedding_dtype": np.dtype(emb.dtype).name,
    }
    (folder / "config.json").write_text(json.dumps(cfg, indent=4), encoding="utf-8")
    modules = [{"idx": 0, "name": "0", "path": ".", "type": "sentence_transformers.models.StaticEmbedding"}]
    if normalize:
        modules.append({"idx": 1, "name": "1", "path": "1_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules, indent=4), encoding="utf-8")
    logger.info("saved static model (%d x %d) to %s", emb.shape[0], emb.shape[1], folder)
    return folder


def _mapped_table(path: Path) -> np.ndarray | None:
    """The ``embeddings`` tensor of a safetensors file as a read-only memory map, or None.

    safetensors is an 8-byte little-endian header length, a JSON header giving each tensor's dtype,
    shape and byte range, then the data. When the file holds just a float32 ``embeddings`` table
    (what :func:`save_static_model` writes), mapping it spares reading and copying the whole table
    (47 MB for MiniLM's vocabulary): a search touches only the rows of its tokens. Anything else
    (other dtypes, ``weights``/``mapping``, an inconsistent header) returns None and is read by
    the safetensors library, which reports what is wrong.
    """
    import struct

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) != 8:
                return None
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, 1 << 24):
                return None
            header = json.loads(fh.read(n))
        entry = header["embeddings"]
        shape, (begin, end) = entry["shape"], entry["data_offsets"]
        if (set(header) - {"embeddings", "__metadata__"} or entry["dtype"] != "F32" or len(shape) != 2
                or not all(isinstance(x, int) and x > 0 for x in (*shape, end)) or not 0 <= begin < end
                or end - begin != shape[0] * shape[1] * 4 or 8 + n + end > size):
            return None
        return np.memmap(path, dtype="<f4", mode="r", offset=8 + n + begin, shape=(shape[0], shape[1]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error):
        return None


def load_static_encoder(folder: str | os.PathLike[str], *, max_length: int | None = 512) -> StaticEncoder:
    """Load a model2vec-format folder (ours or one written by model2vec) as a :class:`StaticEncoder`.

    Raises
    ------
    ModelError
        Missing files, unreadable config or tensors, or a table that does not match the tokenizer.
    """
    from safetensors import safe_open
    from tokenizers import Tokenizer

    folder = Path(folder)
    missing = [f for f in STATIC_FILES if not (folder / f).is_file()]
    if missing:
        raise ModelError(f"{folder} is not a model2vec folder: missing {', '.join(missing)}")
    digest = sha256_files_in_background([folder / "model.safetensors"])  # while the tokenizer loads
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        emb, weights, mapping = _mapped_table(folder / "model.safetensors"), None, None
        if emb is None:
            with safe_open(str(folder / "model.safetensors"), framework="numpy") as f:
                keys = set(f.keys())
                if "embeddings" not in keys:
                    raise ModelError(f"{folder / 'model.safetensors'} has no 'embeddings' tensor")
                emb = f.get_tensor("embeddings")
                weights = f.get_tensor("weights") if "weights" in keys else None
                mapping = f.get_tensor("mapping") if "mapping" in keys else None
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except ModelError:
        raise
    except Exception as exc:  # safetensors / tokenizers raise their own types
        raise ModelError(f"cannot load the static model in {folder}: {exc}") from exc
    (checksum,) = digest()
    if isinstance(checksum, OSError):
        raise ModelError(f"cannot read {folder / 'model.safetensors'}: {checksum}")
    encoder = StaticEncoder(
        emb, tok, model_id=folder.name, checksum=checksum,
        normalize=bool(cfg.get("normalize", False)), weights=weights, mapping=mapping,
        max_length=max_length,
    )
    encoder.folder = folder.absolute()
    return encoder


# ---------------------------------------------------------------------- the asymmetric tier
#: Ridge coefficient of the static -> transformer map (fixed, not tuned; experiments/static_query_encoder.py).
MAP_RIDGE = 1.0


def fit_query_map(static_vectors: np.ndarray, target_vectors: np.ndarray,
                  ridge: float = MAP_RIDGE) -> np.ndarray:
    """The affine map from static vectors to the transformer's space, fitted on the library's texts.

    ``W`` minimises ``|[s 1] W − t|² + ridge·|W|²`` over the rows (``s`` the static vector of a skill
    text, ``t`` the transformer vector of the same text): the transformer is the teacher, no labels.

    Parameters
    ----------
    static_vectors : float (N, d_s)
    target_vectors : float (N, d_t)
    ridge : float

    Returns
    -------
    numpy.ndarray
        float32 (d_s + 1, d_t); the last row is the bias.
    """
    x = np.asarray(static_vectors, dtype=np.float64)
    y = np.asarray(target_vectors, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ModelError(f"cannot fit a query map from {x.shape} onto {y.shape}")
    xb = np.hstack([x, np.ones((x.shape[0], 1))])
    a = xb.T @ xb + ridge * np.eye(xb.shape[1])
    return np.linalg.solve(a, xb.T @ y).astype(np.float32)


def apply_query_map(vectors: np.ndarray, query_map: np.ndarray) -> np.ndarray:
    """Map static vectors into the transformer's space and L2-normalise, float32 (n, d_t).

    A zero input row (a text without known tokens) maps onto the normalised bias.
    """
    y = np.asarray(vectors, dtype=np.float32) @ query_map[:-1] + query_map[-1]
    norms = np.linalg.norm(y, axis=1, keepdims=True)
    return np.ascontiguousarray(y / np.where(norms > 0, norms, 1.0), dtype=np.float32)
