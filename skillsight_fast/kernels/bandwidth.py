"""The memory-bandwidth probe of ``skillsight bench`` (:mod:`skillsight_fast.lab.benchmark.runner`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from skillsight_fast.kernels._flags import JIT


@njit(**JIT)
def stream_read(x):  # pragma: no cover - jitted
    """Sum of a flat float32 array: a pure streaming read, the memory-bandwidth probe."""
    acc = np.float32(0.0)
    for i in range(x.shape[0]):
        acc += x[i]
    return acc
