"""The contextual query encoder tier: a table of the transformer's own token states, averaged over the
library's texts.

Mean pooling makes a transformer task vector the mean of its tokens' contextual states. This tier
replaces each state by that token's mean state over every occurrence in the library's skill texts
(the transformer is the teacher; no labels, no queries), so encoding a task is tokenization, a gather
and a mean, in the transformer's own space (docs/ENCODERS.md, "The contextual tier";
``experiments/contextual_token_table.py`` measured it).

- :func:`token_state_sums`: one pass of the transformer over texts, summing each token id's states.
- :func:`contextual_table`: the ids seen and their mean states (what an index stores).
- :class:`ContextualEncoder`: encodes tasks with that table, tokenized by the static model's
  tokenizer (the same vocabulary); a task with no known content token falls back to the
  static-mapped vector.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError

logger = logging.getLogger(__name__)


def token_state_sums(encoder: Any, texts: Sequence[str], *, progress: Callable[[int], Any] | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Run ``encoder`` (an :class:`~skillsight_fast.models.encoder.OnnxEncoder`) over ``texts`` and sum
    the last hidden state of every real token by token id.

    The tokens are those the encoder pools (special tokens included, first ``max_length``).

    Returns
    -------
    sums : float64 (V, d)
    counts : int64 (V,)
        Occurrences of each token id.

    Raises
    ------
    ModelError
        The encoder is not an ONNX graph that outputs token states.
    """
    inner = getattr(encoder, "inner", encoder)  # a progress wrapper
    hidden_states = getattr(inner, "hidden_states", None)
    if hidden_states is None:
        raise ModelError(f"{type(inner).__name__} gives no token states: the contextual tier needs the "
                         "transformer's ONNX graph")
    vocab = int(inner.vocab_size)
    sums = np.zeros((vocab, inner.dim), np.float64)
    counts = np.zeros(vocab, np.int64)
    ids = inner.tokenize(list(texts))
    order = np.argsort([-len(x) for x in ids], kind="stable")
    for start in range(0, len(order), inner.batch_size):
        rows = [ids[i] for i in order[start:start + inner.batch_size]]
        mask, hidden = hidden_states(rows)
        tok = np.concatenate(rows)  # the real tokens, in the row-major order of the mask's ones
        np.add.at(sums, tok, hidden[mask.astype(bool)].astype(np.float64))
        counts += np.bincount(tok, minlength=vocab)
        if progress is not None:
            progress(len(rows))
    return sums, counts


def encode_with_token_sums(encoder: Any, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``encoder.encode(texts)`` and :func:`token_state_sums` of the same texts from **one** pass.

    The pooled vector is the masked mean of the same token states, L2-normalised, as
    :meth:`~skillsight_fast.models.encoder.OnnxEncoder.encode` computes it; so a build of a table tier
    pays one transformer pass over the skills, not two.

    Returns
    -------
    embeddings : float32 (n, d)
    sums : float64 (V, d)
    counts : int64 (V,)
    """
    from skillsight_fast.models.pooling import l2_normalize, mean_pool

    inner = getattr(encoder, "inner", encoder)
    if getattr(inner, "hidden_states", None) is None:
        raise ModelError(f"{type(inner).__name__} gives no token states: the table tiers need the "
                         "transformer's ONNX graph")
    texts = list(texts)
    out = np.zeros((len(texts), inner.dim), np.float32)
    vocab = int(inner.vocab_size)
    sums = np.zeros((vocab, inner.dim), np.float64)
    counts = np.zeros(vocab, np.int64)
    t0 = time.perf_counter()
    ids = inner.tokenize(texts)
    order = np.argsort([-len(x) for x in ids], kind="stable")
    bar = getattr(encoder, "bar", None)  # a progress wrapper (skillsight_fast.progress.ProgressEncoder)
    with (bar(len(texts), getattr(encoder, "desc", "encoding")) if bar is not None and len(texts) > 1
          else contextlib.nullcontext()) as shown:
        for start in range(0, len(order), inner.batch_size):
            idx = order[start:start + inner.batch_size]
            rows = [ids[i] for i in idx]
            mask, hidden = inner.hidden_states(rows)
            out[idx] = l2_normalize(mean_pool(hidden, mask))
            tok = np.concatenate(rows)
            np.add.at(sums, tok, hidden[mask.astype(bool)].astype(np.float64))
            counts += np.bincount(tok, minlength=vocab)
            if shown is not None:
                shown.update(len(idx))
    logger.info("document encoding: %d texts, %d word pieces in %.1f s", len(texts), sum(map(len, ids)),
                time.perf_counter() - t0)
    return out, sums, counts


def contextual_table(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(token ids int32 (m,), ascending, mean states float32 (m, d)) of the tokens seen at least once."""
    counts = np.asarray(counts)
    ids = np.flatnonzero(counts > 0).astype(np.int32)
    vectors = (np.asarray(sums)[ids] / counts[ids, None]).astype(np.float32)
    return ids, np.ascontiguousarray(vectors)


class ContextualEncoder:
    """Task vectors from a contextual token table.

    A task's vector is the L2-normalised mean of the table rows of its tokens as the transformer
    sees them: ``[CLS]``, the first ``max_length - 2`` word pieces, ``[SEP]``; word pieces the library
    never used are skipped. A task with no known word piece gets ``fallback``'s vector (the
    static-mapped one).

    Parameters
    ----------
    static : StaticEncoder
        Tokenizer (the transformer's vocabulary) and, through ``fallback``, the static vectors.
    token_ids, vectors : int32 (m,), float32 (m, d)
        :func:`contextual_table`.
    fallback : callable
        texts -> float32 (n, d) unit rows.
    max_length : int
        The transformer's token budget (256 for the bundled model).
    """

    def __init__(self, static: Any, token_ids: np.ndarray, vectors: np.ndarray,
                 fallback: Callable[[list[str]], np.ndarray], max_length: int = 256) -> None:
        vocab = static.tokenizer.get_vocab()
        n_vocab = max(vocab.values()) + 1 if vocab else 0
        token_ids = np.asarray(token_ids, np.int64)
        if token_ids.ndim != 1 or vectors.shape[0] != token_ids.shape[0]:
            raise ModelError(f"contextual table: {token_ids.shape} ids for {vectors.shape} vectors")
        if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= n_vocab):
            raise ModelError(f"contextual table ids outside the tokenizer's {n_vocab} tokens")
        self.static = static
        self.slots = np.full(n_vocab, -1, np.int64)
        self.slots[token_ids] = np.arange(token_ids.size)
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.fallback = fallback
        self.max_length = int(max_length)
        specials = [self.slots[vocab[t]] for t in ("[CLS]", "[SEP]")
                    if t in vocab and self.slots[vocab[t]] >= 0]
        self._specials = (self.vectors[specials].sum(0) if specials
                          else np.zeros(self.vectors.shape[1], np.float32))
        self._n_specials = len(specials)
        self.model_id = static.model_id
        self.checksum = static.checksum
        self.dim = int(self.vectors.shape[1])

    @property
    def quantized(self) -> bool:
        return False

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), d), unit rows."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        missing = []
        for i, ids in enumerate(self.static.tokenize(texts)):
            slots = self.slots[ids[: self.max_length - 2]]
            known = slots[slots >= 0]
            if not known.size:
                missing.append(i)
                continue
            v = (self.vectors[known].sum(0) + self._specials) / (known.size + self._n_specials)
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        if missing:
            out[missing] = self.fallback([texts[i] for i in missing])
        return out


def cached_contextual_table(encoder: Any, texts: Sequence[str], folder: str | os.PathLike[str]
                            ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`contextual_table` of ``texts``, kept in ``folder`` (``ids.npy``, ``vectors.npy``; the
    caller names the folder after the encoder and the texts)."""
    from skillsight_fast.files import atomic_output

    folder = Path(folder)
    ids_file, vec_file = folder / "ids.npy", folder / "vectors.npy"
    if ids_file.is_file() and vec_file.is_file():
        ids, vectors = np.load(ids_file, allow_pickle=False), np.load(vec_file, allow_pickle=False)
        if ids.ndim == 1 and vectors.ndim == 2 and vectors.shape[0] == ids.shape[0]:
            return ids, vectors
    ids, vectors = contextual_table(*token_state_sums(encoder, list(texts)))
    for path, arr in ((vec_file, vectors), (ids_file, ids)):  # ids last: they mark the pair complete
        with atomic_output(path, suffix=".npy") as tmp:
            np.save(tmp, arr, allow_pickle=False)
    return ids, vectors
