"""The coordinator of a sharded index: the same search as :class:`~skillsight_fast.engine.index.SkillIndex`,
its rows spread over shards (Ray actors, or in-process :class:`ShardEngine` objects).

The coordinator holds what is global and small: the skill records, the vocabulary, the background
basis, the decisions, the encoder (the index folder memory-mapped: only these pages become
resident). A search encodes the task once, removes the background, finds the evidence tokens, and
fans out:

* **exact scan**: every shard returns its ``C`` best rows (C = the candidate depth) with their exact
  dense score, lexical score, cosine and evidence; the coordinator keeps the global ``C`` best
  (score descending, then row ascending: the single index's order) - the global top C is in the union
  of the shards' top C;
* **int8 scan**: first round, every shard returns its ``kk = oversample × C`` best rows by the int8
  score; the coordinator keeps the global ``kk`` best (the survivors the single index's int8 scan
  keeps: rows are scored independently, ties by row); second round, the shards score their
  survivors exactly, and the coordinator keeps the ``C`` best;
* **binary scan** (shard folders): a round before the int8 one, every shard returns its rows' Hamming
  histogram; their sum gives the distance within which the single index's prefilter keeps its rows,
  and the int8 round runs over each shard's rows within it;
* **IVF scan** (shard folders): the coordinator picks the probed cells with the library's centroids and
  every shard scores its rows in them exactly, merged as the exact scan.

Then the coordinator fuses the candidates with the index's fusion (Eq. 15 z-scores the candidate
set, so the candidate set must be the single index's, which it is) and returns a
:class:`~skillsight_fast.engine.index.SearchResult`. Every per-skill value comes from the same kernel on the
same float32 rows with the library's global statistics, so the answer equals the single index's
(tests/test_cluster.py checks ids, scores and evidence on a local Ray cluster).

:class:`ShardedIndex` offers what :func:`~skillsight_fast.agents.find.find_skills` and
:class:`~skillsight_fast.agents.service.SkillService` use of an index, so ``skillsight serve --ray ADDRESS``
serves it through the same HTTP and MCP surfaces, with every search option of the single index:
the filters of :func:`~skillsight_fast.agents.find.find_skills` (``tags``/``source``: the shards score
the rows the filter allows), the LEC coverage candidates (``lexical_candidates`` > 0: every shard
returns its best rows by coverage over the postings of its rows, merged as the single index's stable
sort), ``candidates``, ``fusion``, ``lexical_weight``, ``lexical``, ``rrf_k`` and ``explain``. Only a
custom stage callable other than a filter's is refused (a QueryError). An update of the library
reaches the shards through :meth:`ShardedIndex.next_version`.
How a round reaches the shards (at once, bounded waits, a lost shard re-opened or left out
flagged partial) is :mod:`skillsight_fast.cluster.fanout`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.cluster.fanout import PARTIAL_AFTER_S, FanOut, ShardUnavailableError
from skillsight_fast.cluster.layout import global_stats, shard_ranges
from skillsight_fast.cluster.shard import (
    LEXICAL_SIDES,
    MAX_CONCURRENCY,
    ShardHost,
    _get,
    _shard_actor,
)
from skillsight_fast.cluster.versions import folder_digest, next_version
from skillsight_fast.engine.result import check_queries, continued_result
from skillsight_fast.errors import QueryError, SkillsightError

logger = logging.getLogger(__name__)


class _Rows:
    """``index.dense.embeddings[rows]`` / ``index.dense.embeddings_perp[rows]`` fetched from the shards."""

    def __init__(self, owner: ShardedIndex, which: str) -> None:
        self.owner, self.which = owner, which
        self.shape = (len(owner), owner.stats.dim)

    def __getitem__(self, rows: Any) -> np.ndarray:
        r = np.asarray(rows, np.int64)
        return self.owner._fetch_rows(r.reshape(-1), self.which).reshape(*r.shape, -1)


class _Dense:
    def __init__(self, owner: ShardedIndex) -> None:
        self.embeddings = _Rows(owner, "raw")
        self.embeddings_perp = _Rows(owner, "perp")
        self.basis = owner.head.dense.basis
        self.query_map = owner.head.dense.query_map
        self.query_table = owner.head.dense.query_table


class ShardedIndex(FanOut):
    """An index whose rows live on shards (see the module docstring).

    Parameters
    ----------
    directory : path
        The index folder (every shard reads its rows from it: the same path on every node).
    shards : list
        Ray actor handles of :class:`ShardHost` (:meth:`connect`) or ShardHost objects
        (:meth:`local`), in row order, each serving ``version``.
    ranges : list of (start, stop)
    version : int
        The version of the folder the hosts serve for this object (:meth:`next_version`).
    """

    def __init__(self, directory: str | os.PathLike[str], shards: list[Any], ranges: list[tuple[int, int]],
                 *, head: Any = None, remote: bool = False, version: int = 0,
                 layout: str | os.PathLike[str] | None = None) -> None:
        from skillsight_fast.engine.index import SkillIndex

        self.directory = Path(directory)
        self.head = head if head is not None else SkillIndex.load(self.directory, mmap=True, verify="background")
        self.shards = shards
        self.ranges = ranges
        self.remote = remote
        self.version = version
        #: The folder of the shard folders the hosts opened (:meth:`from_layout`), or None.
        self.layout = Path(layout) if layout is not None else None
        #: Shards re-opened after a lost actor (shard, cause, seconds), oldest first.
        self.recoveries: list[dict[str, Any]] = []
        #: Shard folders on Ray: seconds a search waits for a shard (and its re-opening) before it answers
        #: from the others with ``SearchResult.partial`` naming the missing shards; None: wait for every
        #: shard (up to the restart timeouts, then :class:`ShardUnavailableError`).
        self.partial_after_s: float | None = PARTIAL_AFTER_S
        self._search = threading.local()  # the shards missing from the search under way (per thread)
        #: Per shard: opened from the folder for this version (True) or kept from the previous one.
        self.reopened: list[bool] = [True] * len(shards)
        #: Shard folders: the index's term id -> the layout's, and back (None: the same ids).
        self._to_layout: np.ndarray | None = None
        self._to_head: np.ndarray | None = None
        if self.layout is not None:
            self._read_term_map()
        self._starts = np.asarray([a for a, _ in ranges], np.int64)
        self.dense = _Dense(self)
        served = ("exact", "int8", "binary", "ivf") if self.layout is not None else ("exact", "int8")
        if self.head.scan.kind not in served:
            raise SkillsightError(f"a sharded index serves the {', '.join(served)} scans, not "
                                  f"{self.head.scan.kind!r} (skillsight rescan -i IDX --scan int8)")

    # ------------------------------------------------------------------ construction
    @staticmethod
    def global_stats(head: Any) -> dict[str, Any]:
        """What every shard scores with: the library's LEC weights, BM25 idf and mean length."""
        return global_stats(head)

    @classmethod
    def local(cls, directory: str | os.PathLike[str], shards: int) -> ShardedIndex:
        """Shards as in-process objects (tests, and the reference the Ray shards are checked against)."""
        from skillsight_fast.engine.index import SkillIndex

        head = SkillIndex.load(Path(directory), mmap=True, verify="background")
        ranges = shard_ranges(len(head), shards)
        stats = cls.global_stats(head)
        hosts = [ShardHost() for _ in ranges]
        for h, (a, b) in zip(hosts, ranges):
            h.open(0, directory, a, b, stats)
        return cls(directory, hosts, ranges, head=head)

    @classmethod
    def connect(cls, directory: str | os.PathLike[str], shards: int, *, address: str | None = None,
                cpus_per_shard: float = 1.0) -> ShardedIndex:
        """Start ``shards`` Ray actors (joining the cluster at ``address``; None: the one this
        process is connected to, else a new local one), each holding its rows."""
        from skillsight_fast.engine.index import SkillIndex
        from skillsight_fast.indexing.ray import import_ray

        ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True)
        directory = Path(directory).expanduser().absolute()
        head = SkillIndex.load(directory, mmap=True, verify="background")
        ranges = shard_ranges(len(head), shards)
        stats = ray.put(cls.global_stats(head))
        # threaded actors: a search keeps being answered (by the previous version) while an update
        # opens the next version's rows on the same actor
        actor = ray.remote(num_cpus=cpus_per_shard, max_concurrency=MAX_CONCURRENCY)(ShardHost)
        handles = [actor.remote() for _ in ranges]
        # every shard loaded (errors surface here)
        ray.get([h.open.remote(0, str(directory), a, b, stats) for h, (a, b) in zip(handles, ranges)])
        return cls(directory, handles, ranges, head=head, remote=True)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], shards: int, *, address: str | None = None) -> ShardedIndex:
        """What ``serve --ray`` serves: the shard folders in ``DIR.shards`` (``skillsight split``) when
        they are there (:meth:`from_layout`; ``shards`` is then theirs), else ``shards`` row ranges of the
        index folder (:meth:`connect`)."""
        from skillsight_fast.cluster.layout import LAYOUT, shards_folder

        folder = shards_folder(directory)
        if (folder / LAYOUT).is_file():
            return cls.from_layout(directory, folder, address=address)
        return cls.connect(directory, shards, address=address)

    @classmethod
    def from_layout(cls, directory: str | os.PathLike[str], layout: str | os.PathLike[str], *,
                    address: str | None = None, cpus_per_shard: float = 1.0, remote: bool = True,
                    resources: Sequence[dict[str, float] | None] | None = None) -> ShardedIndex:
        """Serve the shard folders of ``layout`` (:func:`skillsight_fast.cluster.layout.split_index`):
        each shard host opens only its own folder and the shared part, checked against their checksums.

        Parameters
        ----------
        directory : path
            The index folder the coordinator reads (records, vocabulary, basis, abstention rule).
        layout : path
            The folder holding ``shards.json``, the shard folders and the shared part, at the same path
            where each shard runs (on the node that holds it, or on storage every node mounts).
        remote : bool
            Ray actors (True) or in-process hosts (tests, the reference).
        resources : list of dict, optional
            Per shard, the Ray custom resources its actor needs (e.g. ``{"shard-0": 1}`` for the node
            started with ``ray start --resources '{"shard-0": 1}'``, the node that holds it).
        """
        from skillsight_fast.cluster.layout import read_layout
        from skillsight_fast.engine.index import SkillIndex
        from skillsight_fast.errors import IndexFormatError

        directory = Path(directory).expanduser().absolute()
        root = Path(layout).expanduser().absolute()
        plan = read_layout(root)
        head = SkillIndex.load(directory, mmap=True, verify="background")
        if plan["n_skills"] != len(head):
            raise IndexFormatError(f"{root}: the shards hold {plan['n_skills']} skills, the index {len(head)}")
        ranges = [(int(e["start"]), int(e["stop"])) for e in plan["shards"]]
        folders = [str(root / e["folder"]) for e in plan["shards"]]
        shared = str(root / plan["shared"])
        if not remote:
            hosts = [ShardHost() for _ in ranges]
            for h, f, (a, _) in zip(hosts, folders, ranges):
                h.open_folder(0, f, shared, a)
            new = cls(directory, hosts, ranges, head=head, layout=root)
        else:
            from skillsight_fast.indexing.ray import import_ray

            ray = import_ray()
            if not ray.is_initialized():
                ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                         ignore_reinit_error=True)
            handles = [_shard_actor(ray, cpus_per_shard, resources[i] if resources else None)
                       for i in range(len(ranges))]
            _get(ray, [h.open_folder.remote(0, f, shared, a) for h, f, (a, _) in zip(handles, folders, ranges)])
            new = cls(directory, handles, ranges, head=head, remote=True, layout=root)
        new._actor_options = {"cpus_per_shard": cpus_per_shard, "resources": list(resources or [])}
        new._digests = [folder_digest(f) for f in folders]
        new._shared_digest = folder_digest(shared)
        return new

    def next_version(self, directory: str | os.PathLike[str] | None = None, *, encoder: Any = None,
                     reopen: bool = False) -> ShardedIndex:
        """The index folder's current version, served by the same shard hosts
        (:func:`skillsight_fast.cluster.versions.next_version`: call it after an update rewrote the folder)."""
        return next_version(self, directory, encoder=encoder, reopen=reopen)

    def close(self) -> None:
        """Stop the shard actors (Ray; they are shared by every version of this index)."""
        if self.remote:
            import ray

            for h in self.shards:
                ray.kill(h)
        self.shards = []

    def _read_term_map(self) -> None:
        """The layout's term ids of the index's terms (shard folders name terms by the layout's ids,
        :mod:`skillsight_fast.cluster.layout`)."""
        from skillsight_fast.cluster.layout import read_folder, read_layout

        assert self.layout is not None
        _, arrays = read_folder(self.layout / read_layout(self.layout)["shared"], verify=False)
        head_term = np.asarray(arrays["head_term"], np.int32)
        n_head = len(self.head.lexical.lexicon.vocab)
        if head_term.shape[0] == n_head and np.array_equal(head_term, np.arange(n_head, dtype=np.int32)):
            return
        live = head_term >= 0
        to_layout = np.full(n_head, -1, np.int32)
        to_layout[head_term[live]] = np.flatnonzero(live).astype(np.int32)
        if (to_layout < 0).any():
            raise SkillsightError(f"{self.layout}: the shared part misses terms of the index (an update "
                                  "that did not reach the shard folders: skillsight split again)")
        self._to_layout, self._to_head = to_layout, head_term

    def _layout_terms(self, terms: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Query term ids (the index's) as the shard folders' ids, in the same order."""
        if self._to_layout is None:
            return terms
        return (self._to_layout[np.asarray(terms[0], np.int64)], self._to_layout[np.asarray(terms[1], np.int64)])

    def shard_info(self) -> list[dict[str, Any]]:
        """Per shard: rows, scan, array bytes, resident bytes and process."""
        return self._call("info", [((), s) for s in range(len(self.shards))])

    def _owner(self, rows: np.ndarray) -> np.ndarray:
        return np.searchsorted(self._starts, rows, side="right") - 1

    def _call_by_owner(self, method: str, rows: np.ndarray,
                       args: Callable[[np.ndarray], tuple[Any, ...]]) -> tuple[np.ndarray, list[int], list[Any]]:
        """Call ``method(*args(part))`` on each shard owning some of the global ``rows``, ``part``
        being its rows (in the order given); returns each row's shard, the shards called (ascending)
        and their results."""
        owner = self._owner(rows)
        missing = getattr(self._search, "missing", None) or set()
        shards = [s for s in np.unique(owner).tolist() if s not in missing]
        got = self._call(method, [(args(rows[owner == s]), s) for s in shards])
        if len(got) != len(shards) or any(g is None for g in got):  # shards lost during this call
            pairs = [(s, g) for s, g in zip(shards, got) if g is not None] if len(got) == len(shards) else []
            shards, got = [s for s, _ in pairs], [g for _, g in pairs]
        return owner, shards, got

    def _fetch_rows(self, rows: np.ndarray, which: str) -> np.ndarray:
        out = np.zeros((rows.shape[0], self.stats.dim), np.float32)
        if not rows.size:
            return out
        if rows.min() < 0 or rows.max() >= len(self):
            raise IndexError("row out of range")
        owner, shards, got = self._call_by_owner("rows", rows, lambda part: (part, which))
        for s, part in zip(shards, got):
            out[owner == s] = part
        return out

    # ------------------------------------------------------------------ what find_skills reads
    def __len__(self) -> int:
        return len(self.head)

    # the Searcher protocol (skillsight_fast.engine.searcher): what is global and small is the head's
    @property
    def state(self) -> Any:
        """The head's :class:`~skillsight_fast.engine.state.IndexState` (records, decisions, statistics)."""
        return self.head.state

    @property
    def skills(self) -> Any:
        return self.head.skills

    @property
    def ids(self) -> list[str]:
        return self.head.ids

    @property
    def pins(self) -> list[str]:
        return self.head.pins

    @property
    def config(self) -> Any:
        return self.head.config

    @property
    def decisions(self) -> Any:
        return self.head.decisions

    @property
    def stats(self) -> Any:
        return self.head.stats

    @property
    def cascade(self) -> Any:
        return self.head.cascade

    @property
    def encoders(self) -> Any:
        return self.head.encoders

    @property
    def encoder(self) -> Any:
        return self.head.encoder

    @encoder.setter
    def encoder(self, encoder: Any) -> None:
        self.head.encoder = encoder

    @property
    def lexical(self) -> Any:
        return self.head.lexical

    @property
    def scan(self) -> Any:
        return self.head.scan

    def check_k(self, k: int, most: int | None = None) -> int:
        return self.head.check_k(k, most)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.head.encode(texts)

    def remove_background(self, vectors: np.ndarray) -> np.ndarray:
        return self.head.remove_background(vectors)

    def warmup(self) -> None:
        """Compile the coordinator's kernels; the shards compile theirs on their first search."""
        self.head.warmup()

    def search(self, queries: str | Sequence[str], k: int = 10, **knobs: Any) -> Any:
        """:meth:`SkillIndex.search` over the shards."""
        texts = check_queries(queries)
        self.head.check_k(k)
        return self.encode_search(texts, k, **knobs)[1]

    def encode_search(self, texts: Sequence[str], k: int = 10, cascade: Any = None, **knobs: Any
                      ) -> tuple[np.ndarray, Any]:
        """:meth:`SkillIndex.encode_search` over the shards (checked texts; the head's encoders and cascade)."""
        from skillsight_fast.engine.cascade import cascade_search

        return cascade_search(self, self.head, list(texts), k, cascade, **knobs)

    def search_vectors(self, vectors: np.ndarray, texts: Sequence[str], k: int = 10, **knobs: Any) -> Any:
        """:meth:`SkillIndex.search_vectors` over the shards (same arguments, same result). Shard
        folders on Ray: a shard that does not answer within :attr:`partial_after_s` (re-opening
        included) is left out, and ``result.partial`` names it (empty: every shard answered)."""
        with self._searching() as missing:
            result = self._search_shards(vectors, texts, k, **knobs)
            result.partial = sorted(missing)
        return result

    def _search_shards(self, vectors: np.ndarray, texts: Sequence[str], k: int = 10, *,
                       candidates: int | None = None, fusion: str | None = None,
                       lexical_weight: float | None = None, lexical: str | None = None,
                       lexical_candidates: int | None = None, rrf_k: float | None = None,
                       continuation: str | None = None,
                       dense_stage: Any = None, lexical_stage: Any = None, explain: bool = True) -> Any:
        """:meth:`SkillIndex.search_vectors` over the shards (same arguments, same result)."""

        head = self.head
        k = head.check_k(k)
        from skillsight_fast.engine.state import query_decisions

        d = query_decisions(head, candidates=candidates, fusion=fusion, lexical_weight=lexical_weight,
                                 lexical=lexical, lexical_candidates=lexical_candidates, rrf_k=rrf_k,
                                 continuation=continuation)
        # a filter (find_skills's tags/source) restricts the dense stage to the rows it allows: the shards
        # score those rows; any other custom stage would run on the coordinator over every row
        allowed = getattr(dense_stage, "restricted_rows", None) if dense_stage is not None else None
        if (dense_stage is not None and allowed is None) or lexical_stage is not None:
            raise QueryError("a sharded index takes no custom search stages other than a filter's")
        if allowed is not None:
            allowed = np.asarray(allowed, np.int64)
        if d.lexical not in LEXICAL_SIDES:
            raise QueryError(f"a sharded index scores the lexical sides {', '.join(LEXICAL_SIDES)}")
        raw = np.ascontiguousarray(np.atleast_2d(vectors), np.float32)
        from skillsight_fast.kernels import n_threads

        with n_threads(1 if raw.shape[0] == 1 else None):
            q_perp = head.remove_background(raw)
        if q_perp.shape[0] != len(texts):
            raise QueryError(f"{q_perp.shape[0]} query vectors for {len(texts)} texts")
        terms, ptr = head.evidence_tokens(texts)
        s_terms, s_ptr = terms, ptr  # what the lexical side scores; the evidence shown stays Q'
        if d.lexical == "bm25" and d.lexical_evidence == "all":
            s_terms, s_ptr = head.evidence_tokens(texts, exclude=head.lexical.stopword_flags)
        n, depth = len(self), min(len(self), max(d.candidates, k))
        rows_out: list[Any] = []
        evid: list[Any] = []
        for i in range(q_perp.shape[0]):
            t = terms[ptr[i] : ptr[i + 1]]
            st = s_terms[s_ptr[i] : s_ptr[i + 1]]
            got = self._candidates(q_perp[i], raw[i], depth, (st, t), d.lexical, allowed) if n else None
            if got is not None and d.lexical_candidates:
                got = self._with_coverage(q_perp[i], raw[i], got, min(n, d.lexical_candidates), (st, t),
                                          d.lexical)
            rows_out.append(got)
        width = max([1] + [got.get("width", got["rows"].shape[0]) for got in rows_out if got is not None])
        cand = np.full((len(texts), width), -1, np.int64)
        s_dense = np.full(cand.shape, -np.inf, np.float32)
        s_lex = np.zeros(cand.shape, np.float32)
        s_cos = np.full(cand.shape, np.nan, np.float32)  # the raw cosines the shards computed
        for i, got in enumerate(rows_out):
            if got is None:
                evid.append({})
                continue
            m = got["rows"].shape[0]
            cand[i, :m], s_dense[i, :m], s_lex[i, :m] = got["rows"], got["dense"], got["lexical"]
            s_cos[i, :m] = got["cosine"]
            evid.append(got)
        from skillsight_fast.kernels import n_threads

        with n_threads(1 if len(texts) == 1 else None):
            # qᵀd of the hits: the shards computed every candidate's with the scoring round, so no round
            # trip fetches the hits' rows again
            result, pos = continued_result(head, cand, s_dense, s_lex, k, d, raw, cand_cosine=s_cos)
        if explain:
            vocab = head.lexical.lexicon.vocab
            result.evidence = [[[vocab[t] for t in evid[i]["ev"][p]] if p >= 0 else [] for p in pos[i].tolist()]
                               for i in range(len(texts))]
        return result

    def _binary_firsts(self, q_perp: np.ndarray, depth: int, kk: int) -> list[Any]:
        """The binary scan's rounds over the shards: the library's Hamming histogram gives the distance
        within which the single index's scan keeps its ``rerank`` nearest rows (ties all kept,
        :func:`~skillsight_fast.kernels.binary.dense_topk_binary`); each shard returns its ``kk`` best
        of its rows within it by the int8 score."""
        n = len(self)
        k = min(depth, n)
        m = min(max(self.head.scan.rerank_factor * k, kk), max(n, 1))
        everyone = range(len(self.shards))
        hists = [h for h in self._call("hamming_counts", [((q_perp,), s) for s in everyone]) if h is not None]
        if not hists:
            raise ShardUnavailableError("no shard answered")
        hist = np.sum(hists, axis=0)
        thr, total = 0, int(hist[0])
        while total < m and thr + 1 < hist.shape[0]:
            thr += 1
            total += int(hist[thr])
        return [f for f in self._call("binary_top", [((q_perp, thr, kk), s) for s in everyone]) if f is not None]

    def _with_coverage(self, q_perp: np.ndarray, q_raw: np.ndarray, got: dict[str, Any], kl: int,
                       terms: tuple[np.ndarray, np.ndarray], side: str) -> dict[str, Any]:
        """The candidates ``got`` joined by the ``kl`` best rows by LEC coverage of the evidence tokens
        (:meth:`SkillIndex.add_lexical_candidates`): every shard returns its ``kl`` best, the
        coordinator keeps the global ``kl`` (coverage descending, row ascending: the single index's
        stable sort), appends those not yet candidates after the dense ones, and the shards score the
        joined set with the single index's row-wise product."""
        terms = self._layout_terms(terms)
        firsts = [f for f in self._call("coverage_top", [((terms[1], kl), s) for s in range(len(self.shards))])
                  if f is not None]
        ids = np.concatenate([f[0] for f in firsts]) if firsts else np.zeros(0, np.int64)
        cov = np.concatenate([f[1] for f in firsts]) if firsts else np.zeros(0, np.float32)
        lex_top = ids[np.lexsort((ids, -cov))[:kl]].tolist()
        dense_rows = got["rows"].tolist()
        seen = set(dense_rows)
        rows = np.asarray(dense_rows + [r for r in lex_top if r not in seen], np.int64)
        owner, shards, parts = self._call_by_owner(
            "score", rows, lambda part: (q_perp, q_raw, part, terms, side, "einsum"))
        out: dict[str, Any] = {"rows": rows, "ev": [None] * rows.size, "width": got["rows"].shape[0] + kl,
                               **{key: np.empty(rows.size, np.float32) for key in ("dense", "lexical", "cosine")}}
        for s, p in zip(shards, parts):
            at = np.flatnonzero(owner == s)
            out["dense"][at], out["lexical"][at], out["cosine"][at] = p["dense"], p["lexical"], p["cosine"]
            for j, ev in zip(at.tolist(), _evidence_lists(p, self._to_head)):
                out["ev"][j] = ev
        return out

    def _candidates(self, q_perp: np.ndarray, q_raw: np.ndarray, depth: int,
                    terms: tuple[np.ndarray, np.ndarray], side: str,
                    allowed: np.ndarray | None = None) -> dict[str, Any]:
        """The single index's ``depth`` candidates of one query, scored (see the module docstring);
        ``allowed``: only these rows (a filter), scored exactly whatever the scan, as the single
        index's filtered stage does."""
        everyone = range(len(self.shards))
        terms = self._layout_terms(terms)
        if allowed is not None:
            parts = self._call_by_owner("restricted_top", allowed,
                                        lambda part: (q_perp, q_raw, depth, part, terms, side))[2]
        elif self.head.scan.kind in ("int8", "binary"):
            kk = min(max(depth, self.head.scan.oversample * depth), max(len(self), 1))
            if self.head.scan.kind == "binary":  # the single index's Hamming prefilter, then its int8 round
                firsts = self._binary_firsts(q_perp, depth, kk)
            else:
                firsts = [f for f in self._call("approx", [((q_perp, kk), s) for s in everyone]) if f is not None]
            if not firsts:
                raise ShardUnavailableError("no shard answered")
            ids = np.concatenate([f[0] for f in firsts])
            approx = np.concatenate([f[1] for f in firsts])
            keep = np.lexsort((ids, -approx))[:kk]  # score descending, row ascending
            survivors = np.sort(ids[keep])
            parts = self._call_by_owner("score", survivors, lambda part: (q_perp, q_raw, part, terms, side))[2]
        elif self.head.scan.kind == "ivf":  # the cells the single index's IVF search probes, every shard's rows in them
            scan = self.head.scan
            _, probed = scan.ivf.quantizer.search(np.ascontiguousarray(q_perp[None, :], np.float32), scan.nprobe)
            cells = probed[0][probed[0] >= 0].astype(np.int64)
            parts = self._call("ivf_top", [((q_perp, q_raw, depth, cells, terms, side), s) for s in everyone])
        else:
            parts = self._call("exact_top", [((q_perp, q_raw, depth, terms, side), s) for s in everyone])
        parts = [p for p in parts if p is not None]
        if not parts:
            raise ShardUnavailableError("no shard answered")
        rows = np.concatenate([p["rows"] for p in parts])
        dense = np.concatenate([p["dense"] for p in parts])
        best = np.lexsort((rows, -dense))[:depth]  # exact score descending, row ascending
        lexical = np.concatenate([p["lexical"] for p in parts])
        cosine = np.concatenate([p["cosine"] for p in parts])
        ev = [e for p in parts for e in _evidence_lists(p, self._to_head)]
        return {"rows": rows[best], "dense": dense[best], "lexical": lexical[best], "cosine": cosine[best],
                "ev": [ev[b] for b in best.tolist()]}


def _evidence_lists(part: dict[str, Any], to_head: np.ndarray | None = None) -> list[list[int]]:
    """Per row of a shard's :meth:`~skillsight_fast.cluster.shard.ShardEngine.score` result, its
    evidence term ids (the CSR ``ev_ptr``/``ev_terms`` as lists; ``to_head``: layout ids -> the index's)."""
    ptr, terms = part["ev_ptr"], part["ev_terms"]
    if to_head is not None:
        terms = to_head[np.asarray(terms, np.int64)]
    return [terms[ptr[c] : ptr[c + 1]].tolist() for c in range(part["rows"].shape[0])]
