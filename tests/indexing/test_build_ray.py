"""The Ray build (skillsight_fast.indexing.ray) writes the index the single-machine build writes.

A local Ray cluster with 2 CPUs is started once for this module and shut down after it
(ray.init takes about 8 s on the shared machine; the builds themselves take seconds).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import fakes
import pytest
from fakes import HashEncoder
from test_build_stream import assert_same_index, queries

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.indexing.ray import ray_build
from skillsight_fast.library.skills import LoadReport, iter_skills, load_skills

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "skillsbench" / "corpus.jsonl.gz"


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.cloudpickle.register_pickle_by_value(fakes)  # the workers do not have tests/ on their path
    ctx = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ctx.address_info["gcs_address"]
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(fakes)


@pytest.mark.parametrize("workers", [1, 2])
def test_ray_build_equals_the_single_machine_build(ray_cluster, workers):
    cfg = IndexConfig()
    whole = SkillIndex.build(load_skills([CORPUS]).skills, HashEncoder(dim=48), cfg)
    index = ray_build(iter_skills([CORPUS], LoadReport()), functools.partial(HashEncoder, dim=48), cfg,
                      workers=workers, chunk_size=30, query_encoder=HashEncoder(dim=48))
    assert index.state.model.id == "hash-test"
    assert_same_index(index, whole, queries("skillsbench"), atol=1e-6)


def test_cli_index_ray_joins_a_cluster_and_writes_the_same_index(ray_cluster, tmp_path):
    """From the command line, with the real MiniLM on the workers, joining the running cluster."""
    from skillsight_fast.cli import main

    lines = [line for line in __import__("gzip").open(CORPUS, "rt", encoding="utf-8")][:16]
    src = tmp_path / "skills.jsonl"
    src.write_text("".join(lines), encoding="utf-8")
    assert main(["-c", "shards=2", "index", str(src), "-o", str(tmp_path / "one"), "-q"]) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "skillsight_fast.cli", "-c", f"ray={ray_cluster}", "-c", "ray-workers=2",
         "-c", "chunk-size=5", "-c", "shards=3", "index", str(src), "-o", str(tmp_path / "ray"), "--json"],
        capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["n_skills"] == 16 and summary["shards"]["written_by"] == "Ray workers"
    # the shard folders the workers wrote are the split of the saved index; a plain build splits after it
    from skillsight_fast.cluster.layout import index_digest, read_folder, read_layout, split_index

    split_index(tmp_path / "ray", tmp_path / "check", 3)
    for i in range(3):
        mine, _ = read_folder(tmp_path / "ray.shards" / f"shard-{i:03d}")
        assert mine["arrays"] == read_folder(tmp_path / "check" / f"shard-{i:03d}")[0]["arrays"]
    assert read_layout(tmp_path / "ray.shards")["index"] == index_digest(tmp_path / "ray")
    assert read_layout(tmp_path / "one.shards")["index"] == index_digest(tmp_path / "one")
    assert len(read_layout(tmp_path / "one.shards")["shards"]) == 2
    a, b = SkillIndex.load(tmp_path / "ray"), SkillIndex.load(tmp_path / "one")
    assert a.state.model.id == b.state.model.id and a.state.model.checksum == b.state.model.checksum
    texts = queries("skillsbench")[:30]
    assert_same_index(a, b, texts, atol=1e-5)


def test_ray_missing_is_a_clear_error(monkeypatch, tmp_path, capsys):
    """Without ray installed, --ray names the extra (ray hidden from the import system)."""
    from skillsight_fast.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["-c", "ray=true", "index", str(CORPUS), "-o", str(tmp_path / "x"), "-q"]) == 1
    assert "the [ray] extra" in capsys.readouterr().err


@pytest.mark.model
def test_ray_build_answers_as_the_single_machine_build_with_minilm(ray_cluster, teacher, tmp_path):
    """The real MiniLM on the workers, a real dataset subset: the fitted tier and its cascade, the
    abstention rule and the duplicate collapse, and the same hits and abstentions for every task."""
    from test_same_answers import assert_same_answers, subset

    from skillsight_fast.models import load_encoder

    skills, tasks = subset()
    whole = SkillIndex.build(skills, teacher, IndexConfig())
    factory = functools.partial(load_encoder, "all-MiniLM-L6-v2", threads=1)
    index = ray_build(iter(skills), factory, IndexConfig(),
                      workers=2, chunk_size=37, workdir=tmp_path, query_encoder=teacher)
    assert index.state.config.encoder.query_encoder == "fitted" and index.state.abstention is not None
    assert_same_answers(index, whole, tasks)


POOL = ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"


@pytest.mark.parametrize("scan,params", [("exact", {}), ("int8", {}), ("binary", {"rerank": 2}),
                                         ("ivf", {"nlist": 40, "nprobe": 4})])
def test_ray_workers_write_the_shard_folders_split_writes(ray_cluster, tmp_path, scan, params):
    """Each shard folder is written by a Ray task from its rows in the object store, byte for byte the
    folder `skillsight split` writes from the saved index (the chunks do not fall on the shards' rows)."""
    from skillsight_fast.cluster.build import ShardFolders
    from skillsight_fast.cluster.layout import read_folder, read_layout, split_index
    from skillsight_fast.config import ScanConfig

    if scan == "ivf":
        pytest.importorskip("faiss")
    skills = load_skills([POOL]).skills[:1500]
    cfg = IndexConfig(candidates=40, scan=ScanConfig(scan, params))
    folders = ShardFolders(tmp_path / "idx.shards", 3)
    index = ray_build(iter(skills), functools.partial(HashEncoder, dim=48), cfg, workers=2, chunk_size=170,
                      query_encoder=HashEncoder(dim=48), write_folders=folders)
    assert index.scan.kind == scan
    assert not (tmp_path / "idx.shards" / "shards.json").exists()  # no layout before the index is saved
    folder = index.save(tmp_path / "idx")
    layout = folders.commit(folder)
    assert read_layout(tmp_path / "idx.shards") == layout
    reference = split_index(folder, tmp_path / "split", 3)
    assert {**layout, "library": None} == {**reference, "library": None}
    assert sum(w["rows"] for w in folders.written) == 1500
    for name in [e["folder"] for e in layout["shards"]] + ["shared"]:
        mine, _ = read_folder(tmp_path / "idx.shards" / name)
        theirs, _ = read_folder(tmp_path / "split" / name)
        assert mine["arrays"] == theirs["arrays"], name  # every array's shape, dtype and SHA-256
        assert {**mine, "library": None} == {**theirs, "library": None}
    # and they serve: the shards answer as the single index
    from skillsight_fast.cluster.index import ShardedIndex

    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    sharded = ShardedIndex.from_layout(folder, tmp_path / "idx.shards", remote=False)
    sharded.head.encoder = HashEncoder(dim=48)
    texts = queries("skillsbench")[:12]
    a, b = single.search(texts, k=8), sharded.search(texts, k=8)
    assert a.skill_ids == b.skill_ids
