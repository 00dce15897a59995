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
    from skillsight_fast.models import load_encoder

    try:
        return load_encoder("all-MiniLM-L6-v2")
    except Exception as exc:  # weights package not installed
        pytest.skip(f"bundled model unavailable: {exc}")
