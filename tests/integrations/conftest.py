"""Real tool catalogues for the agent-API adapters: bfcl's function schemas and metatool's plugins.

Each catalogue is a list of Claude ``ToolParam`` dicts (name, description, input_schema) and the
tasks whose gold tools it holds; the OpenAI tests turn the same dicts into function tools, so one
index (one :class:`ToolCatalog`) serves both adapters.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"


def api_name(name: str) -> str:
    """A bfcl function name as the APIs take it (``^[a-zA-Z0-9_-]{1,64}$``)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def load_catalogue(name: str, n_tasks: int, n_tools: int) -> tuple[list[dict], list[str]]:
    """(tools, tasks): the gold tools of the first ``n_tasks`` tasks, then other tools in corpus order
    up to ``n_tools`` (names made API-safe, the first of two that collide kept)."""
    docs = _read(DATA / name / "corpus.jsonl.gz")
    queries = _read(DATA / name / "queries.jsonl.gz")[:n_tasks]
    gold = {g for q in queries for g in q["gold"]}
    order = [d for d in docs if d["id"] in gold] + [d for d in docs if d["id"] not in gold]
    tools, seen = [], set()
    for d in order:
        tool_name = api_name(d["name"])
        if tool_name in seen:
            continue
        seen.add(tool_name)
        schema: dict = {"type": "object", "properties": {}}
        if d.get("body", "").startswith("{"):
            params = json.loads(d["body"]).get("parameters") or {}
            schema = {**params, "type": "object"}  # bfcl writes "dict" for an object
        tools.append({"name": tool_name, "description": d["description"], "input_schema": schema})
        if len(tools) == n_tools:
            break
    return tools, [q["text"] for q in queries]


@pytest.fixture(scope="session")
def bfcl_catalogue():
    """500 bfcl function tools and 200 bfcl tasks."""
    return load_catalogue("bfcl", 200, 500)


@pytest.fixture(scope="session")
def metatool_catalogue():
    """metatool's 199 plugins (no parameters) and 200 metatool tasks."""
    return load_catalogue("metatool", 200, 500)
