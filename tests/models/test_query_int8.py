"""Query-side int8 arm of ``skillsight eval``: tasks by the dynamically int8-quantised MiniLM,
documents by the float32 one (docs/ENCODERS.md, "A faster transformer").

Real data: 8 skillsbench tasks, their gold SKILL.md documents and 24 others, the bundled MiniLM and
its int8 copy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from skillsight_fast.lab.evaluation.datasets import Dataset, EvalQuery, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext

pytestmark = pytest.mark.model

ROOT = Path(__file__).parents[2]
#: Cosine of int8 to float32 task vectors: measured min 0.990 over all 73 skillsbench tasks.
MIN_COSINE = 0.98


@pytest.fixture(scope="module")
def dataset(teacher):
    full = load_dataset(ROOT / "data" / "skillsbench", limit=8)
    rows = sorted({g for q in full.queries for g in q.gold}
                  | set(range(0, len(full.docs), len(full.docs) // 24)))
    new = {r: i for i, r in enumerate(rows)}
    queries = [EvalQuery(q.id, q.text, frozenset(new[g] for g in q.gold)) for q in full.queries]
    return Dataset("skillsbench-sample", [full.docs[r] for r in rows], queries)


def test_query_int8_changes_only_the_task_vectors(dataset, tmp_path: Path) -> None:
    fp32 = EvalContext(dataset, cache_dir=tmp_path, query_int8=False)
    q8 = EvalContext(dataset, cache_dir=tmp_path, query_int8=True)
    assert q8.notes["query_encoder"] == {"tier": "transformer", "query_int8": "all"}
    np.testing.assert_array_equal(q8.doc_emb, fp32.doc_emb)  # documents stay float32
    cos = np.sum(q8.query_emb * fp32.query_emb, axis=1)
    assert not np.array_equal(q8.query_emb, fp32.query_emb)  # the int8 graph really ran
    assert cos.min() >= MIN_COSINE, cos.min()
    # a second context reads the int8 task vectors back from the cache, not the float32 ones
    again = EvalContext(dataset, cache_dir=tmp_path, query_int8=True)
    np.testing.assert_array_equal(again.query_emb, q8.query_emb)
    both = EvalContext(dataset, cache_dir=tmp_path, int8=True)  # --int8: both sides int8, cached apart
    assert not np.array_equal(both.doc_emb, fp32.doc_emb)
    np.testing.assert_allclose(np.sum(both.query_emb * q8.query_emb, axis=1), 1.0, atol=1e-5)


def test_default_context_searches_as_each_index_would(dataset, tmp_path: Path) -> None:
    """No flag: the default skillsight gets int8 task vectors (as its index searches), the paper's
    configuration and the baselines float32."""
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.lab.evaluation.methods import METHODS, paper_config

    ctx = EvalContext(dataset, cache_dir=tmp_path, shipped=False)  # as configured, not the shipped cascade
    fp32 = EvalContext(dataset, cache_dir=tmp_path, query_int8=False)
    q8 = EvalContext(dataset, cache_dir=tmp_path, query_int8=True)
    np.testing.assert_array_equal(ctx.task_vectors(IndexConfig()), q8.query_emb)
    np.testing.assert_array_equal(ctx.task_vectors(paper_config()), fp32.query_emb)
    np.testing.assert_array_equal(ctx.query_emb, fp32.query_emb)  # what dense, rrf, abtt... use
    np.testing.assert_array_equal(METHODS["skillsight"](ctx), METHODS["skillsight"](q8))
    np.testing.assert_array_equal(METHODS["skillsight-paper"](ctx), METHODS["skillsight-paper"](fp32))
    np.testing.assert_array_equal(METHODS["dense"](ctx), METHODS["dense"](fp32))
    # and it is what a real index of the default config returns for the same tasks
    index = ctx.index(IndexConfig())
    from skillsight_fast.models import load_encoder

    index.encoder = load_encoder()
    direct = index.search(list(dataset.query_texts), k=10).ids
    np.testing.assert_array_equal(METHODS["skillsight"](ctx)[:, :10], direct)


def test_query_int8_refuses_a_static_tier(dataset) -> None:
    with pytest.raises(ValueError, match="transformer queries only"):
        EvalContext(dataset, query_encoder="static-mapped", query_int8=True)


@pytest.mark.slow
def test_cli_eval_query_int8(dataset, tmp_path: Path, capsys) -> None:
    import gzip
    import json

    from skillsight_fast.cli import main

    data = tmp_path / "ds"
    data.mkdir()
    with gzip.open(data / "corpus.jsonl.gz", "wt", encoding="utf-8") as fh:
        for s in dataset.docs:
            fh.write(json.dumps({"id": s.id, "name": s.name, "description": s.description,
                                 "body": s.body}) + "\n")
    with gzip.open(data / "queries.jsonl.gz", "wt", encoding="utf-8") as fh:
        for q in dataset.queries:
            fh.write(json.dumps({"id": q.id, "text": q.text,
                                 "gold": [dataset.docs[g].id for g in q.gold]}) + "\n")
    (data / "meta.json").write_text(json.dumps({"name": "skillsbench-sample", "distractors": None}))
    out = tmp_path / "r.json"
    assert main(["-c", "methods=skillsight", "-c", "query-int8=true", "-c", f"cache-dir={tmp_path / 'cache'}",
                 "-c",
                 "bootstrap=20", "-c", "quiet=true", "eval", "--data", str(data), "--json", str(out)]) == 0
    obj = json.loads(out.read_text())
    assert obj["notes"]["query_encoder"]["query_int8"] == "all"
    assert 0.0 < obj["results"]["skillsight"]["recall@10"] <= 1.0
    assert main(["-c", "methods=skillsight", "-c", "query-int8=true", "-c", "query-encoder=static",
                 "-c", "quiet=true",
                 "eval", "--data", str(data)]) == 2
    assert "--query-int8" in capsys.readouterr().err
