"""Thread safety of ``parallel=True`` kernel launches across Python threads.

The kernels are ``nogil`` and write only to their own output arrays, so many Python threads
may run them at once. Numba's threading layers differ, though: ``tbb`` and ``omp`` accept
concurrent parallel launches, while ``workqueue`` (the fallback on a machine with neither TBB nor
an OpenMP runtime, e.g. a slim container or macOS from PyPI wheels) aborts the whole process with
"Concurrent access has been detected". :func:`parallel_launch` serialises launches with a lock
only when the active layer is not thread-safe; the serial kernels and the Python work around
them (encoding, analysis) still run concurrently. Nothing here changes a global Numba setting.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext

_LOCK = threading.Lock()
_NO_LOCK: AbstractContextManager[None] = nullcontext()
#: Threading layers that accept parallel launches from several Python threads at once.
THREADSAFE_LAYERS = frozenset({"tbb", "omp"})
_layer_is_threadsafe: bool | None = None


def parallel_launch() -> AbstractContextManager[object]:
    """Context manager to hold around a call of a ``parallel=True`` kernel.

    Returns a no-op once the active threading layer is known to be thread-safe, and a
    process-wide lock otherwise (including before the first launch, when Numba has not yet
    chosen a layer).

    Examples
    --------
    >>> with parallel_launch():
    ...     pass
    """
    global _layer_is_threadsafe
    if _layer_is_threadsafe is None:
        import numba

        try:
            layer = numba.threading_layer()
        except ValueError:  # no parallel region launched yet (or NUMBA_DISABLE_JIT)
            return _LOCK
        _layer_is_threadsafe = layer in THREADSAFE_LAYERS
    return _NO_LOCK if _layer_is_threadsafe else _LOCK
