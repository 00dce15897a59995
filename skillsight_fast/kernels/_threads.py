"""Scoped control of the Numba thread count (restored in ``finally``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def n_threads(count: int | None) -> Iterator[int]:
    """Run a block with ``count`` Numba threads, restoring the previous count afterwards.

    Parameters
    ----------
    count : int or None
        Threads for parallel kernels (clamped to ``[1, numba.config.NUMBA_NUM_THREADS]``);
        None leaves the current setting unchanged.

    Yields
    ------
    int
        The thread count in effect inside the block.

    Examples
    --------
    >>> from skillsight_fast.kernels._threads import n_threads
    >>> with n_threads(1) as t:
    ...     t
    1
    """
    import numba

    previous = numba.get_num_threads()
    if count is None:
        yield previous
        return
    wanted = max(1, min(int(count), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        numba.set_num_threads(previous)
