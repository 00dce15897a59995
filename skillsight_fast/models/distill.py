"""Distil a static (model2vec-format) encoder from the project's ONNX transformer, without torch.

The recipe is model2vec's ``distill``: every vocabulary token is run through the transformer once
as ``[CLS] token [SEP]`` and its output states mean-pooled; optionally PCA; then each row is
multiplied by a Zipf/SIF weight ``a / (a + p(rank))`` with ``p`` the Zipf probability of the token's
rank (token id order, as model2vec assumes) and ``a`` the SIF coefficient (1e-4 by default).
Special tokens and ``[unusedN]`` get zero rows (model2vec drops them from the vocabulary; keeping
the rows at zero keeps the tokenizer unchanged).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError
from skillsight_fast.files import umask_mode
from skillsight_fast.models.static import StaticEncoder, is_static_model_dir, save_static_model
from skillsight_fast.progress import still

logger = logging.getLogger(__name__)

DEFAULT_SIF = 1e-4
_REMOVE = re.compile(r"\[unused\d+\]")


def zipf_sif_weights(n: int, sif_coefficient: float | None = DEFAULT_SIF) -> np.ndarray:
    """model2vec's ``compute_weights``: ``a / (a + p_r)`` with ``p_r ∝ 1 / (r + 2)``, float64 (n,)."""
    if sif_coefficient is None:
        return np.ones(n)
    if not 0 < sif_coefficient < 1:
        raise ValueError("sif_coefficient must be in (0, 1)")
    inv_rank = 1.0 / np.arange(2, n + 2)
    proba = inv_rank / inv_rank.sum()
    return sif_coefficient / (sif_coefficient + proba)


def pca(x: np.ndarray, dims: int | None) -> np.ndarray:
    """Centre and project onto the top ``dims`` principal axes (sklearn's ``PCA.fit_transform``)."""
    if dims is None:
        return x
    dims = min(dims, x.shape[1])
    centred = x.astype(np.float64) - x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return (centred @ vt[:dims].T).astype(np.float32)


def distill(
    encoder: object,
    *,
    pca_dims: int | None = None,
    sif_coefficient: float | None = DEFAULT_SIF,
    token_ids: Sequence[int] | None = None,
    batch_size: int = 128,
) -> StaticEncoder:
    """Distil a :class:`StaticEncoder` from an :class:`~skillsight_fast.models.encoder.OnnxEncoder`.

    Parameters
    ----------
    encoder : OnnxEncoder
        The teacher (its tokenizer becomes the static model's tokenizer).
    pca_dims : int, optional
        PCA dimension; None keeps the teacher's dimension and axes.
    sif_coefficient : float or None
        SIF coefficient of the Zipf weights; None = no weighting.
    token_ids : sequence of int, optional
        Only these tokens get a row (the rest stay zero): tests and small vocabularies.
    batch_size : int
        Tokens per transformer call (384 rows of a MatMul: as fast per token as 512 tokens, and the
        progress line comes every few seconds even on a loaded machine).

    Returns
    -------
    StaticEncoder
        ``model_id`` ``<teacher>-static``; ``checksum`` set from the table's bytes.
    """
    from skillsight_fast.files import sha256_bytes

    tok = encoder._tokenizer  # type: ignore[attr-defined]
    vocab = tok.get_vocab()
    n = max(vocab.values()) + 1
    specials = {t for t in vocab if (t.startswith("[") and t.endswith("]")) and not t.startswith("##")}
    keep = np.zeros(n, bool)
    for t, i in vocab.items():
        if t not in specials and not _REMOVE.fullmatch(t):
            keep[i] = True
    if token_ids is not None:
        sub = np.zeros(n, bool)
        sub[np.asarray(list(token_ids), dtype=np.int64)] = True
        keep &= sub
    ids = np.nonzero(keep)[0]
    cls, sep = vocab.get("[CLS]"), vocab.get("[SEP]")
    rows_out = np.zeros((len(ids), encoder.dim), np.float32)  # type: ignore[attr-defined]
    bar = getattr(encoder, "bar", None)  # a progress wrapper (skillsight_fast.progress.ProgressEncoder)
    with (bar(len(ids), "distilling the static encoder (once)") if bar is not None
          else still("distilling the static encoder (once)")) as shown:
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            rows = [[cls, int(t), sep] if cls is not None and sep is not None else [int(t)] for t in chunk]
            _, pooled = encoder._run(rows)  # type: ignore[attr-defined]
            rows_out[start : start + len(chunk)] = pooled
            if shown is not None:
                shown.update(len(chunk))
    logger.info("distilled %d token vectors from %s", len(ids), getattr(encoder, "model_id", "?"))
    rows_out = pca(rows_out, pca_dims)
    w = zipf_sif_weights(int(keep.sum()) if token_ids is None else len(ids), sif_coefficient)
    # rank = position among kept tokens in id order (model2vec's sorted vocabulary)
    rows_out = rows_out * w[: len(ids), None].astype(np.float32)
    table = np.zeros((n, rows_out.shape[1]), np.float32)
    table[ids] = rows_out
    from tokenizers import Tokenizer

    student_tok = Tokenizer.from_str(tok.to_str())
    checksum = sha256_bytes(table.tobytes())
    return StaticEncoder(table, student_tok, model_id=f"{encoder.model_id}-static",  # type: ignore[attr-defined]
                         checksum=checksum, normalize=True)


def distill_to_folder(
    encoder: object,
    folder: str | os.PathLike[str],
    *,
    pca_dims: int | None = None,
    sif_coefficient: float | None = DEFAULT_SIF,
    token_ids: Sequence[int] | None = None,
) -> Path:
    """Distil and save in model2vec's format; returns ``folder``."""
    static = distill(encoder, pca_dims=pca_dims, sif_coefficient=sif_coefficient, token_ids=token_ids)
    return save_static_model(
        folder, static.table, static.tokenizer,
        config={"tokenizer_name": getattr(encoder, "model_id", ""), "apply_pca": pca_dims,
                "sif_coefficient": sif_coefficient},
    )


def default_static_folder(model: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the static model distilled from ``model`` lives in the cache
    (``<cache>/static/<name>-static``)."""
    from skillsight_fast.models.encoder import cache_root

    return cache_root(cache_dir) / "static" / f"{Path(str(model)).name}-static"


def resolve_static_model(query_model: str | os.PathLike[str] | None, teacher_model: str, *,
                         teacher: Any = None, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The model2vec folder of a static tier: ``query_model`` if given, else the one distilled from
    ``teacher_model`` (distilled into the cache on first use: about a minute on two cores).

    Raises
    ------
    ModelError
        ``query_model`` is not a model2vec folder.
    """
    if query_model is not None:
        folder = Path(query_model).expanduser().absolute()
        if not is_static_model_dir(folder):
            raise ModelError(f"{folder} is not a model2vec folder (config.json with model_type model2vec, "
                             "model.safetensors, tokenizer.json)")
        return folder
    folder = default_static_folder(teacher_model, cache_dir)
    if not is_static_model_dir(folder):
        import shutil
        import tempfile

        from skillsight_fast.models.encoder import load_encoder

        logger.warning("distilling a static encoder from %s into %s (once; about a minute)",
                       teacher_model, folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        os.chmod(tmp, umask_mode(0o777))  # a shared model cache stays readable as the user's umask says
        try:
            distill_to_folder(teacher if teacher is not None else load_encoder(teacher_model), tmp)
            try:
                os.rename(tmp, folder)  # a concurrent distillation may have won: keep its folder
            except OSError:
                if not is_static_model_dir(folder):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
