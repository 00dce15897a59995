"""`skillsight bench` end to end on a tiny index without any model (seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.cli import main
from skillsight_fast.errors import ModelNotFoundError

pytest.importorskip("faiss")
pytest.importorskip("bm25s")


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    skills = toy_skills(n_extra=40, seed=1)
    index = SkillIndex.build(skills, HashEncoder(dim=32))
    out = tmp_path_factory.mktemp("bench") / "idx"
    index.save(out)
    return out, len(index)


def test_bench_no_model_writes_the_required_json(tiny_index, tmp_path, capsys):
    from skillsight_fast.lab.benchmark.driver import report_schema_keys

    directory, n_real = tiny_index
    out = tmp_path / "bench.json"
    details = tmp_path / "details.json"
    plot = tmp_path / "scaling.png"
    settings = tmp_path / "bench.toml"  # the knobs as a settings file (skillsight -c FILE)
    settings.write_text(f"[bench]\nno-model = true\nindex = {json.dumps(str(directory))}\n"
                        f"corpus = [{json.dumps(str(tmp_path / 'none'))}]\nsizes = [\"real\", {n_real * 3}]\n"
                        f"reps = 2\ncompressed-from = {n_real * 3}\ndetails = {json.dumps(str(details))}\n")
    argv = ["-c", str(settings), "bench", "--json", str(out)]
    pytest.importorskip("matplotlib")
    argv[2:2] = ["-c", f"plot={plot}"]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    top, size_keys, stages = report_schema_keys()
    assert set(report) == set(top)
    assert isinstance(report["cpu"], str) and report["threads"] == 1
    assert [e["n_docs"] for e in report["sizes"]] == [n_real, n_real * 3, n_real * 3]
    assert [e["dtype"] for e in report["sizes"]] == ["float32", "float32", "int8"]
    for entry in report["sizes"]:
        assert set(entry) == set(size_keys)
        assert set(entry["p50_ms"]) == set(stages)
        assert entry["dim"] == 32 and entry["floor_ms"] > 0
        # the default configuration is named at every size; no model: its timings are not measured
        assert entry["tiers"] == {"default": {"tier": "cascade", "scan": "exact", "encode": None,
                                              "end_to_end": None}}
        for stage in ("project", "dense_topk", "lexical", "fuse_topk", "scoring", "faiss_flat", "bm25s"):
            assert entry["p50_ms"][stage] > 0
        for stage in ("encode", "end_to_end", "dense_rerank", "tinybert_rerank"):  # no model: skipped
            assert entry["p50_ms"][stage] is None
    full = json.loads(details.read_text())
    assert 0.0 <= full["sizes"][2]["detail"]["recall_at_K_vs_exact"] <= 1.0
    assert "ivf" in full["sizes"][1]["detail"]
    assert plot.stat().st_size > 0
    assert "| skills |" in capsys.readouterr().out


def test_scale_up_keeps_the_real_rows_and_grows_the_vocabulary(tiny_index, tmp_path):
    import numpy as np

    from skillsight_fast.lab.benchmark.synthetic import scale_up

    directory, n_real = tiny_index
    base = SkillIndex.load(directory)
    syn, src = scale_up(base, n_real * 4, seed=3)
    assert len(syn) == n_real * 4 and (src[:n_real] == np.arange(n_real)).all()
    np.testing.assert_array_equal(syn.dense.embeddings[:n_real], base.dense.embeddings)
    np.testing.assert_allclose(np.linalg.norm(syn.dense.embeddings, axis=1), 1, atol=1e-5)
    lex = syn.lexical.lexicon
    assert (np.diff(lex.doc_indptr) > 0).all() or (np.diff(base.lexical.lexicon.doc_indptr) == 0).any()
    for j in range(0, len(syn), 17):  # sorted, unique terms per document
        row = lex.doc_term_ids(j)
        assert (np.diff(row) > 0).all()
    assert len(lex.vocab) >= len(base.lexical.lexicon.vocab)
    assert lex.post_docs.shape == lex.doc_terms.shape
    again, _ = scale_up(base, n_real * 4, seed=3)  # seeded
    np.testing.assert_array_equal(again.lexical.lexicon.doc_terms, lex.doc_terms)
    np.testing.assert_array_equal(again.dense.embeddings, syn.dense.embeddings)
    # a scaled-up index is a valid index: it saves and loads through the validating loader
    big, _ = scale_up(base, n_real * 40, seed=1)
    # enough new terms to need ordering
    assert len(big.lexical.lexicon.vocab) > len(base.lexical.lexicon.vocab) + 10
    loaded = SkillIndex.load(big.save(tmp_path / "syn"))
    assert loaded.lexical.lexicon.vocab == big.lexical.lexicon.vocab and len(loaded) == len(big)


def test_scale_up_in_scratch_files_builds_the_same_index(tiny_index, tmp_path):
    """The memory-mapped scratch arrays (workdir) and the scan asked for change nothing else."""
    import numpy as np

    from skillsight_fast.lab.benchmark.synthetic import scale_up

    directory, n_real = tiny_index
    base = SkillIndex.load(directory)
    plain, _ = scale_up(base, n_real * 6, seed=5)
    plain.rebuild_scan("int8")
    mapped, _ = scale_up(base, n_real * 6, seed=5, scan="int8", workdir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the scratch files are unlinked at once
    assert not mapped.dense.embeddings.flags.owndata and mapped.scan.kind == "int8"  # a view of the map
    for name, (_, arr, _) in plain.state.arrays().items():
        np.testing.assert_array_equal(mapped.state.arrays()[name][1], arr, err_msg=name)
    for name, arr in plain.scan.arrays().items():
        np.testing.assert_array_equal(mapped.scan.arrays()[name], arr, err_msg=name)
    assert mapped.config.to_dict() == plain.config.to_dict()
    a, b = plain.save(tmp_path / "plain"), mapped.save(tmp_path / "mapped")
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()


def test_bench_times_each_query_encoder_tier(tiny_index):
    import numpy as np

    from skillsight_fast.lab.benchmark.driver import format_table, tier_views
    from skillsight_fast.lab.benchmark.runner import bench_size
    from skillsight_fast.models.static import apply_query_map, fit_query_map

    directory, _ = tiny_index
    base = SkillIndex.load(directory, encoder=HashEncoder(dim=32))
    static = HashEncoder(dim=32, model_id="hash-static", checksum="static0")  # stands in for a static table
    texts = [f"{m.name}\n{m.description}" for m in base.skills]
    qmap = fit_query_map(static.encode(texts), base.dense.embeddings)
    views = tier_views(base, static, qmap)
    task = "merge pdf pages and extract tables"
    np.testing.assert_allclose(views["static-mapped"].encode([task]),
                               apply_query_map(static.encode([task]), qmap))
    np.testing.assert_allclose(views["static"].encode([task]), static.encode([task]))
    assert views["static-mapped"].search([task], k=3).skill_ids[0][0] is not None
    assert base.dense.query_map is None  # the views do not change the index they share arrays with
    queries = [task, "dedupe csv rows with pandas"]
    entry = bench_size(base, queries, base.encode(queries), lambda j: texts[j], encoder=base.encoder,
                       tiers={"static-mapped": views["static-mapped"]}, reps=2)[0]
    assert set(entry["tiers"]) == {"transformer", "static-mapped"}
    for tier in entry["tiers"].values():  # measured, not compared: two reps on a shared machine are noise
        assert np.isfinite(tier["encode"]) and tier["encode"] > 0
        assert np.isfinite(tier["end_to_end"]) and tier["end_to_end"] > 0
    assert "| static-mapped |" in format_table({"sizes": [entry]})


def test_bench_times_the_static_tiers_with_the_int8_scan(tiny_index):
    import numpy as np

    from skillsight_fast.engine.scan import Int8Scan
    from skillsight_fast.lab.benchmark.driver import format_table, tier_views
    from skillsight_fast.lab.benchmark.runner import bench_size
    from skillsight_fast.models.static import fit_query_map

    directory, _ = tiny_index
    base = SkillIndex.load(directory, encoder=HashEncoder(dim=32))
    static = HashEncoder(dim=32, model_id="hash-static", checksum="static0")
    texts = [f"{m.name}\n{m.description}" for m in base.skills]
    qmap = fit_query_map(static.encode(texts), base.dense.embeddings)
    scan8 = Int8Scan.build(base.dense.embeddings_perp, config=base.config)
    views = tier_views(base, static, qmap, int8_scan=scan8)
    assert set(views) == {"static-mapped", "static", "static-mapped+int8", "static+int8"}
    task = "merge pdf pages and extract tables"
    for name in ("static-mapped", "static"):
        v8 = views[f"{name}+int8"]
        assert v8.scan is scan8 and v8.config.scan.kind == "int8" and v8.config.encoder.query_encoder == name
        assert v8.dense.embeddings_perp is base.dense.embeddings_perp
        np.testing.assert_allclose(v8.encode([task]), views[name].encode([task]))
        # a tiny library: every document survives the int8 scan, so the results are the exact scan's
        exact, r8 = views[name].search([task], k=5), v8.search([task], k=5)
        np.testing.assert_array_equal(r8.ids, exact.ids)
        np.testing.assert_allclose(r8.scores, exact.scores, rtol=1e-6)
        assert r8.evidence == exact.evidence
    assert base.scan.kind == "exact" and views["static"].scan.kind == "exact"  # the index is not changed
    with pytest.raises(ValueError, match="background-removed"):
        tier_views(base, static, qmap, int8_scan=Int8Scan.build(base.dense.embeddings_perp.copy()))
    queries = [task, "dedupe csv rows with pandas"]
    entry = bench_size(base, queries, base.encode(queries), lambda j: texts[j], encoder=base.encoder,
                       tiers={"static+int8": views["static+int8"]}, int8_scan=scan8, reps=2)[0]
    assert set(entry["tiers"]) == {"transformer", "static+int8"}
    for value in entry["tiers"]["static+int8"].values():
        assert np.isfinite(value) and value > 0
    d8 = entry["detail"]["int8_scan"]
    assert d8["dense_topk_ms"] > 0 and d8["floor_ms"] > 0 and d8["scan_over_floor"] > 0
    assert d8["oversample"] == scan8.oversample
    assert "| static+int8 |" in format_table({"sizes": [entry]})


@pytest.mark.model
def test_bench_times_the_int8_task_tier_beside_the_float32_reference():
    """``transformer-int8`` searches with the int8 graph's task vectors; ``encode`` / ``end_to_end``
    and the ``transformer`` tier stay float32 tasks even when the index's own default is int8."""
    import numpy as np

    from skillsight_fast.lab.benchmark.driver import run_benchmark, tier_views
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.models import load_encoder

    try:
        fp32 = load_encoder(threads=1)
    except ModelNotFoundError as exc:  # weights package not installed
        pytest.skip(f"bundled model unavailable: {exc}")
    int8 = load_encoder(threads=1, int8=True)
    ds = load_dataset(Path(__file__).parents[3] / "data" / "skillsbench", limit=2)
    skills = ds.docs[::300]
    base = SkillIndex.build(skills, fp32, IndexConfig(query_encoder="transformer"))
    assert base.config.encoder.query_int8  # the default: int8 tasks
    tasks = list(ds.query_texts)
    views = tier_views(base, int8_encoder=int8)
    assert set(views) == {"transformer-int8"}
    np.testing.assert_allclose(views["transformer-int8"].encode(tasks), int8.encode(tasks), atol=1e-6)
    report = run_benchmark(base, tasks, ["real"], encoder=fp32, int8_encoder=int8, reps=2)
    np.testing.assert_allclose(base.encode(tasks), fp32.encode(tasks), atol=1e-6)  # the reference arm
    entry = report["sizes"][0]
    assert set(entry["tiers"]) == {"transformer", "transformer-int8", "default"}
    for name in ("transformer", "transformer-int8"):  # measured, not compared: two reps are noise
        assert np.isfinite(entry["tiers"][name]["end_to_end"]) and entry["tiers"][name]["end_to_end"] > 0
    # the default configuration is the cascade: not timed without its fitted table
    assert entry["tiers"]["default"] == {"tier": "cascade", "scan": "exact", "encode": None,
                                         "end_to_end": None}
    assert report["meta"]["int8_task_encoder"] == "model.int8.onnx"


def test_default_tier_follows_the_default_configuration_and_its_scan():
    """``tiers.default`` copies the timings of the tier and scan the default configuration resolves to."""
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.scan import AUTO_INT8_FROM, AUTO_IVF_FROM
    from skillsight_fast.lab.benchmark.driver import add_default_tier, default_tier, format_table
    from skillsight_fast.lab.benchmark.runner import STAGES

    assert default_tier(1000) == ("cascade", "exact")  # auto settles to the lookup-first cascade
    assert default_tier(AUTO_INT8_FROM) == ("cascade", "binary")
    assert default_tier(AUTO_IVF_FROM) == ("cascade", "ivf")
    transformer = IndexConfig(query_encoder="transformer")
    assert default_tier(1000, transformer) == ("transformer-int8", "exact")
    assert default_tier(1000, IndexConfig(query_int8=False)) == ("transformer", "exact")
    assert default_tier(1000, IndexConfig(query_encoder="fitted", scan="int8")) == ("fitted", "int8")

    def entries(n: int) -> list[dict]:
        tiers = {"transformer-int8": {"encode": 4.0, "end_to_end": 9.0},
                 "fitted": {"encode": 0.1, "end_to_end": 5.0},
                 "fitted+int8": {"encode": 0.1, "end_to_end": 2.0},
                 "cascade": {"encode": 0.1, "end_to_end": 6.0, "end_to_end_p90": 20.0,
                             "end_to_end_mean": 8.0}}
        f32 = {"n_docs": n, "dtype": "float32", "p50_ms": {"scoring": 5.0}, "tiers": tiers,
               "detail": {"ivf": {"scoring_p50_ms": 1.5}}}
        i8 = {"n_docs": n, "dtype": "int8", "p50_ms": {"scoring": 3.0},
              "tiers": {"transformer-int8": {"encode": 4.0, "end_to_end": 7.0}}}
        return [f32, i8]

    small = entries(1000)
    add_default_tier(small)
    assert [e["tiers"]["default"] for e in small] == [{"tier": "cascade", "scan": "exact", "encode": 0.1,
                                                       "end_to_end": 6.0, "end_to_end_p90": 20.0,
                                                       "end_to_end_mean": 8.0}] * 2
    mid = entries(AUTO_INT8_FROM)
    # no +int8 view: the int8 entry's (shifted) timings
    add_default_tier(mid, transformer.replace(scan="int8"))
    assert mid[0]["tiers"]["default"]["end_to_end"] == 7.0
    binary = entries(AUTO_INT8_FROM)
    add_default_tier(binary)  # the binary scan is not timed by this bench (bench/serve_latency.py times it)
    assert binary[0]["tiers"]["default"] == {"tier": "cascade", "scan": "binary", "encode": None,
                                             "end_to_end": None}
    fitted = entries(AUTO_INT8_FROM)
    add_default_tier(fitted, IndexConfig(query_encoder="fitted", scan="int8"))  # its +int8 view
    assert fitted[1]["tiers"]["default"] == {"tier": "fitted", "scan": "int8", "encode": 0.1,
                                             "end_to_end": 2.0}
    big = entries(AUTO_IVF_FROM)
    add_default_tier(big)  # end to end with the IVF scoring instead of the exact one
    assert big[0]["tiers"]["default"]["end_to_end"] == 6.0 - 5.0 + 1.5
    assert "| default (cascade, ivf scan) |" in format_table({"sizes": [
        {**big[0], "p50_ms": dict.fromkeys(STAGES, 1.0), "floor_ms": 1.0}]})


@pytest.mark.model
def test_tinybert_reranker_has_the_architecture(tmp_path):
    import numpy as np
    import onnx

    from skillsight_fast.lab.baselines.cross_encoder import TINYBERT_ARCHITECTURE, load_tinybert_reranker

    try:
        ce = load_tinybert_reranker(cache_dir=tmp_path, threads=1)
    except Exception as exc:  # noqa: BLE001 - the bundled tokenizer's package is not installed
        pytest.skip(f"bundled model unavailable: {exc}")
    assert not ce.trained and ce.architecture == TINYBERT_ARCHITECTURE and ce.max_length == 512
    model = onnx.load(str(ce.onnx_path))
    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    assert shapes["word_embeddings"] == (30522, 128)
    assert any(n.startswith("encoder.layer.1.") for n in shapes)
    assert not any(n.startswith("encoder.layer.2.") for n in shapes)  # two layers
    assert shapes["encoder.layer.0.intermediate.dense.weight_t"] == (128, 512)
    s = ce.score("merge two pdf files", ["pdf tools to merge and split", "git helper"])
    assert s.shape == (2,) and np.isfinite(s).all()


def test_bench_times_short_tasks_beside_the_long_ones(tiny_index):
    """Short tasks are timed end to end on the tiers of SHORT_TIERS only, with p50, p90 and mean;
    the default copies them, and the table prints both task lengths."""
    from skillsight_fast.lab.benchmark.driver import add_default_tier, format_table, tier_views
    from skillsight_fast.lab.benchmark.runner import SHORT_TIERS, bench_size
    from skillsight_fast.models.static import fit_query_map

    directory, _ = tiny_index
    base = SkillIndex.load(directory, encoder=HashEncoder(dim=32))
    static = HashEncoder(dim=32, model_id="hash-static", checksum="static0")
    texts = [f"{m.name}\n{m.description}" for m in base.skills]
    views = tier_views(base, static, fit_query_map(static.encode(texts), base.dense.embeddings))
    long_tasks = ["merge pdf pages and extract the tables of every page into one spreadsheet " * 4]
    shorts = ["get weather", "convert currency", "send an email"]
    assert "static" not in SHORT_TIERS and "transformer" in SHORT_TIERS
    entry = bench_size(base, long_tasks, base.encode(long_tasks), lambda j: texts[j], encoder=base.encoder,
                       tiers={"static": views["static"]}, reps=4, short_texts=shorts)[0]
    t = entry["tiers"]["transformer"]
    for key in ("end_to_end", "short_end_to_end"):
        assert 0 < t[key] <= t[f"{key}_p90"] and t[f"{key}_mean"] > 0
    assert "short_end_to_end" not in entry["tiers"]["static"]  # not a short tier: not timed
    assert entry["detail"]["short_tasks"] == 3
    entry["tiers"]["cascade"] = dict(t)  # stands in for the default's own timings
    add_default_tier([entry])
    assert entry["tiers"]["default"]["short_end_to_end_mean"] == t["short_end_to_end_mean"]
    table = format_table({"sizes": [entry]})
    assert f"| {_fmt3(t['short_end_to_end'])} / " in table and "short e2e p50 / p90 / mean" in table


def _fmt3(x: float) -> str:
    from skillsight_fast.lab.benchmark.driver import _fmt

    return _fmt(x)


def test_short_tasks_interleave_the_catalogues():
    from skillsight_fast.lab.benchmark.driver import SHORT_DATASETS, short_tasks
    from skillsight_fast.library.queries import read_queries

    data = Path(__file__).parents[3] / "data"
    tasks = short_tasks(data, per_dataset=5, seed=1)
    assert len(tasks) == 5 * len(SHORT_DATASETS)
    for i, name in enumerate(SHORT_DATASETS):  # task j comes from catalogue j mod 3, in file order
        own = [q.text for q in read_queries(data / name / "queries.jsonl.gz")]
        picked = tasks[i::len(SHORT_DATASETS)]
        assert all(p in own for p in picked)
        assert [own.index(p) for p in picked] == sorted(own.index(p) for p in picked)
    assert short_tasks(data, per_dataset=5, seed=1) == tasks
    assert short_tasks(data, per_dataset=5, seed=2) != tasks
    assert short_tasks(data / "nowhere") == []


@pytest.mark.model
def test_reranker_variants_are_timed_and_reused(tiny_index, tmp_path):
    """A variant reranker (TinyBERT-L-2, int8, 64 tokens) is timed over the dense top-100 like the
    reference; a second size reuses its measured cost."""
    import numpy as np
    import onnx

    from skillsight_fast.lab.baselines.cross_encoder import load_tinybert_reranker
    from skillsight_fast.lab.benchmark.driver import format_table
    from skillsight_fast.lab.benchmark.runner import bench_size

    try:
        fp32 = load_tinybert_reranker(cache_dir=tmp_path, threads=1)
        ce = load_tinybert_reranker(cache_dir=tmp_path, threads=1, int8=True, max_length=64)
    except Exception as exc:  # noqa: BLE001 - the bundled tokenizer's package is not installed
        pytest.skip(f"bundled model unavailable: {exc}")
    ops = {n.op_type for n in onnx.load(str(ce.onnx_path)).graph.node}
    assert ce.int8 and ce.onnx_path.name == "model.int8.onnx" and "MatMulInteger" in ops
    assert ce.describe() == {"architecture": fp32.architecture, "trained": False, "int8": True,
                             "max_length": 64,
                             "batch_size": 16, "threads": 1}
    task = "merge pdf pages and extract tables"
    pair = ["pdf tools to merge and split"] * 2
    s32, s8 = fp32.score(task, pair), ce.score(task, pair)
    assert np.isfinite(s8).all() and abs(float(s8[0] - s32[0])) < 0.05  # same graph, int8 weights
    directory, _ = tiny_index
    base = SkillIndex.load(directory, encoder=HashEncoder(dim=32))
    texts = [f"{m.name}\n{m.description}" for m in base.skills]
    entry = bench_size(base, [task], base.encode([task]), lambda j: texts[j],
                       rerank_variants={"tiny int8": ce},
                       reps=2, rerank_reps=2)[0]
    v = entry["detail"]["rerank_variants"]["tiny int8"]
    assert v["int8"] and v["max_length"] == 64 and v["p50_ms"] > 0 and v["cross_encoder_s"] > 0
    again = bench_size(base, [task], base.encode([task]), lambda j: texts[j],
                       rerank_variants={"tiny int8": ce},
                       variant_costs={"tiny int8": 5.0}, reps=2)[0]
    assert again["detail"]["rerank_variants"]["tiny int8"]["p50_ms"] >= 5000  # the reused cost plus faiss
    table = format_table({"sizes": [{**again, "p50_ms": {**again["p50_ms"], "end_to_end": 1.0}}]})
    assert "| tiny int8 |" in table
