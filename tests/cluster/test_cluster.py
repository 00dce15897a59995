"""Sharded serving (skillsight_fast.cluster): the shards answer exactly what the single index answers.

In-process shards for 1-3 shards and both scans, then the same through Ray actors on a local Ray
cluster started here (as tests/test_build_ray.py does), and the served surface (SkillService) over it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder

from skillsight_fast.agents.find import find_skills
from skillsight_fast.agents.service import SkillService
from skillsight_fast.cluster.index import ShardedIndex, shard_ranges
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.errors import QueryError
from skillsight_fast.library.skills import load_skills

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "skillsbench" / "corpus.jsonl.gz"
QUERIES = ["extract the tables of a PDF report", "resize png thumbnails for a web page",
           "merge two branches and fix the conflicts", "fit a regression to a csv of sales",
           "transcribe an audio file", "zzzz qqqq", "deploy a docker container to kubernetes"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    index = SkillIndex.build(load_skills([CORPUS]).skills[:600], HashEncoder(dim=48),
                             IndexConfig(candidates=40))
    out = {}
    for scan in ("exact", "int8"):
        index.rebuild_scan(scan)
        out[scan] = index.save(root / scan)
    return out


def _same(a, b):
    assert a.skill_ids == b.skill_ids
    np.testing.assert_array_equal(a.ids, b.ids)
    # the same ids in the same order; scores to float32 rounding (the single index and the shards' last
    # stage may sum in another order, a few ulp apart)
    np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.dense, b.dense, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.lexical, b.lexical, rtol=0, atol=1e-6)
    assert a.evidence == b.evidence


def test_shard_ranges_cover_the_rows():
    assert shard_ranges(10, 3) == [(0, 3), (3, 7), (7, 10)]
    assert shard_ranges(2, 4)[-1] == (2, 2) and shard_ranges(0, 1) == [(0, 0)]


@pytest.mark.parametrize("scan", ["exact", "int8"])
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_in_process_shards_answer_as_the_single_index(folders, scan, shards):
    single = SkillIndex.load(folders[scan], encoder=HashEncoder(dim=48))
    sharded = ShardedIndex.local(folders[scan], shards)
    sharded.head.encoder = HashEncoder(dim=48)
    assert single.scan.kind == scan
    for k in (1, 5, 12):
        _same(single.search(QUERIES, k=k), sharded.search(QUERIES, k=k))
    assert sharded.search(QUERIES[:2], k=5, fusion="convex").skill_ids == single.search(
        QUERIES[:2], k=5, fusion="convex").skill_ids
    a = find_skills(single, QUERIES, 5)
    b = find_skills(sharded, QUERIES, 5)
    assert [x.to_dict(digits=4) for x in a] == [x.to_dict(digits=4) for x in b]
    for lc in (10, 1000):  # LEC coverage candidates, a few and all the library
        _same(single.search(QUERIES, k=8, lexical_candidates=lc),
              sharded.search(QUERIES, k=8, lexical_candidates=lc))
    with pytest.raises(QueryError, match="custom search stages"):
        sharded.search(QUERIES[:1], k=3, dense_stage=lambda q, depth: None)


@pytest.fixture(scope="module")
def ray_cluster():
    import fakes
    import ray

    ray.cloudpickle.register_pickle_by_value(fakes)
    ctx = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ctx.address_info["gcs_address"]
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(fakes)


@pytest.mark.parametrize("scan", ["exact", "int8"])
def test_ray_shards_answer_as_the_single_index_through_the_service(ray_cluster, folders, scan):
    single = SkillIndex.load(folders[scan], encoder=HashEncoder(dim=48))
    sharded = ShardedIndex.connect(folders[scan], 2, address=ray_cluster, cpus_per_shard=0.5)
    try:
        sharded.head.encoder = HashEncoder(dim=48)
        _same(single.search(QUERIES, k=7), sharded.search(QUERIES, k=7))
        info = sharded.shard_info()
        assert [(i["start"], i["stop"]) for i in info] == shard_ranges(len(single), 2)
        assert len({i["pid"] for i in info}) == 2 and all(i["array_bytes"] > 0 for i in info)
        one, many = SkillService(folders[scan], index=single), SkillService(folders[scan], index=sharded)
        for q in QUERIES:
            assert one.find(q, 5) == many.find(q, 5)
        assert many.health()["n_skills"] == len(single)
        sid = single.skills[3].id
        assert many.get_skill(sid) == one.get_skill(sid)
    finally:
        sharded.close()


@pytest.mark.model
def test_cli_serve_http_ray_answers_as_the_single_server(ray_cluster, tmp_path):
    """`skillsight serve --http --ray ADDRESS --shards 2` (real MiniLM) joins the cluster and answers
    POST /search as a SkillService over the single index does."""
    import gzip
    import http.client
    import json
    import os
    import subprocess
    import sys

    from skillsight_fast.cli import main

    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        lines = list(fh)[:40]
    src = tmp_path / "skills.jsonl"
    src.write_text("".join(lines), encoding="utf-8")
    assert main(["index", str(src), "-o", str(tmp_path / "idx"), "--scan", "int8", "-q"]) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "skillsight_fast.cli", "-c", f"ray={ray_cluster}",
                             "-c", "shards=2",
                             "serve", "--http", "-i", str(tmp_path / "idx"), "--port", "0", "--json", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-2000:]
        host, port = json.loads(line)["url"].split("//")[1].rstrip("/").split(":")
        from skillsight_fast.engine.abstention import resolve_abstention

        # the rule `serve` applies: the one the index derived at build
        single = SkillService(tmp_path / "idx", abstention=resolve_abstention(tmp_path / "idx"))
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        for q in QUERIES[:4]:
            conn.request("POST", "/search", json.dumps({"task": q, "k": 4}),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            assert json.loads(resp.read()) == single.find(q, 4)
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.mark.model
def test_cli_serve_ray_watch_applies_an_update(ray_cluster, tmp_path):
    """`skillsight serve --http --ray ADDRESS --shards 2 --watch SRC` (real MiniLM): a skill added to and
    one removed from the watched library reach the running sharded server (/health's live_version
    goes to 1) and its answers then equal a single-index service over the updated folder."""
    import http.client
    import os
    import subprocess
    import sys
    import time

    from skillsight_fast.cli import main
    from skillsight_fast.engine.abstention import resolve_abstention

    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        lines = list(fh)[:40]
    src = _write(tmp_path / "skills.jsonl", lines)
    assert main(["index", str(src), "-o", str(tmp_path / "idx"), "--scan", "int8", "-q"]) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "skillsight_fast.cli", "-c", f"ray={ray_cluster}",
                             "-c", "shards=2", "-c", "debounce=100", "serve", "--http",
                             "-i", str(tmp_path / "idx"), "--watch", str(src),
                             "--port", "0", "--json", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-2000:]
        host, port = json.loads(line)["url"].split("//")[1].rstrip("/").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)

        def get(path, body=None):
            conn.request("POST" if body else "GET", path, json.dumps(body) if body else None,
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            return json.loads(resp.read())

        new = {"id": "skillsbench:pdf-table-miner", "name": "pdf-table-miner",
               "description": "Extract every table of a PDF report into CSV files.",
               "body": "Use camelot or pdfplumber to find the tables of each PDF page and write them as CSV."}
        _write(src, lines[1:] + [json.dumps(new) + "\n"])
        t0 = time.monotonic()
        while get("/health")["live_version"] < 1:
            assert time.monotonic() - t0 < 120, "the update did not reach the server"
            time.sleep(0.5)
        single = SkillService(tmp_path / "idx", abstention=resolve_abstention(tmp_path / "idx"))
        assert get("/health")["n_skills"] == len(single.index) == 40
        for q in QUERIES[:3]:
            got = get("/search", {"task": q, "k": 4})
            want = single.find(q, 4)
            got.pop("version"), want.pop("version")
            assert got == want
        top = get("/search", {"task": "extract the tables of a PDF report", "k": 3})["hits"][0]
        assert top["id"] == new["id"]
    finally:
        proc.terminate()
        proc.wait(60)


def test_a_shard_checks_its_own_rows(folders, tmp_path):
    """A shard loads with verify="rows": the document -> terms lists are checked for its rows only,
    so damage in another shard's rows does not stop it, and damage in its own does."""
    import hashlib
    import json
    import shutil

    from skillsight_fast.cluster.shard import ShardEngine
    from skillsight_fast.errors import IndexFormatError

    d = tmp_path / "idx"
    shutil.copytree(folders["exact"], d)
    index = SkillIndex.load(d)
    stats = ShardedIndex.global_stats(index)
    ptr = index.lexical.lexicon.doc_indptr
    terms = np.load(d / "doc_terms.npy")
    terms[int(ptr[-2])] = 10**6  # a term id past the vocabulary, in the last skill's row
    np.save(d / "doc_terms.npy", terms)
    m = json.loads((d / "manifest.json").read_text())
    m["arrays"]["doc_terms"]["sha256"] = hashlib.sha256((d / "doc_terms.npy").read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(m))
    n = len(index)
    ShardEngine(d, 0, n // 2, stats)  # rows without the damage
    with pytest.raises(IndexFormatError, match="doc_terms"):
        ShardEngine(d, n // 2, n, stats)
    with pytest.raises(IndexFormatError, match="doc_terms"):
        SkillIndex.load(d, mmap=True, verify="lazy")


# ---------------------------------------------------------------------- filters and updates per shard
def _records(skills, *, tagged=True):
    """JSONL records of ``skills`` with tags and two id prefixes, so the filters select something."""
    import json

    out = []
    for i, s in enumerate(skills):
        rec = {"id": s.id if i % 4 else "alpha:" + s.id.split(":")[-1], "name": s.name,
               "description": s.description,
               "body": s.body}
        if tagged:
            rec["tags"] = [t for t, on in (("even", i % 2 == 0), ("third", i % 3 == 0)) if on]
        out.append(json.dumps(rec) + "\n")
    return out


def _write(path, lines):
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _library(tmp_path, lines, scan):
    """A JSONL library and its index (HashEncoder), built as `skillsight index` builds it."""
    src = _write(tmp_path / "skills.jsonl", lines)
    index = SkillIndex.build(load_skills([src]).skills, HashEncoder(dim=48),
                             IndexConfig(candidates=40, scan=scan))
    return src, index.save(tmp_path / "idx")


FILTERS = [{"tags": ["even"]}, {"tags": ["even", "third"]}, {"source": "alpha"},
           {"source": "alpha", "tags": "third"}, {"tags": ["nothing-has-this"]},
           {"pins": ["alpha:audio-extractor", "skillsbench:academic-pdf-redaction"]},
           {"pins": ["skillsbench:academic-pdf-redaction"], "tags": ["even"]}, {"cut": "hit"},
           {"collapse": False},
           {"candidates": 7}, {"fusion": "convex", "lexical_weight": 0.3}, {"fusion": "rrf", "rrf_k": 20.0},
           {"lexical": "lec"}, {"lexical": "bm25", "tags": ["third"]}, {"lexical_candidates": 12},
           {"lexical_candidates": 30, "lexical": "lec", "tags": ["even"]}, {"allow_flagged": True},
           {"duplicate_cosine": 0.5}, {"abstention": "index", "cut": "hit"}]


@pytest.mark.parametrize("scan", ["exact", "int8"])
def test_filters_and_options_answer_as_the_single_index(tmp_path, scan):
    """Every filter and option of find_skills and SkillIndex.search (tags, source, pins, cut, collapse,
    candidates, fusion, lexical side, LEC coverage candidates, explain) gives the single index's answer
    on 1 and 3 shards."""
    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        lines = _records([_Rec(json.loads(x)) for x in fh])
    _, folder = _library(tmp_path, lines, scan)
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    for shards in (1, 3):
        sharded = ShardedIndex.local(folder, shards)
        sharded.head.encoder = HashEncoder(dim=48)
        for opts in FILTERS:
            for k in (3, 9) if shards > 1 else (4,):
                opts = {"abstention": None, **opts}
                a = find_skills(single, QUERIES, k, **opts)
                b = find_skills(sharded, QUERIES, k, **opts)
                assert [x.to_dict(digits=4) for x in a] == [x.to_dict(digits=4) for x in b], (shards, opts, k)
        a, b = single.search(QUERIES, k=6, explain=False), sharded.search(QUERIES, k=6, explain=False)
        assert a.evidence == b.evidence and a.skill_ids == b.skill_ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-6)  # float32 rounding
    assert any(find_skills(single, q, 3, tags=["even"], abstention=None)[0].hits for q in QUERIES)


class _Rec:
    """A corpus record as a Skill-like object for :func:`_records`."""

    def __init__(self, rec):
        self.id, self.name = rec["id"], rec["name"]
        self.description, self.body = rec["description"], rec["body"]


def _update_lines(lines):
    """The library after an update: one skill removed, one changed, three added (new ids)."""
    rec = [json.loads(x) for x in lines]
    removed = rec.pop(10)
    rec[20]["body"] += "\n\nAlso converts spreadsheets to PDF reports and merges their tables."
    for i, new in enumerate(("pdf-table-miner", "kube-deployer", "audio-notes")):
        rec.append({"id": f"alpha:{new}", "name": new,
                    "description": f"{new.replace('-', ' ')} for agents, step {i}",
                    "body": f"Use this skill to {new.replace('-', ' ')}: extract, deploy, transcribe.",
                    "tags": ["even"]})
    return [json.dumps(r) + "\n" for r in rec], removed["id"], rec[20]["id"]


@pytest.mark.parametrize("scan", ["exact", "int8"])
def test_an_update_reaches_the_shards_and_answers_as_the_single_updated_index(tmp_path, scan):
    """`update` (add, change, remove) then next_version: the shards answer what the single updated index
    answers; an update that changes nothing keeps every shard's engine."""
    from skillsight_fast.engine.update import update_index

    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        lines = _records([_Rec(json.loads(x)) for x in fh])
    src, folder = _library(tmp_path, lines, scan)
    sharded = ShardedIndex.local(folder, 3)
    sharded.head.encoder = HashEncoder(dim=48)
    before = sharded.search(QUERIES, k=5)
    new_lines, removed, changed = _update_lines(lines)
    _write(src, new_lines)
    report = update_index(folder, load_skills([src]).skills, encoder=HashEncoder(dim=48))
    assert len(report.added) == 3 and report.changed == [changed] and report.removed == [removed]
    v1 = sharded.next_version()
    assert v1.version == 1 and len(v1) == len(lines) + 2
    single = SkillIndex.load(folder, encoder=HashEncoder(dim=48))
    for k in (1, 5, 12):
        _same(single.search(QUERIES, k=k), v1.search(QUERIES, k=k))
    for opts in FILTERS[:4]:
        a = find_skills(single, QUERIES, 4, abstention=None, **opts)
        assert ([x.to_dict() for x in a]
                == [x.to_dict() for x in find_skills(v1, QUERIES, 4, abstention=None, **opts)])
    v1_ids = {m.id for m in v1.skills}
    assert {"alpha:pdf-table-miner", changed} <= v1_ids and removed not in v1_ids
    # the previous version keeps answering (a search that began before the swap) until the next update
    _same(before, sharded.search(QUERIES, k=5))
    # nothing changed: every shard keeps its engine, and the answer stays the single index's
    assert not update_index(folder, load_skills([src]).skills, encoder=HashEncoder(dim=48)).added
    v2 = v1.next_version()
    assert v2.reopened == [False, False, False]
    _same(single.search(QUERIES, k=7), v2.search(QUERIES, k=7))
    with pytest.raises(Exception, match="no longer serves version 0"):
        sharded.search(QUERIES, k=5)  # two versions on: dropped by the hosts


def test_ray_shards_take_a_watched_update_through_the_service(ray_cluster, tmp_path):
    """Served sharded on a local Ray cluster: the live-index watcher (`serve --ray --watch`) updates the
    folder and swaps the next sharded version in; the served answers (filters too) then equal those of
    a single-index service over the updated folder."""
    from skillsight_fast.agents.watch import LiveIndexWatcher

    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        lines = _records([_Rec(json.loads(x)) for x in fh])
    src, folder = _library(tmp_path, lines, "int8")
    sharded = ShardedIndex.connect(folder, 2, address=ray_cluster, cpus_per_shard=0.5)
    try:
        sharded.head.encoder = HashEncoder(dim=48)
        service = SkillService(folder, index=sharded)
        watcher = LiveIndexWatcher(service, [src], rule=lambda d: None)
        assert watcher.refresh() is None  # nothing changed yet
        new_lines, removed, _ = _update_lines(lines)
        _write(src, new_lines)
        report = watcher.refresh()
        assert report is not None and len(report.added) == 3 and report.removed == [removed]
        live = service.live()
        assert live.version == 1 and isinstance(live.index, ShardedIndex) and live.index.version == 1
        single = SkillService(folder, index=SkillIndex.load(folder, encoder=HashEncoder(dim=48)))
        for q in QUERIES:
            for opts in ({}, {"tags": ["even"]}, {"source": "alpha", "cut": "hit"}):
                a, b = single.find(q, 5, **opts), service.find(q, 5, **opts)
                a.pop("version"), b.pop("version")
                assert a == b, (q, opts)
        info = live.index.shard_info()
        assert sum(i["stop"] - i["start"] for i in info) == len(lines) + 2
        assert service.get_skill("alpha:kube-deployer")["name"] == "kube-deployer"
        # MCP resources/list of the updated sharded server, paged through by the SDK client
        listed = asyncio.run(_listing(service))
        assert listed == [r["uri"] for r in single.live().resources()]
        assert "skill://alpha%3Akube-deployer/SKILL.md" in listed
    finally:
        sharded.close()


async def _listing(service, page=25):
    """Every skill:// resource of a served index, paged by ``mcp.Client`` (pages of ``page``)."""
    import mcp

    from skillsight_fast.agents import service as service_module
    from skillsight_fast.agents.mcp import build_mcp_server

    server, uris, cursor = build_mcp_server(service), [], None
    saved, service_module.RESOURCES_PAGE_SIZE = service_module.RESOURCES_PAGE_SIZE, page
    try:
        async with mcp.Client(server) as client:
            while True:
                got = await client.list_resources(cursor=cursor)
                uris += [str(r.uri) for r in got.resources]
                cursor = got.next_cursor
                if cursor is None:
                    return uris
    finally:
        service_module.RESOURCES_PAGE_SIZE = saved
