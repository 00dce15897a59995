"""The streaming build: chunks of skills in, one index out, with memory bounded by the outputs.

:class:`StreamBuilder` takes :class:`~skillsight_fast.indexing.shard.Shard` objects in row order
(from :func:`stream_build` in this process, or from Ray workers, :mod:`skillsight_fast.indexing.ray`)
and keeps only what the index is made of:

* the embeddings, appended to a file and memory-mapped at the end;
* the skills' bodies, appended to a JSON-lines file (:class:`DiskTexts`);
* the forward lexical index with the terms renamed to provisional corpus-wide ids, the metadata
  and the injection-scan flags of each skill;
* the round-1 sums (:class:`~skillsight_fast.indexing.stats.CorpusStats`).

:meth:`StreamBuilder.finish` sorts the vocabulary, renames the terms, transposes the postings, runs
round 2 (:class:`~skillsight_fast.indexing.stats.TokenStats`) over blocks of the memory-mapped
embeddings, estimates the background from the sums (:func:`background_from_directions`), applies
the adaptive rules to the summed statistics (:func:`decide_from_statistics`), and assembles the
index through :meth:`SkillIndex.from_embeddings <skillsight_fast.engine.index.SkillIndex.from_embeddings>`
with the prebuilt lexicon, basis and decisions. When ``auto`` settles into the fitted tier (the
workers' encoder gives the transformer's token states), the shards also carry their token-state sums,
added here into the library's contextual table, and the fit and the query map, which read every
skill, run once here over the skills rebuilt row by row (:class:`~skillsight_fast.indexing.shard.SkillRows`);
the index then keeps the default lookup-first cascade. The label-free abstention rule and the duplicate
collapse are derived last, from the finished index, as the in-memory build derives them. The result
equals :meth:`SkillIndex.build` over
the same skills (tests/indexing/test_build_stream.py).

The temporary files live in a folder that is removed as soon as the arrays are mapped (POSIX
keeps unlinked files readable through the open mapping and file handle).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, overload

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.background import background_from_directions, select_background_terms
from skillsight_fast.engine.columns import row_index
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.state import Decisions, LexicalState, SkillMeta
from skillsight_fast.errors import DuplicateSkillError, EmbeddingError, EmptyLibraryError
from skillsight_fast.indexing.shard import Shard, encode_shard, skill_rows
from skillsight_fast.indexing.stats import CorpusStats, TokenStats
from skillsight_fast.kernels import transpose_csr
from skillsight_fast.kernels.sharded import remap_sort_rows
from skillsight_fast.library.skills import Skill
from skillsight_fast.types import Encoder

if TYPE_CHECKING:
    from skillsight_fast.engine.index import SkillIndex

logger = logging.getLogger(__name__)

#: Skills per chunk of a streaming build (a chunk's texts, tokens and vectors are in memory at once).
DEFAULT_CHUNK = 4096
#: Rows of the memory-mapped embeddings per block of round 2.
ROUND2_BLOCK = 65536


class DiskTexts(Sequence[str]):
    """A read-only sequence of strings stored one JSON string per line in an open file.

    What a streamed index keeps as its skills' bodies: saving iterates it line by line
    (:func:`skillsight_fast.engine.io.save_index`), and nothing holds all the texts in memory.
    """

    def __init__(self, fh: IO[bytes], offsets: np.ndarray) -> None:
        self._fh = fh
        self._offsets = offsets  # int64 (n + 1,)

    def __len__(self) -> int:
        return int(self._offsets.shape[0] - 1)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        j = row_index(i, len(self), "text")
        a, b = int(self._offsets[j]), int(self._offsets[j + 1])
        return json.loads(os.pread(self._fh.fileno(), b - a, a).decode("utf-8"))

    def __iter__(self) -> Iterator[str]:
        fd, pos, end = self._fh.fileno(), 0, int(self._offsets[-1])
        buf = b""
        while pos < end or buf:
            if pos < end:
                block = os.pread(fd, min(1 << 22, end - pos), pos)
                pos += len(block)
                buf += block
            lines = buf.split(b"\n")
            buf = lines.pop()
            for line in lines:
                yield json.loads(line.decode("utf-8"))
            if pos >= end and buf:
                yield json.loads(buf.decode("utf-8"))
                buf = b""


#: Name prefix of a build's temporary folder (hidden; a killed build's folder is removed by the next build).
BUILD_PREFIX = ".skillsight-build-"
#: Seconds after which a build folder without a lock file (older versions, or a killed build caught
#: between creating its folder and its lock) counts as stale.
STALE_UNLOCKED_S = 3600.0


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive ``flock`` of ``path`` (created if missing), or None when another
    process holds it."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def remove_stale_builds(workdir: str | os.PathLike[str] | None) -> int:
    """Remove the temporary folders of builds that were killed (``kill -9``) in ``workdir``.

    A live build holds an ``flock`` on its folder's ``.lock``; a folder whose lock can be taken has
    no live owner. Returns how many folders were removed.
    """
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - Windows: no leftovers are removed
        return 0
    root = Path(workdir) if workdir is not None else Path(tempfile.gettempdir())
    removed = 0
    try:
        candidates = [*root.glob(f"{BUILD_PREFIX}*"), *root.glob("skillsight-build-*")]  # old name too
    except OSError:
        return 0
    for d in candidates:
        if not d.is_dir() or d.is_symlink():
            continue
        lock = d / ".lock"
        try:
            if not lock.exists():
                if time.time() - d.stat().st_mtime < STALE_UNLOCKED_S:
                    continue
                fd = None
            else:
                fd = _try_lock(lock)
                if fd is None:
                    continue  # a live build
            try:
                shutil.rmtree(d)
                removed += 1
            finally:
                if fd is not None:
                    os.close(fd)
        except OSError as exc:
            logger.debug("cannot remove the stale build folder %s: %s", d, exc)
    if removed:
        logger.info("removed %d folder(s) of killed builds in %s", removed, root)
    return removed


class StreamBuilder:
    """Accumulate shards in row order; :meth:`finish` assembles the index.

    Parameters
    ----------
    config : IndexConfig
    workdir : path, optional
        Where the temporary embedding and text files go (default: the system's temporary folder;
        give a folder on the output's disk for large builds).
    """

    def __init__(self, config: IndexConfig, workdir: str | os.PathLike[str] | None = None) -> None:
        # auto settles at finish: into the fitted tier when every shard carried token sums (as the in-memory
        # build does with the transformer), else into the transformer
        self.config = config
        remove_stale_builds(workdir)
        self._dir = Path(tempfile.mkdtemp(prefix=BUILD_PREFIX, dir=workdir))
        self._lock: int | None = None
        try:
            self._lock = _try_lock(self._dir / ".lock")  # held while this build lives
        except (ImportError, OSError):  # pragma: no cover - no flock here
            pass
        self._emb = open(self._dir / "embeddings.f32", "wb")  # noqa: SIM115
        self._namedesc = open(self._dir / "namedesc.f32", "wb")  # stays empty for the text vector  # noqa: SIM115
        self._n_namedesc = 0
        self._texts = open(self._dir / "texts.jsonl", "w+b")  # noqa: SIM115
        self._text_ends: list[int] = [0]
        self.stats: CorpusStats | None = None
        self.metas: list[SkillMeta] = []
        self.flags: list[list[str]] = []
        self.cues: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self.token_sums: np.ndarray | None = None
        self.token_counts: np.ndarray | None = None
        self._all_token_sums = True
        self._ids: set[str] = set()
        self._indptr: list[np.ndarray] = []
        self._terms: list[np.ndarray] = []
        self._tf: list[np.ndarray] = []
        self._len: list[np.ndarray] = []
        self._nnz = 0
        self.seconds: dict[str, float] = {"add": 0.0, "finish": 0.0}

    def __len__(self) -> int:
        return len(self.metas)

    def add(self, shard: Shard) -> None:
        """Append a shard's rows after the rows added so far.

        Raises
        ------
        DuplicateSkillError
            A skill id was already added.
        """
        t0 = time.perf_counter()
        for m in shard.metas:
            if m.id in self._ids:
                raise DuplicateSkillError(
                    f"duplicate skill id {m.id!r}; ids must be unique across all sources")
            self._ids.add(m.id)
        emb = np.ascontiguousarray(shard.embeddings, dtype=np.float32)
        if self.stats is None:
            self.stats = CorpusStats.empty(emb.shape[1])
        elif emb.shape[1] != self.stats.emb_sum.shape[0]:
            raise EmbeddingError(f"a shard of dimension {emb.shape[1]} after shards of "
                                 f"dimension {self.stats.emb_sum.shape[0]}")
        where = self.stats.add(shard.stats).astype(np.int32)
        self._emb.write(emb.tobytes())
        if shard.namedesc is not None:
            self._namedesc.write(np.ascontiguousarray(shard.namedesc, dtype=np.float32).tobytes())
            self._n_namedesc += len(shard)
        # terms to provisional corpus-wide ids (rows are re-sorted once the vocabulary is sorted)
        self._terms.append(where[shard.doc_terms] if shard.doc_terms.size
                           else shard.doc_terms.astype(np.int32))
        self._indptr.append(np.diff(shard.doc_indptr))
        self._tf.append(shard.doc_tf)
        self._len.append(shard.doc_len)
        self._nnz += int(shard.doc_terms.size)
        self.metas.extend(shard.metas)
        self.flags.extend(shard.flags)
        self.cues.extend(shard.cues or [((), ())] * len(shard))
        if shard.token_sums is None or shard.token_counts is None:
            self._all_token_sums = False
            self.token_sums = self.token_counts = None
        elif self._all_token_sums:
            if self.token_sums is None:
                self.token_sums = np.array(shard.token_sums, dtype=np.float64)
                self.token_counts = np.array(shard.token_counts, dtype=np.int64)
            else:
                assert self.token_counts is not None
                self.token_sums += shard.token_sums
                self.token_counts += shard.token_counts
        end = self._text_ends[-1]
        for body in shard.bodies:
            line = (json.dumps(body, ensure_ascii=False) + "\n").encode("utf-8")
            self._texts.write(line)
            end += len(line)
            self._text_ends.append(end)
        self.seconds["add"] += time.perf_counter() - t0

    def finish(self, *, model_id: str = "unknown", model_checksum: str = "",
               encoder: Encoder | None = None) -> SkillIndex:
        """Assemble the index from everything added (see the module docstring).

        Raises
        ------
        EmptyLibraryError
            No skill was added.
        """
        from skillsight_fast.engine.adaptive import decide_from_statistics
        from skillsight_fast.engine.index import SkillIndex

        t0 = time.perf_counter()
        if self.stats is None or not self.metas:
            self.close()
            raise EmptyLibraryError("no skills to index")
        config, n, d = self.config, len(self.metas), int(self.stats.emb_sum.shape[0])
        self._emb.flush()
        self._texts.flush()
        emb = np.memmap(self._dir / "embeddings.f32", dtype=np.float32, mode="r", shape=(n, d))
        self._namedesc.flush()
        namedesc = None
        if self._n_namedesc == n:  # every shard carried them (a mix would be a bug upstream)
            namedesc = np.memmap(self._dir / "namedesc.f32", dtype=np.float32, mode="r", shape=(n, d))
        self._namedesc.close()
        texts = DiskTexts(self._texts, np.asarray(self._text_ends, dtype=np.int64))
        self._emb.close()
        shutil.rmtree(self._dir, ignore_errors=True)  # the mapping and the open text file stay valid

        # the lexicon over the sorted vocabulary (equal to Lexicon.build over all the texts)
        stats, rank = self.stats.sorted()
        doc_indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.concatenate(self._indptr), out=doc_indptr[1:])
        doc_terms = np.concatenate(self._terms) if self._terms else np.zeros(0, np.int32)
        doc_tf = np.concatenate(self._tf)
        doc_len = np.concatenate(self._len).astype(np.int32)
        self._indptr, self._terms, self._tf, self._len = [], [], [], []
        remap_sort_rows(doc_indptr, doc_terms, doc_tf, rank)
        post_indptr, post_docs = transpose_csr(doc_indptr, doc_terms, len(stats.vocab))
        lexicon = Lexicon(stats.vocab, doc_indptr, doc_terms, post_indptr, post_docs, doc_tf, doc_len)
        lexical, _ = LexicalState.build(lexicon, beta=config.scoring.beta,
                                        otsu_weighted=config.background.otsu_weighted)
        terms = select_background_terms(stats.df, lexical.idf, lexical.generic,
                                        config.background.tokens, config.seed)

        # round 2 over blocks of the mapped embeddings: g_t = Σ_{d ∋ t} d / df(t), and Rule 1's g
        slot = np.full(len(stats.vocab), -1, np.int32)
        slot[terms] = np.arange(terms.size, dtype=np.int32)
        tok = TokenStats(np.zeros((terms.size, d)))
        for a in range(0, n, ROUND2_BLOCK):
            b = min(n, a + ROUND2_BLOCK)
            tok = tok.merge(TokenStats.of(doc_indptr[a : b + 1], doc_terms, emb[a:b], slot,
                                          lexical.generic, terms.size))
        df_t = np.maximum(stats.df[terms], 1).astype(np.float64)[:, None]
        directions = (tok.sums / df_t).astype(np.float32)  # float32 as token_directions returns
        bg = background_from_directions(directions, stats.mean, max_rank=config.background.max_rank,
                                        rank=config.background.rank)
        if config.adaptive:
            decisions, basis, rule_stats = decide_from_statistics(
                tok.generic_share, stats.background_energy(bg.basis), bg.basis, config)
        else:
            decisions, basis, rule_stats = Decisions.of_config(config, background=True), bg.basis, {}
        ready: dict[str, Any] = {}
        rows: Any = self.metas
        if self.can_fit(encoder):
            # the table tier, built once here from the shards' outputs: the contextual table is the shards'
            # token sums added up; the fit and the query map read every skill again (as the in-memory build)
            from skillsight_fast.models.contextual import contextual_table

            assert self.token_sums is not None and self.token_counts is not None
            settled = config.settled(can_fit=True).encoder.query_encoder
            rows = skill_rows(self.metas, texts, self.cues)
            ready = {"query_table": contextual_table(self.token_sums, self.token_counts),
                     "fit_query_table": settled == "fitted"}
            self.token_sums = self.token_counts = None
        index = SkillIndex.from_embeddings(
            rows, emb, config, model_id=model_id, model_checksum=model_checksum, encoder=encoder,
            lexicon=lexicon, basis=(basis, bg.singular_values), decisions=decisions, namedesc=namedesc,
            derive=False, **ready,
        )
        index.state.stats = dataclasses.replace(
            index.state.stats, effective_rank=int(bg.effective_rank), n_background_terms=int(terms.size),
            **rule_stats)
        index.state.flags = self.flags
        index.state.bodies = texts  # type: ignore[assignment]  # a Sequence[str] on disk
        if encoder is not None:  # the label-free abstention rule, from the skills' own fields
            from skillsight_fast.engine.abstention import derive_abstention

            index.state.abstention = derive_abstention(index, index.state.bodies)
        self.seconds["finish"] = time.perf_counter() - t0
        logger.info("streamed build: %d skills, vocabulary %d, assembled in %.2f s",
                    n, len(stats.vocab), self.seconds["finish"])
        return index

    def can_fit(self, encoder: Encoder | None) -> bool:
        """Whether :meth:`finish` builds the table tier ``auto`` settles into: every shard carried its token
        sums (:func:`~skillsight_fast.indexing.shard.wants_token_sums`) and ``encoder`` (the fit's teacher)
        gives token states; else the index is the ``transformer`` tier."""
        from skillsight_fast.engine.query_encoders import gives_token_states

        return self._all_token_sums and self.token_sums is not None and gives_token_states(encoder)

    def close(self) -> None:
        """Drop the temporary files (after :meth:`finish` only the open text file remains)."""
        for fh in (self._emb, self._namedesc):
            if not fh.closed:
                fh.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def chunks(skills: Iterable[Skill], size: int) -> Iterator[list[Skill]]:
    """Consecutive lists of ``size`` skills (the last one shorter)."""
    it = iter(skills)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def stream_build(skills: Iterable[Skill], encoder: Encoder, config: IndexConfig | None = None, *,
                 chunk_size: int = DEFAULT_CHUNK, workdir: str | os.PathLike[str] | None = None,
                 on_chunk: Callable[[int], None] | None = None) -> SkillIndex:
    """Build an index from a stream of skills, one chunk at a time, in this process.

    Parameters
    ----------
    skills : iterable of Skill
        E.g. :func:`skillsight_fast.library.skills.iter_skills`.
    encoder : Encoder
    config : IndexConfig, optional
    chunk_size : int
        Skills analysed and encoded together.
    workdir : path, optional
        Folder for the temporary files (:class:`StreamBuilder`).
    on_chunk : callable, optional
        Called with the number of skills done after each chunk (progress).

    Returns
    -------
    SkillIndex
        Equal to ``SkillIndex.build(list(skills), encoder, config)``.
    """
    config = config or IndexConfig()
    builder = StreamBuilder(config, workdir)
    try:
        for chunk in chunks(skills, chunk_size):
            builder.add(encode_shard(chunk, encoder, config))
            if on_chunk is not None:
                on_chunk(len(builder))
        return builder.finish(model_id=encoder.model_id, model_checksum=encoder.checksum, encoder=encoder)
    finally:
        builder.close()
