"""Scoped control of the Numba thread count (restored in ``finally``).

:func:`single_thread` is what a caller holds around a one-query search (a parallel launch for one
query costs more than it saves; a Ray shard is one actor on one CPU); :func:`n_threads` sets any
count. Numba is imported when a block is entered, not when this module is.
"""

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
    >>> from skillsight_fast.kernels import n_threads
    >>> with n_threads(2) as t:
    ...     t >= 1
    True
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


@contextmanager
def single_thread() -> Iterator[int]:
    """Run a block with one Numba thread (``n_threads(1)``), restoring the previous count afterwards.

    Examples
    --------
    >>> from skillsight_fast.kernels import single_thread
    >>> with single_thread() as t:
    ...     t
    1
    """
    with n_threads(1) as t:
        yield t
