"""Offline evaluation of skill retrieval: datasets, metrics, methods, ablations and the ``eval`` command.

Nothing here is imported by the core package; heavy dependencies (faiss, bm25s, scipy) are imported
where they are used.
"""
