"""The general fitted query table (skillsight_fast/models/general.py): int8 storage round trip, refusal of
a malformed or mismatched table, the union prior, and the fit's batch scaled with the library."""

from __future__ import annotations

import numpy as np
import pytest

from skillsight_fast.errors import ModelError
from skillsight_fast.models.fitted import FitConfig
from skillsight_fast.models.general import load_general_table, merge_prior, quantize_rows, save_general_table


def test_int8_rows_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    table[3] = 0.0  # an all-zero row keeps a finite scale
    ids = np.sort(rng.choice(1000, 50, replace=False)).astype(np.int32)
    save_general_table(tmp_path / "g", ids, table, {"note": "test"})
    got_ids, got = load_general_table(tmp_path / "g", dim=16)
    np.testing.assert_array_equal(got_ids, ids)
    # symmetric per-row int8: error at most half a step of each row's scale
    step = np.abs(table).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(got - table) <= step / 2 + 1e-7)
    rows, scale = quantize_rows(table)
    assert rows.dtype == np.int8 and np.all(np.abs(rows).max(axis=1)[np.abs(table).max(axis=1) > 0] == 127)
    assert np.all(np.isfinite(scale)) and scale[3] == 1.0


def test_a_table_that_does_not_fit_is_refused(tmp_path):
    table = np.ones((4, 8), np.float32)
    save_general_table(tmp_path / "g", np.array([1, 2, 3, 4], np.int32), table)
    with pytest.raises(ModelError, match="dimension 8"):
        load_general_table(tmp_path / "g", dim=384)
    np.save(tmp_path / "g" / "ids.npy", np.array([1, 3, 2, 4], np.int32))  # not ascending
    with pytest.raises(ModelError, match="malformed"):
        load_general_table(tmp_path / "g")
    with pytest.raises(ModelError, match="cannot read"):
        load_general_table(tmp_path / "missing")
    with pytest.raises(ModelError):
        save_general_table(tmp_path / "h", np.array([1, 2], np.int32), table)


def test_merge_prior_keeps_general_rows_and_adds_rescaled_library_rows():
    gen_ids = np.array([2, 5, 9], np.int32)
    gen = np.array([[1, 0], [0, 2], [3, 0]], np.float32)  # median norm 2
    lib_ids = np.array([5, 7], np.int32)
    lib = np.array([[9, 9], [0, 4]], np.float32)  # norms 12.7, 4: median 8.36
    ids, table = merge_prior(lib_ids, lib, gen_ids, gen)
    np.testing.assert_array_equal(ids, [2, 5, 7, 9])
    np.testing.assert_allclose(table[[0, 1, 3]], gen)  # the general row wins where both have one
    lib_median = np.median(np.linalg.norm(lib, axis=1))
    np.testing.assert_allclose(table[2], lib[1] * 2.0 / lib_median, rtol=1e-6)
    with pytest.raises(ModelError):
        merge_prior(lib_ids, lib[:, :1], gen_ids, gen)


def test_fit_batch_scales_with_the_library():
    fixed = FitConfig()
    assert fixed.batch_for(100_000) == 1024 and fixed.batch_for(500) == 500
    scaled = FitConfig(epochs=14.0)
    assert scaled.batch_for(22_000) == 1024  # the bundled library: the fixed batch
    assert scaled.batch_for(4_000) == int(np.ceil(14 * 4_000 / 300))  # ~600 skills: 187 texts a step
    assert scaled.batch_for(800) == 64  # the floor
    assert scaled.batch_for(30) == 30  # never more than the texts
    costs = [scaled.steps * scaled.batch_for(n) for n in (4_000, 8_000, 16_000)]
    assert costs[0] < costs[1] < costs[2]  # the fit's work grows with the library, not fixed


def test_a_table_of_another_model_is_refused(tmp_path):
    save_general_table(tmp_path / "g", np.array([1, 2], np.int32), np.ones((2, 4), np.float32),
                       {"model_id": "m", "checksum": "a" * 64})
    load_general_table(tmp_path / "g", dim=4, checksum="a" * 64)
    with pytest.raises(ModelError, match="fitted for the model 'm'"):
        load_general_table(tmp_path / "g", dim=4, checksum="b" * 64)
