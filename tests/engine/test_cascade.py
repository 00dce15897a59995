"""The lookup-first cascade (:class:`~skillsight_fast.engine.cascade.Cascade`, a query-time object): a lookup tier answers a task when its search
is sure, the int8 transformer when it is not; checked against a reference made of the two searches run
separately, with the real MiniLM on real SKILL.md documents (docs/ENCODERS.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.agents.find import find_skills
from skillsight_fast.config import FALLBACK_BELOW
from skillsight_fast.engine.cascade import DEFAULT_CASCADE, NO_CASCADE, Cascade

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def lookup(teacher):
    """(index, tasks): a fitted-tier index of 30 skillsbench documents, no cascade, and 12 tasks."""
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    ds = load_dataset(ROOT / "data" / "skillsbench", limit=8)
    rows = sorted({g for q in ds.queries for g in q.gold} | set(range(0, len(ds.docs), len(ds.docs) // 20)))
    skills = [ds.docs[i] for i in rows][:30]
    tasks = [q.text for q in ds.queries] + ["merge two PDF files into one", "what time is it in Tokyo",
                                            "plot a histogram of column B", "translate this to French"]
    return SkillIndex.build(skills, teacher, IndexConfig(query_encoder="fitted")), tasks


def with_cascade(index: SkillIndex, tau: float | None, least: int = 0) -> SkillIndex:
    """The same arrays with another default cascade (the encoders shared)."""
    state = dataclasses.replace(index.state, cascade=Cascade(tau, least))
    view = SkillIndex(state, index.encoders.attached)
    view.encoders.query_encoder = index.encoders.query_encoder
    return view


def reference(index: SkillIndex, tasks: list[str], k: int, tau: float, least: int = 0
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, scores, vectors): each task's lookup search where it has at least ``least`` word pieces and its
    best fused score is >= tau, else the search of its int8 transformer vector; the searches run apart."""
    from skillsight_fast.models import load_encoder

    qv = index.encode(tasks)
    lk = index.search_vectors(qv, tasks, k, explain=False)
    pieces = np.array([len(ids) for ids in load_encoder("all-MiniLM-L6-v2").tokenize(tasks)])
    keep = (lk.scores[:, 0] >= tau) & (pieces >= least)
    # the int8 graph quantises its activations per batch: encode the tasks it answers, as one batch
    sent = [t for t, sure in zip(tasks, keep) if not sure]
    tv = qv.copy()
    if sent:
        tv[~keep] = load_encoder("all-MiniLM-L6-v2", int8=True).encode(sent)
    tr = index.search_vectors(tv, tasks, k, explain=False)
    return (np.where(keep[:, None], lk.ids, tr.ids), np.where(keep[:, None], lk.scores, tr.scores),
            np.where(keep[:, None], qv, tv))


@pytest.mark.model
def test_cascade_is_the_lookup_where_sure_and_the_transformer_elsewhere(lookup) -> None:
    index, tasks = lookup
    top = index.search(tasks, k=5, explain=False).scores[:, 0]
    tau = float(np.median(top))  # both sides of the gate are exercised
    assert (top >= tau).any() and (top < tau).any()
    view = with_cascade(index, tau)
    ids, scores, vectors = reference(index, tasks, 5, tau)
    got_vectors, got = view.encode_search(tasks, 5)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_allclose(got.scores, scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_vectors, vectors, atol=1e-5)
    np.testing.assert_array_equal(view.search(tasks, k=5).ids, ids)
    # evidence and skill ids follow the rows that were replaced
    full = view.search(tasks, k=5)
    assert [[s for s in row] for row in full.skill_ids] == [[view.skills[j].id if j >= 0 else None for j in row]
                                                          for row in ids.tolist()]
    sent = np.flatnonzero(top < tau)
    np.testing.assert_array_equal(view.cascade.unsure(index.search(tasks, k=5, explain=False)), sent)
    # the cascade is decided at query time: the index without one, given it for one call, answers the same
    assert index.cascade == NO_CASCADE
    np.testing.assert_array_equal(index.search(tasks, k=5, cascade=Cascade(tau)).ids, ids)


@pytest.mark.model
def test_cascade_extremes_are_the_two_encoders(lookup) -> None:
    index, tasks = lookup
    lk = index.search(tasks, k=5, explain=False)
    never = with_cascade(index, -10.0)  # every task is sure: the lookup alone
    np.testing.assert_array_equal(never.search(tasks, k=5).ids, lk.ids)
    always = with_cascade(index, 10.0)  # no task is sure: the transformer alone
    ids, _, _ = reference(index, tasks, 5, 10.0)
    np.testing.assert_array_equal(always.search(tasks, k=5).ids, ids)
    assert not np.array_equal(ids, lk.ids)  # the two encoders differ on these tasks


@pytest.mark.model
def test_find_skills_and_abstention_read_the_vectors_that_answered(lookup) -> None:
    index, tasks = lookup
    view = with_cascade(index, FALLBACK_BELOW)
    vectors, result = view.encode_search(tasks, 5)
    answers = find_skills(view, tasks, k=3, abstention=None, collapse=False)
    for i, answer in enumerate(answers):
        assert [h.id for h in answer.hits] == [view.skills[j].id for j in result.ids[i][:3].tolist()]
        expect = view.dense.embeddings[result.ids[i][:3]] @ vectors[i]
        np.testing.assert_allclose([h.cosine for h in answer.hits], expect, atol=1e-5)
    from skillsight_fast.engine.abstention import derive_abstention

    rule = derive_abstention(view, view.state.bodies)
    assert rule["query_encoder"] == "fitted" and rule["n_pseudo"] > 0


@pytest.mark.model
def test_cascade_threshold_round_trips_and_bad_values_are_refused(lookup, tmp_path: Path) -> None:
    index, tasks = lookup
    view = with_cascade(index, FALLBACK_BELOW)
    view.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["cascade"]["fallback_below"] == FALLBACK_BELOW and "fallback_below" not in manifest["config"]
    loaded = SkillIndex.load(tmp_path / "idx")
    assert loaded.cascade == Cascade(FALLBACK_BELOW)
    np.testing.assert_array_equal(loaded.search(tasks, k=5).ids, view.search(tasks, k=5).ids)
    with pytest.raises(TypeError):
        IndexConfig(query_encoder="fitted", fallback_below=0.4)  # not a build setting any more
    for bad in (float("nan"), True, "0.4", 11.0):
        with pytest.raises(ValueError, match="fallback_below"):
            Cascade(bad)


@pytest.mark.model
def test_short_tasks_go_to_the_transformer_without_a_lookup_pass(lookup) -> None:
    from skillsight_fast.models import load_encoder

    index, tasks = lookup
    pieces = np.array([len(ids) for ids in load_encoder("all-MiniLM-L6-v2").tokenize(tasks)])
    least = int(np.median(pieces))
    assert (pieces < least).any() and (pieces >= least).any()
    tau = float(np.median(index.search(tasks, k=5, explain=False).scores[:, 0]))
    view = with_cascade(index, tau, least)
    np.testing.assert_array_equal(view.cascade.lookup_first(view.encoders.query_encoder.tokenize, tasks),
                                  pieces >= least)
    ids, scores, vectors = reference(index, tasks, 5, tau, least)
    got_vectors, got = view.encode_search(tasks, 5)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_allclose(got.scores, scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_vectors, vectors, atol=1e-5)
    with pytest.raises(ValueError, match="fallback_below"):
        Cascade(lookup_min_pieces=64)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="lookup_min_pieces"):
            Cascade(0.4, bad)


@pytest.mark.model
def test_the_cli_default_builds_the_cascade_and_info_says_so(tmp_path: Path, capsys) -> None:
    from skillsight_fast.cli import main

    src = ROOT / "data" / "personal" / "skills"
    assert main(["index", str(src), "-o", str(tmp_path / "idx"), "--json", "-q"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert (built["query_encoder"], built["fallback_below"], built["lookup_min_pieces"]) == ("fitted", FALLBACK_BELOW, 64)
    assert main(["info", "-i", str(tmp_path / "idx")]) == 0
    assert f"lookup-first cascade: the int8 transformer answers a task whose lookup search scores below " \
           f"{FALLBACK_BELOW:g}, and every task of fewer than 64 word pieces" in capsys.readouterr().out
    # a streamed build fits the same table from its shards' token sums: the same default (issue 43)
    assert main(["-c", "stream=true", "index", str(src), "-o", str(tmp_path / "s"), "--json", "-q"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert (streamed["query_encoder"], streamed["fallback_below"]) == ("fitted", FALLBACK_BELOW)
    assert main(["-c", "query-encoder=transformer", "index", str(src), "-o", str(tmp_path / "t"),
                 "--fallback-below", "0.4"]) == 1
    assert "--fallback-below" in capsys.readouterr().err


def test_cascade_flags_that_cannot_apply_are_refused(tmp_path: Path, capsys) -> None:
    """Cascade flags with a build that makes the transformer tier get one clear line, not a silent drop;
    ``--lookup-min-pieces`` alone with the default takes the default score threshold."""
    from skillsight_fast.cli import main

    src = ROOT / "data" / "personal" / "skills"
    for extra in (["-c", "stream=true"], ["-c", "paper=true"], ["-c", "query-int8=false"]):
        assert main([*extra, "index", str(src), "-o", str(tmp_path / "x"), "--fallback-below", "0.5"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "do not build" in err
    assert main(["index", str(src), "-o", str(tmp_path / "x"), "--lookup-min-pieces", "-3"]) == 1
    assert "--lookup-min-pieces" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert IndexConfig().settled(can_fit=True).encoder.query_encoder == "fitted"  # auto: the cascade's lookup tier
    assert IndexConfig().settled(can_fit=False).encoder.query_encoder == "transformer"
    assert DEFAULT_CASCADE == Cascade(FALLBACK_BELOW, 64)


@pytest.mark.model
def test_length_gate_skips_the_tokenizer_only_for_tasks_short_for_certain():
    """The character bound never changes the gate's answer, and a task with fewer (NFD) characters
    than the gate never reaches the tokenizer."""
    import random

    from tokenizers import Tokenizer  # the real WordPiece tokenizer of the shipped model

    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.cascade import Cascade
    from skillsight_fast.models.registry import find_model_dir

    tok = Tokenizer.from_file(str(find_model_dir(IndexConfig().encoder.model) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def tokenize(texts):
        return [np.asarray(e.ids[1:-1]) for e in tok.encode_batch(list(texts))]

    rng = random.Random(0)
    alphabet = "abc xyz é中文ß ﬁ Ａ,.!?-_/" + "한국어"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 90))) for _ in range(400)]
    texts += ["merge two PDF files", "x" * 61, "x" * 62, "é" * 31, "é" * 40]
    seen: list[str] = []

    def counting(batch):
        seen.extend(batch)
        return tokenize(batch)

    gate = Cascade(0.45, 64)
    got = gate.lookup_first(counting, texts)
    want = np.array([ids.size + 2 >= 64 for ids in tokenize(texts)])
    assert np.array_equal(got, want)
    assert "merge two PDF files" not in seen and "x" * 61 not in seen
    assert got.sum() > 0 and len(seen) < len(texts)
