"""Sharded serving on Ray: an index's rows split over shards that share the library's global statistics.

- :mod:`skillsight_fast.cluster.shard`: :class:`ShardEngine`, one shard (a row range of the index
  folder, memory-mapped, scored with the library's LEC weights, BM25 idf and mean document length);
  run as a Ray actor.
- :mod:`skillsight_fast.cluster.index`: :class:`ShardedIndex`, the coordinator: encodes, fans a
  search out, merges the candidates as the single index's scan would have found them, fuses, and
  offers what :func:`~skillsight_fast.agents.find.find_skills` and :class:`~skillsight_fast.agents.service.SkillService`
  read of an index (``skillsight serve --ray ADDRESS --shards N``).

The answer equals the single index's (tests/test_cluster.py, on a local Ray cluster); measurements and
the plan for 10M and 100M skills are in docs/LARGE.md. Imports engine-level modules only (never the
CLI or the agent surfaces); ``ray`` is imported only by :meth:`ShardedIndex.connect`.
"""

from skillsight_fast.cluster.index import ShardedIndex, shard_ranges
from skillsight_fast.cluster.shard import ShardEngine

__all__ = ["ShardEngine", "ShardedIndex", "shard_ranges"]
