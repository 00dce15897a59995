"""The engine's front (issue 38): a small SkillIndex, one Searcher protocol that the single and the sharded
index both implement explicitly, building from a Prebuilt value, and the cascade chosen per search."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cpu import expected_here
from fakes import HashEncoder, toy_skills

from skillsight_fast import Cascade, IndexConfig, SkillIndex
from skillsight_fast.cluster.index import ShardedIndex
from skillsight_fast.engine.build import Prebuilt
from skillsight_fast.engine.cascade import NO_CASCADE
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.searcher import Searcher

DATA = Path(__file__).resolve().parents[1] / "data"
TASKS = ["merge pdf pages", "resize png thumbnails", "clean csv columns"]


@pytest.fixture(scope="module")
def built():
    return SkillIndex.build(toy_skills(12), HashEncoder(), IndexConfig(document_vector="text"))


def public_names(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_skill_index_is_a_small_front(built) -> None:
    names = public_names(SkillIndex) | {n for n in vars(built) if not n.startswith("_")}
    assert len(names) <= 30, sorted(names)
    assert "__getattr__" not in vars(ShardedIndex)  # every member it offers is written out


def test_both_indexes_implement_the_searcher_protocol(built, tmp_path) -> None:
    built.save(tmp_path / "idx")
    sharded = ShardedIndex.local(tmp_path / "idx", 2)
    sharded.encoder = HashEncoder()
    for searcher in (built, sharded):
        assert isinstance(searcher, Searcher)
        for name in ("state", "skills", "pins", "dense"):
            getattr(searcher, name)
    np.testing.assert_array_equal(sharded.search(TASKS, k=3).ids, built.search(TASKS, k=3).ids)


def test_a_prebuilt_value_and_its_keywords_build_the_same_index(built) -> None:
    texts = [s.text for s in toy_skills(12)]
    lexicon = Lexicon.build(texts, 2, 40)
    config = IndexConfig(document_vector="text")
    a = SkillIndex.from_embeddings(built.skills, built.dense.embeddings, config, texts=texts, lexicon=lexicon)
    b = SkillIndex.from_embeddings(built.skills, built.dense.embeddings, config,
                                   prebuilt=Prebuilt(texts=texts, lexicon=lexicon))
    np.testing.assert_array_equal(a.dense.embeddings_perp, b.dense.embeddings_perp)
    vectors = HashEncoder().encode(TASKS)
    np.testing.assert_array_equal(a.search_vectors(vectors, TASKS, 5).ids, b.search_vectors(vectors, TASKS, 5).ids)
    with pytest.raises(TypeError, match="unknown build input"):
        SkillIndex.from_embeddings(built.skills, built.dense.embeddings, config, lexicon_=lexicon)
    with pytest.raises(TypeError, match="not both"):
        SkillIndex.from_embeddings(built.skills, built.dense.embeddings, config, prebuilt=Prebuilt(), texts=texts)


@pytest.mark.model
def test_the_cascade_is_chosen_per_search_on_an_old_index(tmp_path) -> None:
    """The index saved before the cascade left the build config: its default cascade is the old config's
    values; a search without a cascade answers with the lookup alone, as an index built without one."""
    index = SkillIndex.load(DATA / "index_before_sections")
    assert index.cascade == Cascade(0.45, 64)
    expected = json.loads(expected_here(DATA / "index_before_sections.expected.json").read_text(encoding="utf-8"))
    tasks = expected["queries"]
    lookup = index.search_vectors(index.encode(tasks), tasks, 10)
    assert index.search(tasks, k=10, cascade=NO_CASCADE).skill_ids == lookup.skill_ids
    assert index.search(tasks, k=10).skill_ids == expected["skill_ids"]
    index.save(tmp_path / "new")
    manifest = json.loads((tmp_path / "new" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["cascade"] == {"fallback_below": 0.45, "lookup_min_pieces": 64}
    assert "fallback_below" not in manifest["config"]
    assert SkillIndex.load(tmp_path / "new").cascade == index.cascade
