"""Shared type aliases and the encoder protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

F32 = NDArray[np.float32]


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of shape (n, dim).

    ``model_id`` and ``checksum`` identify the model in the index manifest, so an index is never
    queried with a different model than the one that built it.
    """

    model_id: str
    checksum: str
    dim: int

    def encode(self, texts: Sequence[str]) -> F32:
        """Return float32 (len(texts), dim) unit vectors."""
        ...
