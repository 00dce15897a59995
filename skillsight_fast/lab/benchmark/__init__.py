"""Speed measurements behind ``skillsight bench``: kernels and end to end against faiss, bm25s and Dense + Reranker.

See docs/SPEED.md for the method, the corpora and the latest numbers. Heavy imports stay inside
the handler, so registering the subcommand costs nothing at start-up.
"""

from __future__ import annotations

DEFAULT_SIZES = ("real", "26000", "100000", "1000000")
QUICK_SIZES = ("real", "26000")
