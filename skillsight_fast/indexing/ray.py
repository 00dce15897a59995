"""Distributed build on Ray: shards encoded on Ray workers, statistics added, one index written.

The driver reads the sources as a stream (:func:`skillsight_fast.library.skills.iter_skills`), cuts it into
chunks and hands them round-robin to ``workers`` Ray actors. Each actor loads the encoder once
(``encoder_factory``, called on the worker) and turns a chunk into a
:class:`~skillsight_fast.indexing.shard.Shard`: the chunk analysed, encoded and summarised
(:func:`~skillsight_fast.indexing.shard.encode_shard`). The driver adds the shards in chunk order to a
:class:`~skillsight_fast.indexing.stream.StreamBuilder`, with at most two chunks per worker in
flight, and assembles the index exactly as the single-machine streaming build does, so both write
the same index (tests/indexing/test_build_ray.py).

With ``write_folders`` (:class:`skillsight_fast.cluster.build.ShardFolders`; ``skillsight -c ray=ADDRESS
-c shards=N index``) each worker also leaves its chunk's rows in Ray's object store, and once the library-wide
statistics are known one Ray task per shard writes that shard's folder from them, byte for byte the
folder ``skillsight split`` writes from the saved index.

Ray is an optional dependency: the ``ray`` extra (``pip install '.[ray]'`` in the clone). On a cluster
every node
needs skillsight-fast and the model files at the same path.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from skillsight_fast.config import IndexConfig
from skillsight_fast.errors import SkillsightError, install_hint
from skillsight_fast.indexing.shard import Shard, ShardRows, encode_shard
from skillsight_fast.indexing.stream import DEFAULT_CHUNK, StreamBuilder, chunks
from skillsight_fast.library.skills import Skill
from skillsight_fast.types import Encoder

if TYPE_CHECKING:
    from skillsight_fast.engine.index import SkillIndex

logger = logging.getLogger(__name__)

#: Chunks queued per worker (one being encoded, one waiting), so no worker idles between chunks.
IN_FLIGHT_PER_WORKER = 2


class RayNotInstalledError(SkillsightError):
    """The ``ray`` extra is not installed."""


def import_ray() -> Any:
    """The ``ray`` module, or :class:`RayNotInstalledError` naming the extra."""
    try:
        import ray
    except ImportError:
        raise RayNotInstalledError(
            "the Ray build needs ray: " + install_hint("ray")) from None
    return ray


class ShardWorker:
    """What each Ray actor runs: the encoder, loaded once, and :func:`encode_shard`."""

    def __init__(self, encoder_factory: Callable[[], Encoder], config: IndexConfig) -> None:
        self.encoder = encoder_factory()
        self.config = config

    def identity(self) -> tuple[str, str, int]:
        """(model id, checksum, pid) of this worker's encoder."""
        return self.encoder.model_id, self.encoder.checksum, os.getpid()

    def encode(self, skills: list[Skill]) -> Shard:
        return encode_shard(skills, self.encoder, self.config)

    def encode_rows(self, skills: list[Skill]) -> tuple[Shard, ShardRows]:
        """The shard, and apart what a shard folder needs of it (two objects: the driver fetches the first,
        a shard writer the second)."""
        shard = encode_shard(skills, self.encoder, self.config)
        return shard, shard.rows()


def ray_build(skills: Iterable[Skill], encoder_factory: Callable[[], Encoder],
              config: IndexConfig | None = None, *, address: str | None = None,
              workers: int | None = None, chunk_size: int = DEFAULT_CHUNK,
              workdir: str | os.PathLike[str] | None = None, query_encoder: Encoder | None = None,
              on_chunk: Callable[[int], None] | None = None,
              write_folders: Callable[[SkillIndex, Sequence[tuple[Any, int]]], None] | None = None,
              ) -> SkillIndex:
    """Build an index with the shards encoded on Ray workers.

    Parameters
    ----------
    skills : iterable of Skill
    encoder_factory : callable
        Returns the document encoder; pickled and called once on every worker (e.g.
        ``functools.partial(load_encoder, "all-MiniLM-L6-v2", threads=1)``).
    config : IndexConfig, optional
    address : str, optional
        The cluster to join (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``); None starts a local
        one. When this process is already connected to Ray, that connection is used.
    workers : int, optional
        Ray actors (one CPU each); default the cluster's CPUs.
    chunk_size : int
        Skills per shard.
    workdir : path, optional
        Temporary files of the driver (:class:`StreamBuilder`).
    query_encoder : Encoder, optional
        Attached to the returned index for searching, the teacher of the fitted tier's fit and the
        encoder of the abstention rule's searches, all run once in this process; default
        ``encoder_factory()`` called here (the workers' encoders stay on the workers).
    on_chunk : callable, optional
        Called with the number of skills added after each shard.
    write_folders : callable, optional
        Called with the index and, per chunk in row order, ``(ref, rows)``: the Ray object holding the
        chunk's :class:`~skillsight_fast.indexing.shard.ShardRows` and its number of rows, while Ray is
        up and the objects live (:class:`skillsight_fast.cluster.build.ShardFolders` writes each shard
        folder from them on a Ray worker).

    Returns
    -------
    SkillIndex
        The index the single-machine build writes.
    """
    ray = import_ray()
    config = config or IndexConfig()  # auto settles in the driver's StreamBuilder.finish
    started = not ray.is_initialized()
    if started:
        # None starts one here ("local"): Ray's own default would join any cluster running on this machine
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
    try:
        n_workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1)(ShardWorker)
        pool = [actor.remote(encoder_factory, config) for _ in range(n_workers)]
        identities = ray.get([w.identity.remote() for w in pool])
        if len({(m, c) for m, c, _ in identities}) != 1:
            raise SkillsightError(f"the Ray workers loaded different encoders: {identities}")
        model_id, checksum, _ = identities[0]
        logger.info("ray build: %d workers, chunks of %d skills", n_workers, chunk_size)
        # the driver's copy: the fitted tier's teacher, the abstention rule's searches
        if query_encoder is None:
            query_encoder = encoder_factory()
        builder = StreamBuilder(config, workdir)
        try:
            pending: collections.deque[Any] = collections.deque()
            parts: list[tuple[Any, int]] = []
            for i, chunk in enumerate(chunks(skills, chunk_size)):
                worker = pool[i % n_workers]
                if write_folders is None:
                    pending.append(worker.encode.remote(chunk))
                else:  # the folder's part stays in the object store until the statistics are known
                    shard_ref, rows_ref = worker.encode_rows.options(num_returns=2).remote(chunk)
                    pending.append(shard_ref)
                    parts.append((rows_ref, len(chunk)))
                while len(pending) >= IN_FLIGHT_PER_WORKER * n_workers:
                    _add(builder, ray.get(pending.popleft()), on_chunk)
            while pending:
                _add(builder, ray.get(pending.popleft()), on_chunk)
            index = builder.finish(model_id=model_id, model_checksum=checksum, encoder=query_encoder)
            if write_folders is not None:  # the encoders' CPUs go to the shard writers (the parts stay:
                _stop(ray, pool)           # this process owns them)
                write_folders(index, parts)
            return index
        finally:
            builder.close()
            _stop(ray, pool)
    finally:
        if started:
            ray.shutdown()


def _stop(ray: Any, pool: list[Any]) -> None:
    for w in pool:
        ray.kill(w)
    pool.clear()


def _add(builder: StreamBuilder, shard: Shard, on_chunk: Callable[[int], None] | None) -> None:
    builder.add(shard)
    if on_chunk is not None:
        on_chunk(len(builder))
