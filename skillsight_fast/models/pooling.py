"""Pure NumPy pooling and normalisation of encoder outputs."""

from __future__ import annotations

import numpy as np


def mean_pool(last_hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Average the token vectors of each row, ignoring padding.

    Parameters
    ----------
    last_hidden : numpy.ndarray
        Float array ``(batch, seq, dim)``.
    attention_mask : numpy.ndarray
        Array ``(batch, seq)``, 1 for real tokens and 0 for padding (any int/bool dtype).

    Returns
    -------
    numpy.ndarray
        float32 ``(batch, dim)``; a row without any real token is all zeros.
    """
    hidden = np.asarray(last_hidden, dtype=np.float32)
    mask = np.asarray(attention_mask).astype(np.float32)
    if hidden.ndim != 3 or mask.shape != hidden.shape[:2]:
        raise ValueError(f"expected (b, s, d) and (b, s), got {hidden.shape} and {mask.shape}")
    summed = np.einsum("bsd,bs->bd", hidden, mask, dtype=np.float32)
    counts = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
    return (summed / counts).astype(np.float32, copy=False)


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Divide each row (last axis) by its L2 norm.

    Parameters
    ----------
    x : numpy.ndarray
        Float array ``(..., dim)``.
    eps : float
        Rows with a norm below ``eps`` are returned unchanged (zero stays zero, never NaN).

    Returns
    -------
    numpy.ndarray
        float32 array of the same shape.
    """
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(norms < eps, 1.0, norms)).astype(np.float32, copy=False)
