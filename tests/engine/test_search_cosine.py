"""``SearchResult.cosine``: the raw qᵀd of every hit, filled by the search itself (NumPy reference)."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import HashEncoder

from skillsight_fast import SkillIndex
from skillsight_fast.errors import QueryError
from skillsight_fast.library.skills import Skill


@pytest.fixture(scope="module")
def index():
    skills = [Skill(f"s{i}", f"skill {i}", f"does task {i}", f"merge pdf pages {i} " * (i % 3 + 1)) for i in range(7)]
    return SkillIndex.build(skills, HashEncoder())


def test_cosine_is_q_dot_d_of_each_hit_and_nan_on_padding(index):
    texts = ["merge pdf pages", "split tables"]
    vectors = index.encode(texts)
    result = index.search_vectors(vectors, texts, 10)  # k > library: three padding columns
    assert result.cosine is not None and result.cosine.shape == result.ids.shape
    assert result.cosine.dtype == np.float32
    emb = np.asarray(index.dense.embeddings, np.float64)
    for i in range(len(texts)):
        for c, j in enumerate(result.ids[i]):
            if j < 0:
                assert np.isnan(result.cosine[i, c])
            else:
                assert result.cosine[i, c] == pytest.approx(float(emb[j] @ vectors[i].astype(np.float64)), abs=1e-5)
    assert (result.ids < 0).sum() == 6


def test_a_server_cap_on_k(index):
    assert index.check_k(5, most=5) == 5
    with pytest.raises(QueryError, match="at most 4"):
        index.check_k(5, most=4)
    assert index.check_k(500) == 500  # the index's own limit is far higher
