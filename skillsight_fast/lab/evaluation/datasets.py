"""Evaluation datasets in the shared format (``corpus.jsonl.gz``, ``queries.jsonl.gz``, ``meta.json``)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillsight_fast.errors import SkillFormatError
from skillsight_fast.files import read_jsonl
from skillsight_fast.library.skills import Skill, load_skills

logger = logging.getLogger(__name__)

#: The five datasets reported by ``skillsight eval --all`` (folders under the data root).
SHARED_DATASETS = ("skillsbench", "sra_theoremqa", "bfcl", "metatool", "gorilla_hf")
#: Datasets the adaptive rules and the ablation defaults may be fitted on (two skill libraries and
#: one function-calling corpus); metatool and gorilla_hf are only ever reported.
FIT_DATASETS = ("skillsbench", "sra_theoremqa", "bfcl")


@dataclass
class EvalQuery:
    """One labelled query of an evaluation :class:`Dataset`.

    Not :class:`skillsight_fast.library.queries.Task` (gold skills by id): the gold documents here are rows
    of the dataset's loaded corpus, which is what the metrics compare rankings against.

    Attributes
    ----------
    id : str
    text : str
    gold : frozenset of int
        Rows in :attr:`Dataset.docs` of the documents that answer it (never empty).
    """

    id: str
    text: str
    gold: frozenset[int]


@dataclass
class Dataset:
    """A retrieval corpus and its queries.

    Attributes
    ----------
    name : str
    docs : list of Skill
        The corpus (with the distractor pool composed in, when the dataset asks for it).
    queries : list of EvalQuery
    meta : dict
    n_gold_missing : int
        Gold links whose document is not in the corpus (dropped).
    """

    name: str
    docs: list[Skill]
    queries: list[EvalQuery]
    meta: dict[str, Any] = field(default_factory=dict)
    n_gold_missing: int = 0

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.docs]

    @property
    def query_texts(self) -> list[str]:
        return [q.text for q in self.queries]

    @property
    def gold(self) -> list[frozenset[int]]:
        return [q.gold for q in self.queries]


def default_data_root() -> Path:
    """``$SKILLSIGHT_DATA`` or the ``data/`` folder of a source checkout."""
    env = os.environ.get("SKILLSIGHT_DATA")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[3] / "data"


def load_dataset(path: str | os.PathLike[str], *, all_queries: bool = False, limit: int | None = None) -> Dataset:
    """Read a dataset folder.

    Parameters
    ----------
    path : path
        Folder with ``corpus.jsonl.gz``, ``queries.jsonl.gz`` and ``meta.json``; when
        ``meta.distractors`` names a sibling pool, the corpus is corpus ∪ pool − excluded ids.
    all_queries : bool
        Use ``queries.jsonl.gz`` even when a ``queries_small.jsonl.gz`` subset exists (metatool).
    limit : int, optional
        Keep only the first ``limit`` queries (in file order, which is sorted by id).

    Returns
    -------
    Dataset
        Queries without any gold document in the corpus are dropped (with a warning).
    """
    root = Path(path).expanduser()
    if not (root / "meta.json").is_file():
        raise SkillFormatError(f"{root}: not a dataset folder (no meta.json)")
    meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
    docs = load_skills([root]).skills
    qfile = root / "queries.jsonl.gz"
    small = root / "queries_small.jsonl.gz"
    if small.is_file() and not all_queries:
        qfile = small
    if not qfile.is_file():
        raise SkillFormatError(f"{root}: no queries file {qfile.name}")
    rows = {d.id: i for i, d in enumerate(docs)}
    queries: list[EvalQuery] = []
    missing = 0
    for rec in read_jsonl(qfile):
        gold = [rows[g] for g in rec.get("gold", []) if g in rows]
        missing += len(rec.get("gold", [])) - len(gold)
        if not gold:
            continue
        queries.append(EvalQuery(str(rec["id"]), str(rec["text"]), frozenset(gold)))
        if limit is not None and len(queries) >= limit:
            break
    if missing:
        logger.warning("%s: %d gold links point outside the corpus and were dropped", root.name, missing)
    return Dataset(meta.get("name", root.name), docs, queries, meta, missing)
