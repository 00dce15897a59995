"""IndexConfig in sections: flat keywords still work, settled() decides every adaptive None field,
the scan types' declared parameters are the CLI's scan flags, and an index saved before the sections
loads with the config it was searched with."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast.config import (
    CASCADE_KEYS,
    FLAT_KEYS,
    FLAT_SCAN_KEYS,
    AnalyzerConfig,
    IndexConfig,
    ScanConfig,
    ScoringConfig,
)
from skillsight_fast.engine.scan import SCAN_PARAMS, SCAN_TYPES, build_scan
from skillsight_fast.engine.validate import check_config

DATA = Path(__file__).resolve().parents[1] / "data"
#: The manifest keys of a config before the sections (today's manifests keep them).
FLAT = ["model", "int8", "min_token_len", "max_token_len", "otsu_weighted", "background_tokens", "max_rank",
        "rank", "renormalize", "beta", "candidates", "lexical_candidates", "fusion", "lexical_weight", "rrf_k",
        "seed", "scan", "int8_oversample", "binary_rerank", "ivf_nlist", "ivf_nprobe", "adaptive", "lexical",
        "query_encoder", "query_model", "document_vector", "query_int8", "lexical_evidence",
        "continuation"]


def test_at_most_twelve_top_level_fields() -> None:
    names = [f.name for f in dataclasses.fields(IndexConfig)]
    assert len(names) <= 12, names
    assert {"analyzer", "background", "encoder", "scoring", "scan"} <= set(names)
    for gone in ("lexical_side", "document_vector_side", "query_int8_side", "lexical_evidence_side"):
        assert not hasattr(IndexConfig(), gone)


def test_flat_keywords_land_in_their_sections() -> None:
    cfg = IndexConfig(candidates=50, min_token_len=3, background_tokens="all", model="m", scan="ivf",
                      ivf_nprobe=8, int8_oversample=6, seed=7, adaptive=False)
    assert cfg.scoring.candidates == 50 and cfg.analyzer.min_token_len == 3
    assert cfg.background.tokens == "all" and cfg.encoder.model == "m" and cfg.seed == 7 and not cfg.adaptive
    assert cfg.scan == ScanConfig("ivf", {"nprobe": 8, "oversample": 6})
    # a section and a flat keyword together: the flat one overrides that field only
    mixed = IndexConfig(scoring=ScoringConfig(candidates=10, fusion="rrf"), candidates=20)
    assert mixed.scoring == ScoringConfig(candidates=20, fusion="rrf")
    assert IndexConfig(analyzer=AnalyzerConfig(3, 30)).analyzer.max_token_len == 30


def test_replace_takes_flat_keywords_and_keeps_the_rest() -> None:
    cfg = IndexConfig(scan="binary", binary_rerank=16, fusion="convex")
    changed = cfg.replace(lexical_weight=0.5, scan="int8")
    assert changed.scoring.lexical_weight == 0.5 and changed.scoring.fusion == "convex"
    assert changed.scan == ScanConfig("int8", {"rerank": 16})  # the kind changes, the parameters stay
    assert cfg.scoring.lexical_weight == 1.0  # frozen: the original is unchanged
    assert cfg.replace(scan=ScanConfig("exact")).scan.params == {}


@pytest.mark.parametrize("bad, match", [
    ({"nope": 1}, "unknown IndexConfig fields"),
    ({"fusion": "max"}, "fusion"),
    ({"scan": "hnsw"}, "scan"),
    ({"ivf_nlist": 0}, "scan parameter nlist"),
    ({"min_token_len": 5, "max_token_len": 4}, "min_token_len"),
    ({"query_encoder": "static", "query_int8": True}, "transformer tier only"),
])
def test_bad_fields_are_refused_by_name(bad: dict, match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        IndexConfig(**bad)


def test_scan_config_refuses_parameters_no_scan_declares() -> None:
    with pytest.raises(ValueError, match="unknown scan parameters"):
        ScanConfig("int8", {"efsearch": 3})


def test_manifest_keeps_the_flat_keys_and_round_trips() -> None:
    cfg = IndexConfig(candidates=40, scan="ivf", ivf_nlist=9, lexical="lec", query_encoder="transformer")
    flat = cfg.to_dict()
    assert list(flat) == FLAT
    assert flat["candidates"] == 40 and flat["scan"] == "ivf" and flat["ivf_nlist"] == 9 and flat["ivf_nprobe"] is None
    check_config(flat)
    check_config(cfg.settled(can_fit=True).to_dict())
    assert IndexConfig.from_dict(json.loads(json.dumps(flat))) == cfg
    assert IndexConfig.from_dict(json.loads(json.dumps(cfg.sections()))) == cfg
    assert set(FLAT_KEYS) | set(FLAT_SCAN_KEYS) | {"scan", "adaptive", "seed"} == set(FLAT)
    with pytest.raises(ValueError, match="unknown IndexConfig fields"):
        IndexConfig.from_dict({**flat, "nope": 1})
    with pytest.raises(ValueError, match="unknown IndexConfig scoring fields"):
        IndexConfig.from_dict({"scoring": {"k": 3}})


# the rules the *_side properties applied before settled() decided them (docs/ADAPTIVE.md), written out
@pytest.mark.parametrize("given, can_fit, tier, lexical, document_vector, query_int8", [
    ({}, True, "fitted", "bm25", "text+namedesc", None),
    ({}, False, "transformer", "bm25", "text+namedesc", True),
    ({"adaptive": False}, True, "transformer", "lec", "text", False),
    ({"int8": True}, True, "transformer", "bm25", "text+namedesc", True),
    ({"query_int8": False}, True, "transformer", "bm25", "text+namedesc", False),
    ({"adaptive": False, "query_int8": True}, False, "transformer", "lec", "text", True),
    ({"query_encoder": "static-mapped"}, True, "static-mapped", "bm25", "text+namedesc", None),
    ({"adaptive": False, "lexical": "bm25", "document_vector": "text+namedesc"}, True, "transformer", "bm25",
     "text+namedesc", False),
])
def test_settled_decides_every_adaptive_none_field(given, can_fit, tier, lexical, document_vector,
                                                   query_int8) -> None:
    settled = IndexConfig(**given).settled(can_fit=can_fit)
    assert settled.encoder.query_encoder == tier
    assert settled.scoring.lexical == lexical and settled.encoder.document_vector == document_vector
    assert settled.encoder.query_int8 is query_int8 and settled.scoring.lexical_evidence == "masked"
    assert settled.settled(can_fit=not can_fit) == settled  # idempotent: nothing left to decide


def test_index_flags_are_the_scan_types_parameters() -> None:
    from skillsight_fast.cli import build_parser
    from skillsight_fast.cli.core import scan_params
    from skillsight_fast.cli.options import option_counts

    assert set(SCAN_PARAMS) == set(FLAT_SCAN_KEYS.values())  # the flat manifest names map every parameter
    declared = {p.name for t in SCAN_TYPES.values() for p in t.PARAMS}
    assert declared == set(SCAN_PARAMS)
    counts = option_counts()
    for command in ("index", "rescan"):
        assert {f"--{name}" for name in SCAN_PARAMS} <= set(counts[command]), command
    args = build_parser().parse_args(["index", "lib", "-o", "out", "--scan", "binary", "--rerank", "5",
                                      "--nprobe", "3"])
    assert scan_params(args) == {"rerank": 5, "nprobe": 3}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["rescan", "idx", "--oversample", "0"])


@pytest.mark.parametrize("kind, params, recorded", [
    ("int8", {"oversample": 7}, {"oversample": 7}),
    ("binary", {"oversample": 2, "rerank": 9}, {"oversample": 2, "rerank_factor": 9}),
    ("binary", {}, {"oversample": 4, "rerank_factor": 128}),  # the declared defaults
])
def test_each_scan_reads_its_declared_parameters(kind: str, params: dict, recorded: dict) -> None:
    docs = np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    scan = build_scan(kind, docs, config=IndexConfig(scan=ScanConfig(kind, params)))
    assert scan.params() == recorded
    assert {p.name for p in type(scan).PARAMS} >= set(params)
    for p in type(scan).PARAMS:
        assert p.default in f"{p.help} (default {p.default})" and FLAT_SCAN_KEYS[p.flat_key] == p.name


def test_index_saved_before_sections_loads_with_its_searched_config(tmp_path: Path) -> None:
    """tests/data/index_before_sections (flat keys, None adaptive fields, the cascade in the config): its
    config loads into the sections with the None fields decided as its searches decided them, agreeing
    with the decisions the build recorded; saved again, the flat manifest holds the decided values."""
    from skillsight_fast import SkillIndex

    manifest = json.loads((DATA / "index_before_sections" / "manifest.json").read_text(encoding="utf-8"))
    old = manifest["config"]
    assert old["lexical"] is None and old["document_vector"] is None and set(CASCADE_KEYS) <= set(old)
    folder = tmp_path / "old"
    shutil.copytree(DATA / "index_before_sections", folder)
    index = SkillIndex.load(folder)
    cfg = index.config
    assert cfg.scoring.lexical == index.decisions.lexical == "bm25"
    assert cfg.encoder.document_vector == index.decisions.document_vector == "text+namedesc"
    assert cfg.scoring.lexical_evidence == index.decisions.lexical_evidence == "masked"
    assert cfg.encoder.query_encoder == "contextual" and cfg.encoder.query_int8 is None
    assert cfg.scan.params == {"oversample": 4} and cfg.scoring.candidates == old["candidates"]
    index.save(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "manifest.json").read_text(encoding="utf-8"))["config"]
    assert list(again) == FLAT
    assert {k: v for k, v in again.items() if old.get(k) is not None and k != "query_model"} == {
        k: v for k, v in old.items() if v is not None and k not in CASCADE_KEYS and k != "query_model"}
    assert again["lexical"] == "bm25" and again["document_vector"] == "text+namedesc"
