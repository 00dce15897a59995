"""Start-up cost of one-shot commands.

When Numba initialises its CPU target (the first kernel call of a process, even one served from the
on-disk cache) it probes for BLAS by importing ``scipy.linalg.cython_blas``. The probe costs about
0.15 s on an idle machine (0.5 s under load), and only jitted code that calls ``np.dot`` or
``np.linalg`` needs it. None of our kernels do. A one-shot ``skillsight search`` therefore hides
``scipy.linalg`` during that first call. The probe then finds no BLAS, and Numba records that for the rest of
the process. Only the CLI's ``search`` does this, because it owns its process. The library never
does it, since the host program may need Numba's BLAS support.

The same command also starts OpenBLAS with one thread (:func:`one_blas_thread`): NumPy's import
starts a BLAS thread per core, ~30 ms of CPU on the 2-core machine, for a search whose only
matrix products are a few hundred floats long.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: The module whose import the probe pays for.
HIDDEN = "scipy.linalg"


@contextmanager
def without_scipy_probe() -> Iterator[None]:
    """Make ``import scipy.linalg`` fail inside the block, unless it is already imported.

    (``import numba`` imports the top-level ``scipy`` package, which is cheap; ``scipy.linalg`` is
    the expensive part.) The block is undone on exit, so a later ``import scipy.linalg`` works.
    """
    if HIDDEN in sys.modules:  # already paid for (or already hidden): nothing to gain
        yield
        return
    sys.modules[HIDDEN] = None  # type: ignore[assignment]  # import scipy.linalg -> ImportError
    try:
        yield
    finally:
        if HIDDEN in sys.modules and sys.modules[HIDDEN] is None:
            del sys.modules[HIDDEN]


#: The OpenBLAS setting :func:`one_blas_thread` gives a value.
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def one_blas_thread() -> None:
    """Have OpenBLAS start one thread, unless the user set its thread count or NumPy is loaded.

    Call it before anything imports NumPy (it is read once, at NumPy's import); it sets the
    environment of this process, so only a command that owns its process may call it.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS, "1")
