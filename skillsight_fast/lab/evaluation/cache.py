"""On-disk cache of embeddings for evaluation runs, so a second run never re-encodes.

Layout under ``<cache_root>/eval/<model_id>-<checksum[:12]>/<kind>/``:

- ``corpus-<sha256>.npy``: float32 (N, d) for one exact list of texts (sha256 over the texts, each
  prefixed by its length), the per-(model, corpus) file;
- ``shard-<sha256>.npy`` + ``shard-<sha256>.json``: vectors of individual texts keyed by the
  sha256 of each text, so corpora that share documents (the skill pool) encode them once.

Only plain ``.npy`` arrays and JSON lists are written (never pickle).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from skillsight_fast.files import atomic_write_bytes, sha256_text

logger = logging.getLogger(__name__)


def texts_sha(texts: Sequence[str]) -> str:
    """sha256 over a list of texts (length-prefixed, so boundaries count)."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def save_npy(path: Path, arr: np.ndarray) -> None:
    """Write ``arr`` as a plain ``.npy`` file (no pickle), atomically."""
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


class EmbeddingCache:
    """Embeddings of texts for one model, one ``kind`` of text (``doc``, ``query``, ...).

    Parameters
    ----------
    root : path
        Cache root (e.g. :func:`skillsight_fast.models.cache_root`).
    model_id, checksum : str
        Identify the encoder; a different checksum never reuses vectors.
    kind : str
        Sub-folder, e.g. ``doc``, ``query``, ``chunks8``.
    """

    def __init__(self, root: str | os.PathLike[str], model_id: str, checksum: str, kind: str) -> None:
        self.folder = Path(root) / "eval" / f"{model_id}-{checksum[:12]}" / kind
        self._store: dict[str, np.ndarray] | None = None

    def _load_store(self) -> dict[str, np.ndarray]:
        if self._store is None:
            self._store = {}
            if self.folder.is_dir():
                for keys_file in sorted(self.folder.glob("shard-*.json")):
                    arr_file = keys_file.with_suffix(".npy")
                    if not arr_file.is_file():
                        continue
                    keys = json.loads(keys_file.read_text())
                    arr = np.load(arr_file, allow_pickle=False)
                    if arr.shape[0] == len(keys):
                        self._store.update(zip(keys, arr))
        return self._store

    def get(self, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """Vectors of ``texts`` (float32 (n, d)), encoding only those never seen before."""
        texts = list(texts)
        corpus_file = self.folder / f"corpus-{texts_sha(texts)}.npy"
        if corpus_file.is_file():
            arr = np.load(corpus_file, allow_pickle=False)
            if arr.shape[0] == len(texts):
                return arr
        store = self._load_store()
        keys = [sha256_text(t) for t in texts]
        todo_idx: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in store and k not in todo_idx:
                todo_idx[k] = i
        if todo_idx:
            todo = [texts[i] for i in todo_idx.values()]
            logger.info("encoding %d new texts (%s)", len(todo), self.folder.name)
            vecs = np.asarray(encode(todo), dtype=np.float32)
            shard = texts_sha(todo)
            self.folder.mkdir(parents=True, exist_ok=True)
            save_npy(self.folder / f"shard-{shard}.npy", vecs)
            atomic_write_bytes(self.folder / f"shard-{shard}.json", json.dumps(list(todo_idx)).encode())
            store.update(zip(todo_idx, vecs))
        if not texts:
            return np.zeros((0, 0), np.float32)
        out = np.stack([store[k] for k in keys]).astype(np.float32)
        self.folder.mkdir(parents=True, exist_ok=True)
        save_npy(corpus_file, out)
        return out
