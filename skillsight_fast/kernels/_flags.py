"""Shared Numba settings for every kernel.

``fastmath`` leaves out ``nnan`` and ``ninf`` so that -inf padding and NaN checks stay correct.
Kernels are compiled lazily on first call and cached on disk (``cache=True``); importing the package
compiles nothing.
"""

from __future__ import annotations

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}
JIT = {"cache": True, "nogil": True, "fastmath": FASTMATH}
PARALLEL_JIT = {**JIT, "parallel": True}

# every module that reads these settings defines Numba kernels: say when one is compiled (not cached)
from skillsight_fast.kernels._notice import install as _install_compile_notice  # noqa: E402

_install_compile_notice()
