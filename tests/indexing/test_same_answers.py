"""A streaming build gives the index the in-memory build gives, with the real MiniLM on a real dataset:
the same query tier and lookup-first cascade, the same label-free abstention rule and duplicate collapse,
and the same answers to every task, abstentions included (issue 43, item 0). The Ray build is held to the
same in tests/indexing/test_build_ray.py with :func:`assert_same_answers`."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillsight_fast.agents.find import find_skills
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.indexing import stream_build

DATA = Path(__file__).resolve().parents[2] / "data"


def subset(name: str = "gorilla_hf", tasks: int = 30, docs: int = 120):
    """(skills, task texts): the gold skills of the first ``tasks`` tasks plus evenly spread others."""
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    ds = load_dataset(DATA / name, limit=tasks)
    rows = {g for q in ds.queries for g in q.gold}
    step = max(1, len(ds.docs) // docs)
    rows |= set(range(0, len(ds.docs), step)[: max(0, docs - len(rows))])
    return [ds.docs[i] for i in sorted(rows)], [q.text for q in ds.queries]


def assert_same_answers(a: SkillIndex, b: SkillIndex, tasks: list[str]) -> None:
    """Same tier, cascade, abstention rule, and the same hits (ids, order) and abstentions per task."""
    assert a.state.config.encoder.query_encoder == b.state.config.encoder.query_encoder
    assert a.state.cascade == b.state.cascade
    ra, rb = a.state.abstention, b.state.abstention
    assert (ra is None) == (rb is None)
    if ra is not None:
        assert ra.get("source") == rb.get("source")
        for key in ("threshold", "duplicate_cosine"):
            if ra.get(key) is None or rb.get(key) is None:
                assert ra.get(key) is rb.get(key) is None, key
            else:
                assert abs(ra[key] - rb[key]) < 1e-4, key
    for x, y in zip(find_skills(a, tasks, k=10), find_skills(b, tasks, k=10), strict=True):
        assert x.abstained == y.abstained, x.query
        assert [h.id for h in x.hits] == [h.id for h in y.hits], x.query


@pytest.fixture(scope="module")
def single(teacher):
    skills, tasks = subset()
    return skills, tasks, SkillIndex.build(skills, teacher, IndexConfig())


@pytest.mark.model
def test_streamed_build_answers_as_the_single_machine_build(single, teacher, tmp_path):
    skills, tasks, whole = single
    assert whole.state.config.encoder.query_encoder == "fitted" and whole.state.abstention is not None
    streamed = stream_build(iter(skills), teacher, IndexConfig(), chunk_size=37, workdir=tmp_path)
    assert streamed.state.config.encoder.query_encoder == "fitted"
    assert_same_answers(streamed, whole, tasks)
    # and saved, the streamed index loads and answers the same
    streamed.save(tmp_path / "s")
    loaded = SkillIndex.load(tmp_path / "s")
    loaded.encoder = teacher
    assert_same_answers(loaded, whole, tasks)
