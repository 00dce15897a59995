"""The one "find skills" use case: search, abstention and hit records.

Every surface (the CLI, the HTTP and MCP servers, the prompt hook, the tool proxy, the framework
retrievers) calls :func:`find_skills` and only translates its :class:`Answer` into its own shape;
no surface decides what a hit is or when to abstain.

What an answer holds, in order:

1. **Pinned skills** (``index.pins`` or ``pins=``): always first, whatever the task, even when the
   task abstains; they do not count toward ``k``.
2. **Ranked hits**, at most ``k``, after

   * the **filters**: ``tags`` (a skill must carry every tag given, case-insensitively) and
     ``source`` (a folder the skill's SKILL.md lies in, or an id prefix; :func:`source_matches`).
     A filtered search scores only the skills that pass, so it still finds ``k`` of them;
   * the **duplicate collapse** (``collapse=True``): a skill with the same name as a better hit
     (:func:`name_key`) or an embedding with cosine at least the index's derived duplicate cosine
     (:func:`duplicate_cosine_of`; :data:`DUPLICATE_COSINE` for an older index) to it is not a hit
     of its own but is listed in that hit's ``copies``;
   * the **cut** at the abstention rule's threshold (by default the one the index derived at build
     from its own skills, without labels: :func:`skillsight_fast.engine.abstention.derive_abstention`):
     ``cut="task"`` (default) drops every hit of a
     task whose best hit is below it; ``cut="hit"`` drops each hit below it, so the number of hits
     varies with the task (none when nothing fits).

Examples
--------
>>> from skillsight_fast import SkillIndex
>>> from skillsight_fast.agents.find import find_skills
>>> index = SkillIndex.load("my-index")                            # doctest: +SKIP
>>> answer = find_skills(index, ["merge two PDF files"], k=3)[0]   # doctest: +SKIP
>>> [h.id for h in answer.hits]                                    # doctest: +SKIP
['pdf', 'pdf-merge', 'docx']
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.engine.columns import SkillTable, flagged_mask, name_key, record_fields, rows_by_id
from skillsight_fast.engine.result import check_queries
from skillsight_fast.errors import QueryError

if TYPE_CHECKING:
    from skillsight_fast.engine.result import SearchResult
    from skillsight_fast.engine.searcher import Searcher

#: Two skills whose (unit) embeddings have at least this cosine are copies of one skill. Chosen
#: a priori, not fitted: at 0.95 the texts differ by little more than formatting or a sentence.
DUPLICATE_COSINE = 0.95
#: Two unit vectors this close are the same vector up to float32 rounding (the same text).
IDENTICAL_COSINE = 1.0 - 1e-6
#: ``find_skills(abstention=INDEX_RULE)``: the rule the index derived at build (the default).
INDEX_RULE = "index"
#: The cut modes: per task (the abstention rule's historical meaning) or per hit.
CUTS = ("task", "hit")
#: Most tags one call may filter on.
MAX_FILTER_TAGS = 16


@dataclass(frozen=True)
class Hit:
    """One skill found for a task.

    Attributes
    ----------
    id, name, description, path : str
        What the index stores of the skill.
    score : float
        Fused score (the ranking key).
    cosine : float
        Raw dense similarity qᵀd (what a cosine abstention threshold reads).
    dense, lexical : float
        The background-calibrated dense score and the lexical score of the fusion.
    evidence : list of str
        The task's distinctive tokens that the skill contains.
    tags : list of str
        The skill's tags (front matter ``tags``, ``category``, ...).
    pinned : bool
        A pinned skill (returned first, whatever the task).
    copies : list of str
        Ids of the skills collapsed into this hit (same name or nearly the same embedding).
    """

    id: str
    name: str
    description: str
    path: str
    score: float
    cosine: float
    dense: float
    lexical: float
    evidence: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    pinned: bool = False
    copies: list[str] = field(default_factory=list)

    def to_dict(self, digits: int | None = None) -> dict[str, Any]:
        """JSON-able dict; scores rounded to ``digits`` when given."""
        out = asdict(self)
        if digits is not None:
            for key in ("score", "cosine", "dense", "lexical"):
                out[key] = round(out[key], digits)
        return out


@dataclass(frozen=True)
class Answer:
    """The hits for one task, and whether the abstention rule dropped them all.

    ``best`` is the best hit the rule dropped when it dropped them all (what ``search --explain``
    shows against the threshold); None otherwise. It is not part of :meth:`to_dict`. ``partial``: the
    shards of a sharded index that did not answer in time (the hits come from the others).
    """

    query: str
    hits: list[Hit]
    abstained: bool = False
    abstention: dict[str, Any] | None = None
    best: Hit | None = None
    partial: list[int] = field(default_factory=list)

    def to_dict(self, digits: int | None = 6) -> dict[str, Any]:
        """``{"query", "abstention", "hits": [...]}`` as the servers return it, with ``"partial": [shard,
        ...]`` when some shards of a sharded index did not answer."""
        out = {"query": self.query, "abstention": self.abstention, "hits": [h.to_dict(digits) for h in self.hits]}
        if self.partial:
            out["partial"] = list(self.partial)
        return out


def hits_of(index: Searcher, result: SearchResult, row: int, cosines: np.ndarray) -> list[Hit]:
    """The real (non-padding) hits of one result row, best first."""
    hits = []
    for rank, j in enumerate(result.ids[row].tolist()):
        if j < 0:
            continue
        meta = index.skills[j]
        hits.append(Hit(
            id=meta.id, name=meta.name, description=meta.description, path=meta.path,
            score=float(result.scores[row, rank]), cosine=float(cosines[row, rank]),
            dense=float(result.dense[row, rank]), lexical=float(result.lexical[row, rank]),
            evidence=list(result.evidence[row][rank]) if result.evidence else [],
            tags=list(getattr(meta, "tags", ())),
        ))
    return hits


def source_matches(meta: Any, source: str) -> bool:
    """Whether a skill comes from ``source``.

    ``source`` matches when it is a folder the skill's SKILL.md lies in (an absolute path, or a run
    of path components such as ``.claude/skills`` or ``anthropics-skills``), or when the skill's
    id starts with ``source/`` or ``source:`` (records from JSONL, prefixed ids of several roots).
    """
    src = source.strip().rstrip("/")
    if not src:
        return True
    sid = str(meta.id)
    if sid == src or sid.startswith((src + "/", src + ":")):
        return True
    path = str(meta.path or "")
    if not path:
        return False
    if src.startswith("/"):
        return path.startswith(src + "/")
    return f"/{src}/" in path


def _check_filters(tags: Sequence[str] | None, source: str | None) -> tuple[list[str], str | None]:
    if tags is None:
        tags = []
    elif isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, Sequence) or not all(isinstance(t, str) and t.strip() for t in tags):
        raise QueryError("'tags' must be a list of non-empty strings")
    if len(tags) > MAX_FILTER_TAGS:
        raise QueryError(f"at most {MAX_FILTER_TAGS} tags per search, got {len(tags)}")
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise QueryError("'source' must be a non-empty string (a folder or an id prefix)")
    return [t.strip().casefold() for t in tags], source


def allowed_rows(index: Searcher, *, tags: Sequence[str] | None = None, source: str | None = None,
                 allow_flagged: bool = False) -> np.ndarray:
    """bool (N,): the skills a search may return (filters passed, not flagged unless allowed)."""
    want, src = _check_filters(tags, source)
    metas = index.skills
    ok = np.ones(len(metas), bool) if allow_flagged else ~_flagged(index)
    if want:
        for j, m in enumerate(metas):
            if ok[j]:
                have = {t.casefold() for t in getattr(m, "tags", ())}
                ok[j] = all(t in have for t in want)
    if src is not None:
        for j, m in enumerate(metas):
            if ok[j]:
                ok[j] = source_matches(m, src)
    return ok


def _unfiltered_rows(index: Searcher, allow_flagged: bool) -> tuple[np.ndarray, int]:
    """:func:`allowed_rows` without filters (read-only) and how many it allows, cached on the index
    state like :func:`_flagged`: a served search allocates and counts no array of N per request."""
    state = getattr(index, "state", None)
    flags = index.state.flags
    key = f"_allowed_{bool(allow_flagged)}"
    n = len(index.skills)
    cached = state.__dict__.get(key) if state is not None else None
    if cached is not None and cached[0] is flags and cached[1].shape[0] == n:
        return cached[1], cached[2]
    mask = allowed_rows(index, allow_flagged=allow_flagged)
    mask.setflags(write=False)
    count = int(np.count_nonzero(mask))
    if state is not None:
        state.__dict__[key] = (flags, mask, count)
    return mask, count


def _flagged(index: Searcher) -> np.ndarray:
    """bool (N,): the skills the injection scan flagged (cached on the index state while its flags
    are the same object: a served search does not walk a million rows)."""
    state = getattr(index, "state", None)
    flags = index.state.flags
    n = len(index.skills)
    cached = state.__dict__.get("_flagged") if state is not None else None
    if cached is not None and cached[0] is flags and cached[1].shape[0] == n:
        return cached[1]  # type: ignore[no-any-return]
    mask = flagged_mask(flags, n)
    if state is not None:
        state.__dict__["_flagged"] = (flags, mask)
    return mask


def _rows_of(index: Searcher) -> Any:
    """skill id -> row (cached on the index state like :func:`_name_groups`)."""
    state = getattr(index, "state", None)
    cached = state.__dict__.get("_rows_of") if state is not None else None
    if cached is not None and cached[0] is index.skills:
        return cached[1]
    rows = rows_by_id(index.skills)
    if state is not None:
        state.__dict__["_rows_of"] = (index.skills, rows)
    return rows


class _RestrictedDenseStage:
    """A dense stage that scores only ``rows`` (exact s⊥ over the filtered skills, by the float32 loop
    of the scans' re-scoring, ties by ascending row). A sharded index
    (:class:`skillsight_fast.cluster.ShardedIndex`) reads :attr:`restricted_rows` and has each shard
    score its own allowed rows the same way."""

    def __init__(self, index: Searcher, rows: np.ndarray) -> None:
        self.index = index
        self.restricted_rows = np.asarray(rows, np.int64)

    def __call__(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        from skillsight_fast.kernels.compressed import rescore_rows

        rows = self.restricted_rows
        docs = self.index.dense.embeddings_perp
        s = np.stack([rescore_rows(q, docs, rows) for q in np.asarray(q_perp, np.float32)])
        d = min(depth, rows.size)
        top = np.argsort(-s, axis=1, kind="stable")[:, :d]
        return rows[top], np.take_along_axis(s, top, 1)  # int64 rows, float32 scores (new arrays)


def _restricted_dense_stage(index: Searcher, rows: np.ndarray) -> Any:
    """A dense stage that scores only ``rows`` (:class:`_RestrictedDenseStage`)."""
    return _RestrictedDenseStage(index, rows)


def _name_groups(index: Searcher) -> dict[str, list[int]]:
    """name_key -> rows, for the names that more than one skill has (cached on the index state,
    valid while its list of skills is the same object)."""
    state = index.state
    cached = state.__dict__.get("_name_groups")
    if cached is not None and cached[0] is state.skills:
        return cached[1]  # type: ignore[no-any-return]
    everything: dict[str, list[int]] = {}
    for j, m in enumerate(state.skills):
        everything.setdefault(name_key(m.name), []).append(j)
    groups = {n: rows for n, rows in everything.items() if len(rows) > 1 and n}
    state.__dict__["_name_groups"] = (state.skills, groups)
    return groups


def tool_server(meta: Any) -> str | None:
    """The server of a tool indexed as ``server/tool`` (no file, id = server + "/" + name), else None."""
    server, sep, rest = meta.id.partition("/")
    return server if sep and not meta.path and rest == meta.name else None


def _other_servers(a: Any, b: Any) -> bool:
    """Whether two entries are tools of different servers: never copies of each other."""
    sa, sb = tool_server(a), tool_server(b)
    return sa is not None and sb is not None and sa != sb


def _row_field(metas: Any, row: int, name: str) -> str:
    """One field of a skill record: from a :class:`SkillTable`, that field alone is decoded (a search
    reads the ids and servers of a few hundred same-name copies at 1M skills, not their records)."""
    if isinstance(metas, SkillTable):
        return metas.field(row, name)
    return getattr(metas[row], name)  # type: ignore[no-any-return]


def _row_server(metas: Any, row: int) -> str | None:
    """:func:`tool_server` of a row, reading only its id, name and path."""
    server, sep, rest = _row_field(metas, row, "id").partition("/")
    if not sep or _row_field(metas, row, "path") or rest != _row_field(metas, row, "name"):
        return None
    return server


def _skill_ids(index: Searcher, rows: Sequence[int]) -> list[str]:
    """The ids of ``rows`` (only the id field of each record is read)."""
    return record_fields(index.skills, rows, "id")


def collapse_rows(index: Searcher, rows: Sequence[int], allowed: np.ndarray | None = None,
                  threshold: float = DUPLICATE_COSINE) -> list[tuple[int, list[int]]]:
    """Ranked rows with their copies folded in: ``[(row, [copy rows]), ...]``, best first.

    A row is a copy of an earlier kept row when both names have the same :func:`name_key` or
    their embeddings' cosine is at least ``threshold``. Same-name copies are looked up in the
    whole library (those ``allowed``), near-vector copies among ``rows``. Tools of different
    servers (:func:`tool_server`) are never copies: two servers' ``search`` are two tools.
    """
    rows = [int(j) for j in rows if j >= 0]
    if not rows:
        return []
    metas = index.skills
    emb = np.asarray(index.dense.embeddings[rows], dtype=np.float32)
    sims = emb @ emb.T
    if isinstance(metas, SkillTable):  # the groups stored with the index: no walk over the library
        same_name = metas.same_name
    else:
        groups = _name_groups(index)

        def same_name(row: int) -> list[int]:
            return groups.get(name_key(metas[row].name), [])
    servers: dict[int, str | None] = {}

    def server(row: int) -> str | None:
        if row not in servers:
            servers[row] = _row_server(metas, row)
        return servers[row]

    def other_servers(j: int, j2: int) -> bool:  # _other_servers of the two rows; j2 read only if j is a tool
        sa = server(j)
        if sa is None:
            return False
        sb = server(j2)
        return sb is not None and sa != sb

    kept: list[tuple[int, list[int]]] = []
    taken: set[int] = set()
    for a, j in enumerate(rows):
        if j in taken:
            continue
        taken.add(j)
        copies: list[int] = []
        for j2 in same_name(j):
            if j2 not in taken and (allowed is None or allowed[j2]) and not other_servers(j, j2):
                copies.append(j2)
                taken.add(j2)
        for b in range(a + 1, len(rows)):
            j2 = rows[b]
            if j2 not in taken and sims[a, b] >= threshold and not other_servers(j, j2):
                copies.append(j2)
                taken.add(j2)
        kept.append((j, copies))
    return kept


def duplicate_cosine_of(index: Searcher) -> float:
    """The cosine from which two skills of ``index`` are copies: the one derived at build for its
    document encoder (``abstention.duplicate_cosine`` in the manifest; null: no outlier, so only
    identical vectors, :data:`IDENTICAL_COSINE`), else :data:`DUPLICATE_COSINE` (an index built
    before the rule existed)."""
    rule = index.state.abstention
    if isinstance(rule, dict) and "duplicate_cosine" in rule:
        value = rule["duplicate_cosine"]
        return float(value) if isinstance(value, (int, float)) else IDENTICAL_COSINE
    return DUPLICATE_COSINE


def find_skills(index: Searcher, tasks: str | Sequence[str], k: int = 5, *,
                abstention: Abstention | str | None = INDEX_RULE, lock: threading.Lock | None = None,
                allow_flagged: bool = False, tags: Sequence[str] | None = None, source: str | None = None,
                pins: Sequence[str] | None = None, cut: str = "task", collapse: bool = True,
                max_k: int | None = None, duplicate_cosine: float | None = None,
                **knobs: Any) -> list[Answer]:
    """Search, filter, collapse copies, apply the cut, and build the hit records of each task.

    Parameters
    ----------
    index : Searcher
        A :class:`~skillsight_fast.engine.index.SkillIndex` or a sharded one
        (:class:`~skillsight_fast.engine.searcher.Searcher`).
    tasks : str or sequence of str
        Validated here, once, with :func:`~skillsight_fast.engine.result.check_queries` (QueryError on bad input).
    k : int
        Ranked hits per task (capped at the library size); pinned skills come on top of them.
    abstention : Abstention, ``"index"`` or None
        The threshold of the cut (see ``cut``). ``"index"`` (default): the rule the index derived at
        build without labels (``index.state.abstention``; none for an index built before it);
        None keeps every hit.
    lock : threading.Lock, optional
        Held around the encoder (servers share one encoder between request threads).
    allow_flagged : bool
        False (default) leaves out the skills the index-time scan flagged (``index.state.flags``,
        :mod:`skillsight_fast.library.screen`): what a hook or proxy injects into a prompt must use False.
    tags : sequence of str, optional
        Only skills that carry every one of these tags (case-insensitive).
    source : str, optional
        Only skills from this folder or id prefix (:func:`source_matches`).
    pins : sequence of str, optional
        Skill ids returned first in every answer; None: the index's :attr:`SkillIndex.pins`. Unknown
        ids, and pinned skills the filters leave out, are skipped.
    cut : str
        ``task`` (drop all hits of a task whose best hit is below the threshold) or ``hit`` (drop
        each hit below it).
    collapse : bool
        Fold copies of a skill (same name, or embedding cosine ≥ :data:`DUPLICATE_COSINE`) into the
        best-ranked one's ``copies``.
    max_k : int, optional
        A lower cap on ``k`` than the index's (a server's per-request cap).
    duplicate_cosine : float, optional
        The cosine from which two skills are copies; default: the one the index derived for its own
        document encoder (:func:`duplicate_cosine_of`).
    **knobs
        Query-time settings passed to :meth:`SkillIndex.search_vectors` (``candidates``,
        ``fusion``, ``lexical_weight``, ...).

    Returns
    -------
    list of Answer, one per task

    Raises
    ------
    QueryError
        A bad task, ``k``, filter or ``cut``.
    """
    if isinstance(abstention, str):
        if abstention != INDEX_RULE:
            raise QueryError(f"'abstention' must be an Abstention, {INDEX_RULE!r} or None, got {abstention!r}")
        abstention = Abstention.of_rule(index.state.abstention)
    texts = check_queries(tasks)  # the entry point: checked here, once
    n = len(index)
    k = min(index.check_k(k, most=max_k), max(n, 1))
    if cut not in CUTS:
        raise QueryError(f"'cut' must be one of {', '.join(CUTS)}, got {cut!r}")
    filtered = bool(tags) or source is not None
    if filtered:
        allowed = allowed_rows(index, tags=tags, source=source, allow_flagged=allow_flagged)
        n_allowed = int(np.count_nonzero(allowed))
    else:
        _check_filters(tags, source)  # the same errors as a filtered call for a malformed empty filter
        allowed, n_allowed = _unfiltered_rows(index, allow_flagged)
    pin_ids = list(getattr(index, "pins", []) or []) if pins is None else list(pins)
    row_of = _rows_of(index) if pin_ids else {}
    pin_rows = list(dict.fromkeys(row_of[p] for p in pin_ids if p in row_of and allowed[row_of[p]]))
    rule = abstention.to_dict() if abstention is not None else None
    if not n_allowed:  # nothing passes the filters: nothing to search
        return [Answer(query=t, hits=[], abstained=abstention is not None, abstention=rule) for t in texts]
    if filtered:
        knobs.setdefault("dense_stage", _restricted_dense_stage(index, np.flatnonzero(allowed)))
    # deep enough for the pins, the copies and the filtered-out lexical candidates to leave k hits
    depth = min(n, 2 * k + len(pin_rows) + 8) if n else 1
    need = min(2 * k + len(pin_rows), n_allowed)
    with lock if lock is not None else contextlib.nullcontext():
        # the first search decides which encoder answers each task (a lookup-first cascade may send
        # some to the transformer); a deeper search reuses those vectors
        vectors, result = index.encode_search(texts, depth, **knobs)
        while True:
            result.ids = np.where(allowed[np.maximum(result.ids, 0)] & (result.ids >= 0), result.ids, -1)
            if depth >= n or all((row >= 0).sum() >= need for row in result.ids):
                break
            depth = min(n, depth * 4)
            result = index.search_vectors(vectors, texts, depth, **knobs)
    cosines = result.cosine  # qᵀd of each hit, from the search itself
    dup = duplicate_cosine_of(index) if duplicate_cosine is None else float(duplicate_cosine)
    pinned_set = set(pin_rows)
    answers = []
    for i, text in enumerate(texts):
        ranked = [j for j in result.ids[i].tolist() if j >= 0]
        by_row = dict(zip(ranked, hits_of(index, result, i, cosines)))  # hits_of keeps the same rows in order
        groups = collapse_rows(index, ranked, allowed, dup) if collapse else [(j, []) for j in ranked]
        pinned_copies: dict[int, list[int]] = {}
        if collapse and pin_rows:  # a copy of a pinned skill is not a hit of its own either
            for j, copies in collapse_rows(index, [*pin_rows, *ranked], allowed, dup):
                if j in pinned_set:
                    pinned_copies[j] = copies
            covered = pinned_set | {c for cs in pinned_copies.values() for c in cs}
        else:
            covered = pinned_set
        groups = [(j, [c for c in cs if c not in covered]) for j, cs in groups if j not in covered]
        kept = groups
        if abstention is not None:
            def value(h: Hit) -> float:
                return h.cosine if abstention.signal == "cosine" else h.score
            if cut == "hit":
                kept = [(j, cs) for j, cs in groups if value(by_row[j]) >= abstention.threshold]
            elif not groups or max(value(by_row[j]) for j, _ in groups) < abstention.threshold:
                kept = []
        abstained = abstention is not None and not kept
        best = max((by_row[j] for j, _ in groups), key=value) if abstained and groups else None
        hits = [_pinned_hit(index, j, by_row.get(j), vectors[i], pinned_copies.get(j, [])) for j in pin_rows]
        hits += [dataclasses.replace(by_row[j], copies=_skill_ids(index, cs)) for j, cs in kept[:k]]
        answers.append(Answer(query=text, hits=hits, abstained=abstained, abstention=rule, best=best,
                              partial=list(getattr(result, "partial", None) or [])))
    return answers


def _pinned_hit(index: Searcher, row: int, found: Hit | None, vector: np.ndarray, copies: list[int]) -> Hit:
    """The hit record of a pinned skill: its search values when the search found it, else its
    dense similarity alone (lexical 0)."""
    ids = _skill_ids(index, copies)
    if found is not None:
        return dataclasses.replace(found, pinned=True, copies=ids)
    meta = index.skills[row]
    cosine = float(np.asarray(index.dense.embeddings[row], np.float32) @ vector)
    q_perp = index.remove_background(vector[None, :])[0]
    dense = float(np.asarray(index.dense.embeddings_perp[row], np.float32) @ q_perp)
    return Hit(id=meta.id, name=meta.name, description=meta.description, path=meta.path, score=dense,
               cosine=cosine, dense=dense, lexical=0.0, tags=list(getattr(meta, "tags", ())), pinned=True,
               copies=ids)
