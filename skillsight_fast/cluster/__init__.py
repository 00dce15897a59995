"""Sharded serving on Ray: an index's rows split over shards that share the library's global statistics.

- :mod:`skillsight_fast.cluster.shard`: :class:`ShardEngine`, one shard (a row range of the index
  folder, memory-mapped, scored with the library's LEC weights, BM25 idf and mean document length),
  and :class:`ShardHost`, the Ray actor holding a shard's engine per served version.
- :mod:`skillsight_fast.cluster.index`: :class:`ShardedIndex`, the coordinator: encodes, fans a
  search out, merges the candidates as the single index's scan would have found them, fuses, and
  offers what :func:`~skillsight_fast.agents.find.find_skills` and :class:`~skillsight_fast.agents.service.SkillService`
  read of an index (``skillsight -c ray=ADDRESS -c shards=N serve``), with every search option of the
  single index; :meth:`ShardedIndex.next_version` brings the shards to an updated folder
  (``serve --ray --watch``); a shard that stays down leaves answers flagged ``partial``.
- :mod:`skillsight_fast.cluster.layout`: shard folders on disk (``skillsight split``).
- :mod:`skillsight_fast.cluster.update`: updates of shard folders that rewrite only the shards whose
  rows changed while the background basis holds (the drift rule); ``skillsight update`` on them.
- :mod:`skillsight_fast.cluster.drift`: the drift rule's token directions kept as sums beside the shard
  folders and moved by each update's rows.

The answer equals the single index's, before and after an update (tests/cluster/test_cluster.py, on
a local Ray cluster); measurements and the plan for 10M and 100M skills are in docs/LARGE.md. Imports
engine-level modules only (never the CLI or the agent surfaces); ``ray`` is imported only when the
shards are Ray actors (:meth:`ShardedIndex.connect`).
"""

from skillsight_fast.cluster.index import ShardedIndex, shard_ranges
from skillsight_fast.cluster.shard import ShardEngine, ShardHost

__all__ = ["ShardEngine", "ShardHost", "ShardedIndex", "shard_ranges"]
