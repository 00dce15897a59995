"""The drift rule's token directions kept between updates of shard folders (skillsight_fast.cluster.drift):
the sums an update moves by its own rows equal the sums over the updated index's postings, so the rule
sees the drift it would see computing them whole; kept sums that do not add up, fail their checksum or
are of another index version are summed anew."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder
from test_cluster import ROOT
from test_shard_update import _edited, _files

from skillsight_fast.cluster.drift import DirectionSums, read_sums, write_sums
from skillsight_fast.cluster.layout import DIRECTIONS, index_digest, read_folder, split_index
from skillsight_fast.cluster.update import background_directions, basis_drift, fresh_basis, update_layout
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.background import index_background_terms
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.library.skills import Skill, load_skills

ENC = HashEncoder(dim=48)


@pytest.fixture(scope="module")
def library():
    return load_skills([ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"]).skills[:900]


@pytest.fixture
def sharded(library, tmp_path):
    """An index of 600 skills in 3 shard folders, updated once (so the layout keeps its sums)."""
    folder = SkillIndex.build(library[:600], ENC, IndexConfig(candidates=40)).save(tmp_path / "idx")
    split_index(folder, tmp_path / "L", 3)
    assert not (tmp_path / "L" / DIRECTIONS).exists()  # a split keeps none: the first update sums them
    first = update_layout(folder, tmp_path / "L", _edited(library), encoder=ENC, max_drift=1.0)
    assert first["directions"] == "summed"
    return folder, tmp_path / "L"


def _second(library):
    """_edited's library with a skill of shard 0 changed, two removed (shards 0 and 2), 20 added."""
    new = _edited(library)
    s = new[10]
    new[10] = Skill(s.id, s.name, s.description, s.body + " and reads parquet metadata")
    del new[450], new[20]
    return new + list(library[750:770])


def _check_kept(folder: Path, layout: Path) -> DirectionSums:
    """The layout's kept sums are the updated index's, as a build would sum them over the postings."""
    index = SkillIndex.load(folder, mmap=True)
    kept = read_sums(layout, index_digest(folder))
    assert kept is not None and kept.rows == len(index)
    lex = index.lexical
    terms = index_background_terms(index)
    _, shared = read_folder(layout / "shared")
    np.testing.assert_array_equal(np.asarray(shared["head_term"])[kept.terms], terms)  # the layout's ids
    np.testing.assert_array_equal(kept.counts, np.asarray(lex.lexicon.df())[terms])
    g_full, mean_full = background_directions(index)
    g, mean = kept.directions()
    np.testing.assert_allclose(g, g_full, atol=1e-6)
    np.testing.assert_allclose(mean, mean_full, atol=1e-9)
    want = basis_drift(index.dense.basis, fresh_basis(index, (g_full, mean_full)))
    assert basis_drift(index.dense.basis, fresh_basis(index, (g, mean))) == pytest.approx(want, abs=1e-5)
    return kept


def test_the_next_update_moves_the_kept_sums_by_its_own_rows(sharded, library):
    folder, layout = sharded
    _check_kept(folder, layout)
    out = update_layout(folder, layout, _second(library), encoder=ENC, max_drift=1.0)
    assert out["directions"] == "moved" and not out["recomputed"]
    assert out["rewritten"] == [0, 2, 3] and 1 in out["kept"]
    _check_kept(folder, layout)
    index = SkillIndex.load(folder, mmap=True)  # the rule saw the drift the whole sums give
    assert out["drift"] == pytest.approx(basis_drift(index.dense.basis, fresh_basis(index)), abs=1e-5)
    before = _files(layout)  # nothing to do: the kept sums stay as they are
    again = update_layout(folder, layout, _second(library), encoder=ENC, max_drift=1.0)
    assert again["rewritten"] == [] and _files(layout) == before


def test_terms_that_were_not_kept_are_summed_over_their_postings(sharded, library):
    folder, layout = sharded
    kept = read_sums(layout, index_digest(folder))
    part = np.arange(kept.terms.shape[0]) % 3 != 0  # as if a third were not background terms then
    write_sums(layout, DirectionSums(kept.terms[part], kept.sums[part], kept.counts[part], kept.total,
                                     kept.rows), index_digest(folder))
    out = update_layout(folder, layout, _second(library), encoder=ENC, max_drift=1.0)
    assert out["directions"] == "moved"
    now = _check_kept(folder, layout)  # ... with terms of the left-out third among them
    assert np.isin(kept.terms[~part], now.terms).sum() > 100


@pytest.mark.parametrize("spoil", ["counts", "rows", "checksum", "version"])
def test_kept_sums_that_do_not_add_up_are_summed_anew(sharded, library, caplog, spoil):
    folder, layout = sharded
    kept = read_sums(layout, index_digest(folder))
    digest = index_digest(folder)
    if spoil == "counts":
        kept.counts[0] += 1
    elif spoil == "rows":
        kept.rows += 1
    elif spoil == "version":
        digest = "another version"
    write_sums(layout, kept, digest)
    if spoil == "checksum":
        with open(layout / DIRECTIONS / "sums.npy", "r+b") as f:
            f.seek(-8, 2)
            f.write(b"\x00\x01\x02\x03\x04\x05\x06\x07")
    with caplog.at_level(logging.WARNING, logger="skillsight_fast.cluster.drift"):
        out = update_layout(folder, layout, _second(library), encoder=ENC, max_drift=1.0)
    assert out["directions"] == "summed"
    assert (spoil == "version") == (not caplog.records)  # another version: nothing to warn of
    _check_kept(folder, layout)


def test_a_recompute_keeps_the_recomputed_index_sums(sharded, library):
    folder, layout = sharded
    _, shared = read_folder(layout / "shared")  # the layout's term ids are not the index's before ...
    assert not np.array_equal(shared["head_term"], np.arange(shared["head_term"].shape[0]))
    out = update_layout(folder, layout, _second(library), encoder=ENC, max_drift=0.0)
    assert out["recomputed"] and out["directions"] == "moved"
    _, shared = read_folder(layout / "shared")  # ... and are after: the kept sums follow them
    np.testing.assert_array_equal(shared["head_term"], np.arange(shared["head_term"].shape[0]))
    _check_kept(folder, layout)
    new = _second(library)
    s = new[5]
    new[5] = Skill(s.id, s.name, s.description, s.body + " for archives too")
    assert update_layout(folder, layout, new, encoder=ENC, max_drift=1.0)["directions"] == "moved"
    _check_kept(folder, layout)


def test_a_split_anew_drops_the_kept_sums(sharded):
    folder, layout = sharded
    assert (layout / DIRECTIONS / "manifest.json").is_file()
    split_index(folder, layout, 2)
    assert not (layout / DIRECTIONS).exists()


def test_an_unreadable_old_shard_folder_sums_them_anew(sharded, library, caplog):
    folder, layout = sharded
    (layout / "shard-000" / "raw.npy").unlink()  # the rows _second changes there cannot be read back
    with caplog.at_level(logging.WARNING, logger="skillsight_fast.cluster.drift"):
        out = update_layout(folder, layout, _second(library), encoder=ENC, max_drift=1.0)
    assert out["directions"] == "summed" and 0 in out["rewritten"]
    assert any("raw.npy" in r.getMessage() for r in caplog.records)
    _check_kept(folder, layout)
    assert (layout / "shard-000" / "raw.npy").is_file()  # rewritten with the shard


def test_a_text_that_becomes_another_rows_rewrites_its_shard(sharded, library):
    """The update counts a skill whose text is now another skill's as unchanged (its vector is that
    skill's); its row's text changed all the same, so its shard is rewritten and the sums moved."""
    folder, layout = sharded
    new = _edited(library)
    a, b = new[5], new[7]
    new[5] = Skill(a.id, b.name, b.description, b.body, path=a.path)
    out = update_layout(folder, layout, new, encoder=ENC, max_drift=1.0)
    assert out["rewritten"] == [0] and out["directions"] == "moved"
    _check_kept(folder, layout)
    index = SkillIndex.load(folder, mmap=True)
    _, arrays = read_folder(layout / "shard-000")
    np.testing.assert_array_equal(arrays["raw"], index.dense.embeddings[:200])
