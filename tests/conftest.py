"""Shared pytest configuration and fixtures.

The tests mirror the package (tests/engine/, tests/agents/, ...); the NumPy references and fakes
they share live in tests/support/ and are imported as top-level modules (``import reference``).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))


def pytest_configure(config):
    config.addinivalue_line("markers", "model: needs the installed model package")


@pytest.fixture(scope="session")
def teacher():
    """The bundled all-MiniLM-L6-v2 encoder (fp32), loaded once per run; skips when its package is absent."""
    from skillsight_fast.errors import ModelNotFoundError
    from skillsight_fast.models import load_encoder

    try:
        return load_encoder("all-MiniLM-L6-v2")
    except ModelNotFoundError as exc:  # weights package not installed
        pytest.skip(f"bundled model unavailable: {exc}")


@pytest.fixture(scope="session")
def small_skillsbench(teacher, tmp_path_factory: pytest.TempPathFactory):
    """(skills, tasks, static folder): 24 skillsbench documents and 4 tasks, a static model distilled over
    their tokens (once per run: the contextual and the fitted tier's tests share it)."""
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.models.distill import distill_to_folder

    ds = load_dataset(Path(__file__).parents[1] / "data" / "skillsbench", limit=4)
    rows = sorted({g for q in ds.queries for g in q.gold} | set(range(0, len(ds.docs), len(ds.docs) // 20)))
    skills = [ds.docs[i] for i in rows]
    tasks = [q.text for q in ds.queries] + ["merge two PDF files into one"]
    texts = [s.text for s in skills] + tasks
    ids = sorted({i for e in teacher._tokenizer.encode_batch(texts, add_special_tokens=False) for i in e.ids})
    folder = distill_to_folder(teacher, tmp_path_factory.mktemp("m2v") / "minilm-static", token_ids=ids)
    return skills, tasks, folder
