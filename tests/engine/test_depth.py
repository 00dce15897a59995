"""engine.depth: the fused head, then RRF of the dense and lexical lists."""

from __future__ import annotations

import numpy as np
import pytest

from skillsight_fast.engine.depth import head_then_rrf, rrf_order
from skillsight_fast.engine.result import fused_result


def reference(fused, dense, lexical, k, head, rrf_k=60.0):
    """Obviously correct: score every id by Σ 1/(rrf_k + rank), sort, prepend the head."""
    out = []
    for f, d, l in zip(fused, dense, lexical):  # noqa: E741
        kept = []
        for j in f:
            if len(kept) >= min(head, k):
                break
            if j >= 0 and j not in kept:
                kept.append(int(j))
        score, ranks = {}, []
        for lst in (d, l):
            r = {}
            for pos, j in enumerate(lst):
                if j >= 0 and j not in r:
                    r[int(j)] = pos + 1
            ranks.append(r)
            for j, rank in r.items():
                score[j] = score.get(j, 0.0) + 1.0 / (rrf_k + rank)
        big = 10 ** 9
        order = sorted(score, key=lambda j: (-score[j], ranks[0].get(j, big), ranks[1].get(j, big), j))
        kept += [j for j in order if j not in kept]
        row = kept[:k] + [-1] * max(0, k - len(kept))
        out.append(row)
    return np.array(out, np.int64).reshape(len(out), k)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("head", [0, 1, 3, 10])
@pytest.mark.parametrize("k", [1, 5, 12, 40])
def test_matches_the_reference_on_random_lists(seed, head, k):
    rng = np.random.default_rng(seed)
    n, n_docs = 4, 30

    def lists(depth):
        out = np.full((n, depth), -1, np.int64)
        for i in range(n):
            m = int(rng.integers(0, depth + 1))
            out[i, :m] = rng.choice(n_docs, m, replace=False)
        return out

    fused, dense, lexical = lists(15), lists(20), lists(8)
    got = head_then_rrf(fused, dense, lexical, k, head)
    assert np.array_equal(got, reference(fused, dense, lexical, k, head))
    for row in got:  # each id at most once, padding only at the end
        valid = row[row >= 0]
        assert len(set(valid.tolist())) == valid.size
        assert (row[valid.size:] == -1).all()


def test_head_kept_and_the_rest_by_rrf():
    # 7 is first in both lists, so RRF puts it right after the fused head
    got = head_then_rrf(np.array([[3, 5, 7]]), np.array([[7, 5, 1]]), np.array([[7, 2, 5]]), k=5, head=2)
    assert got.tolist() == [[3, 5, 7, 2, 1]]  # 2 is second in one list (1/62), 1 third (1/63)
    tie = head_then_rrf(np.array([[9]]), np.array([[1, 8]]), np.array([[2, 8]]), k=3, head=0)
    assert tie.tolist() == [[8, 1, 2]]  # 1 and 2 tie on score: 1 has the better dense rank


def test_head_at_least_k_is_the_fused_ranking():
    fused = np.array([[4, 2, 9, -1]])
    assert head_then_rrf(fused, np.array([[1]]), np.array([[2]]), k=3, head=10).tolist() == [[4, 2, 9]]


def test_empty_rows_and_short_union_are_padded():
    got = head_then_rrf(np.full((2, 3), -1), np.array([[-1, -1], [6, -1]]), np.full((2, 1), -1), k=3, head=1)
    assert got.tolist() == [[-1, -1, -1], [6, -1, -1]]


def test_rrf_order_counts_a_repeated_id_once():
    ids, scores = rrf_order([np.array([2, 2, 3]), np.array([-1])], rrf_k=0.0)
    assert ids.tolist() == [2, 3] and scores.tolist() == [1.0, 1 / 3]


def test_bad_arguments_are_refused():
    one = np.array([[1]])
    with pytest.raises(ValueError, match="rows differ"):
        head_then_rrf(one, np.array([[1], [2]]), one, k=1, head=0)
    with pytest.raises(ValueError, match=">= 0"):
        head_then_rrf(one, one, one, k=-1, head=0)
    with pytest.raises(ValueError, match="rrf_k"):
        rrf_order([np.array([1])], rrf_k=-1.0)


def test_continue_positions_reads_the_candidate_rows():
    from skillsight_fast.engine.depth import continue_positions

    s_dense = np.array([[0.9, 0.8, 0.7, 0.6, -np.inf]], np.float32)
    s_lex = np.array([[0.0, 0.0, 2.0, 1.0, 5.0]], np.float32)  # column 4 is padding: never returned
    fused = np.array([[2, 0, 1, 3, -1]])
    got = continue_positions(fused, s_dense, s_lex, k=5, head=1)
    # after the head (column 2): column 3 (dense 4th, lexical 2nd: 1/64 + 1/62), then column 0 (dense
    # 1st only: 1/61), then column 1 (1/62)
    assert got.tolist() == [[2, 3, 0, 1, -1]]
    assert continue_positions(fused, s_dense, s_lex, k=3, head=10).tolist() == [[2, 0, 1]]


def _tool_index(n_extra=60, seed=2, **config):
    from fakes import HashEncoder, toy_skills

    from skillsight_fast import IndexConfig, SkillIndex

    enc = HashEncoder(dim=64)
    return SkillIndex.build(toy_skills(n_extra=n_extra, seed=seed), enc,
                            IndexConfig(lexical_evidence="all", **config)), enc


TASKS = ["merge pdf pages and extract tables", "resize png images", "deploy docker compose",
         "zzzz qqqq", "convert a spreadsheet to csv and plot it"]


def _reference(index, vectors, texts, k):
    """Stages run one by one, fused over every candidate, then head_then_rrf of the candidates' s⊥ order
    and lexical order (a lexical score of 0 ranks nowhere), written without the engine's helpers."""
    d = index.decisions
    q = index.remove_background(vectors)
    cand, s_dense = index.dense_candidates(q, max(d.candidates, k))
    terms, ptr = index.evidence_tokens(texts, exclude=index.lexical.stopword_flags)
    s_lex = index.lexical_scores(cand, terms, ptr)
    full, _ = fused_result(index, cand, s_dense, s_lex, cand.shape[1], d, vectors)
    order = np.argsort(-np.where(cand >= 0, s_dense, -np.inf), axis=1, kind="stable")
    dense = np.take_along_axis(cand, order, axis=1)
    lo = np.argsort(-np.where(cand >= 0, s_lex, -np.inf), axis=1, kind="stable")
    lexical = np.where(np.take_along_axis(s_lex, lo, axis=1) > 0, np.take_along_axis(cand, lo, axis=1), -1)
    return full, head_then_rrf(full.ids, dense, lexical, k, 10)


@pytest.mark.parametrize("k", [11, 20, 50])
def test_a_tool_index_continues_past_the_head_by_rrf(k):
    index, enc = _tool_index()
    assert index.decisions.continuation == "rrf"
    vectors = enc.encode(TASKS)
    full, want = _reference(index, vectors, TASKS, k)
    got = index.search_vectors(vectors, TASKS, k)
    assert np.array_equal(got.ids, want)
    fused = index.search_vectors(vectors, TASKS, k, continuation="fused")
    assert np.array_equal(got.ids[:, :10], fused.ids[:, :10])  # the head is the fused ranking
    assert not np.array_equal(got.ids, fused.ids)  # past it the order is RRF's (these tasks differ there)
    # every hit keeps its own fused score, parts, cosine and evidence
    for i in range(len(TASKS)):
        at = {int(j): c for c, j in enumerate(full.ids[i].tolist()) if j >= 0}
        for c, j in enumerate(got.ids[i].tolist()):
            if j < 0:
                assert got.scores[i, c] == -np.inf and got.skill_ids[i][c] is None and got.evidence[i][c] == []
                continue
            assert got.scores[i, c] == full.scores[i, at[j]] and got.dense[i, c] == full.dense[i, at[j]]
            assert got.lexical[i, c] == full.lexical[i, at[j]] and got.cosine[i, c] == full.cosine[i, at[j]]
            assert got.skill_ids[i][c] == index.skills[j].id
    ev = index.search_vectors(vectors, TASKS, k, continuation="fused")
    by_id = {(i, int(j)): e for i in range(len(TASKS)) for j, e in zip(ev.ids[i], ev.evidence[i])}
    for i in range(len(TASKS)):
        for j, e in zip(got.ids[i].tolist(), got.evidence[i]):
            if (i, j) in by_id:
                assert e == by_id[(i, j)]


def test_the_head_and_skill_libraries_keep_the_fused_ranking():
    index, enc = _tool_index()
    vectors = enc.encode(TASKS)
    for k in (1, 5, 10):  # no continuation within the head
        a = index.search_vectors(vectors, TASKS, k)
        b = index.search_vectors(vectors, TASKS, k, continuation="fused")
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)
    from fakes import toy_skills

    from skillsight_fast import IndexConfig, SkillIndex

    skills = SkillIndex.build(toy_skills(n_extra=60, seed=2), enc, IndexConfig())
    assert skills.decisions.continuation == "fused"
    a = skills.search_vectors(vectors, TASKS, 30)
    assert np.array_equal(a.ids, skills.search_vectors(vectors, TASKS, 30, continuation="fused").ids)


def test_the_continuation_is_saved_and_read_from_older_decisions(tmp_path):
    from skillsight_fast import IndexConfig, SkillIndex
    from skillsight_fast.engine.state import Decisions
    from skillsight_fast.errors import QueryError

    index, enc = _tool_index(continuation="fused")
    assert index.decisions.continuation == "fused"  # given, not derived
    back = SkillIndex.load(index.save(tmp_path / "idx"), encoder=enc)
    assert back.decisions.continuation == "fused" and back.config.scoring.continuation == "fused"
    old = {"background": True, "lexical": "bm25", "lexical_weight": 1.0}
    assert Decisions.from_dict({**old, "lexical_evidence": "all"}).continuation == "rrf"
    assert Decisions.from_dict({**old, "lexical_evidence": "masked"}).continuation == "fused"
    assert Decisions.from_dict(old).continuation == "fused"
    with pytest.raises(QueryError, match="continuation"):
        index.search(TASKS[:1], k=20, continuation="bogus")
    with pytest.raises(ValueError, match="continuation"):
        IndexConfig(continuation="bogus")
