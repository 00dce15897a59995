"""Sharded search continues a tool catalogue's ranking past the fused head as the single index does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder

from skillsight_fast.cluster.index import ShardedIndex
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.library.skills import load_skills

CORPUS = Path(__file__).resolve().parents[2] / "data" / "skillsbench" / "corpus.jsonl.gz"
QUERIES = ["extract the tables of a PDF report", "resize png thumbnails for a web page",
           "merge two branches and fix the conflicts", "zzzz qqqq"]


@pytest.mark.parametrize("shards", [1, 3])
def test_in_process_shards_continue_as_the_single_index(tmp_path, shards):
    index = SkillIndex.build(load_skills([CORPUS]).skills[:400], HashEncoder(dim=48),
                             IndexConfig(candidates=60, lexical_evidence="all"))
    folder = index.save(tmp_path / "idx")
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    sharded = ShardedIndex.local(folder, shards)
    sharded.head.encoder = HashEncoder(dim=48)
    assert single.decisions.continuation == "rrf"
    for k in (10, 30):
        a, b = single.search(QUERIES, k=k), sharded.search(QUERIES, k=k)
        assert a.skill_ids == b.skill_ids and a.evidence == b.evidence
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-6)
    fused = sharded.search(QUERIES, k=30, continuation="fused")
    assert fused.skill_ids == single.search(QUERIES, k=30, continuation="fused").skill_ids
    assert fused.skill_ids != sharded.search(QUERIES, k=30).skill_ids
