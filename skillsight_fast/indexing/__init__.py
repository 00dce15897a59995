"""Index builds that stream and that run on a Ray cluster (docs/BUILD.md).

Every corpus statistic an index needs is a sum over documents (METHOD.md), so a build is split
into shards (:mod:`~skillsight_fast.indexing.shard`), their statistics are added
(:mod:`~skillsight_fast.indexing.stats`), and one process writes the index
(:mod:`~skillsight_fast.indexing.stream`). :func:`stream_build` runs the shards one after the other
in this process; :func:`skillsight_fast.indexing.ray.ray_build` runs them on Ray workers. Both write
the index :meth:`SkillIndex.build <skillsight_fast.engine.index.SkillIndex.build>` writes.
"""

from skillsight_fast.indexing.shard import Shard, encode_shard
from skillsight_fast.indexing.stats import CorpusStats, TokenStats
from skillsight_fast.indexing.stream import DEFAULT_CHUNK, DiskTexts, StreamBuilder, stream_build

__all__ = ["DEFAULT_CHUNK", "CorpusStats", "DiskTexts", "Shard", "StreamBuilder", "TokenStats",
           "encode_shard", "stream_build"]
