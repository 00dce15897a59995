"""Updates of a sharded layout that rewrite only the shards whose rows changed.

:func:`update_layout` brings an index folder and its shard folders (:mod:`skillsight_fast.cluster.layout`)
in line with the library as it is now:

1. The library is put in the layout's row order: a skill keeps the row it had (changed or not), a
   removed skill's row goes, and added skills are appended after the last row.
2. :func:`~skillsight_fast.engine.update.update_index` re-encodes only the added and changed skills and
   recomputes the statistics, keeping the background basis and the build decisions
   (``keep_background``): every statistic that is a per-term sum (vocabulary, IDF, generic tokens, LEC
   weights, BM25 idf and mean length) and the abstention rule are the updated library's, exactly.
3. The rule: the basis the updated library would have is estimated as a build estimates it
   (:func:`fresh_basis`, from token directions the layout keeps as sums and this update moves by its
   own rows: :mod:`skillsight_fast.cluster.drift`); while the sine of the largest principal angle
   between it and the kept basis is at most :data:`MAX_BASIS_DRIFT` (:func:`basis_drift`), the basis
   is kept. Past it, the statistics are recomputed whole (a new basis moves every row's
   background-removed vector, so every shard is rewritten:
   :func:`~skillsight_fast.cluster.layout.refresh_layout`). The threshold was measured on the real
   libraries (experiments/shard_statistics_drift.py).
4. While the basis holds, only the shards that lost, changed or gained rows are rewritten: a shard
   whose rows are unchanged keeps its folder byte for byte (its rows' term ids are the layout's, which
   only grows: a new term gets the next id); the added rows fill the last shard up to the layout's
   ``capacity`` and then new shards of ``capacity`` rows. The shared part (per-term statistics, the
   layout -> index term map) is rewritten when it changed.

``skillsight update`` runs this when the index has shard folders (``IDX.shards``, ``skillsight split``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.cluster.drift import DirectionSums, current_sums, read_sums, write_sums
from skillsight_fast.cluster.layout import (
    _replace_folder,
    _unchanged,
    check_scan,
    global_stats,
    index_digest,
    read_folder,
    read_layout,
    refresh_layout,
    shard_folder_name,
    shared_arrays,
    vocab_arrays,
    write_layout,
    write_shard,
)
from skillsight_fast.engine.columns import record_fields
from skillsight_fast.errors import IndexFormatError

#: The rule (declared in experiments/shard_statistics_drift.py before it was measured): the kept
#: background basis holds while sin θ_max (the largest principal angle between it and the basis the
#: updated library would have) is at most this.
MAX_BASIS_DRIFT = 0.2


def basis_drift(kept: np.ndarray, fresh: np.ndarray) -> float:
    """sin of the largest principal angle between the row spaces of ``kept`` (r, d) and the first r rows
    of ``fresh`` (both orthonormal rows): 0 for the same subspace, 1 when ``fresh`` has fewer rows
    (a direction of the kept basis the fresh one lacks). 0 for an empty ``kept`` (no background removed:
    nothing is frozen in the rows)."""
    kept = np.asarray(kept, np.float64)
    r = kept.shape[0]
    if r == 0:
        return 0.0
    fresh = np.asarray(fresh, np.float64)
    if fresh.shape[0] < r:
        return 1.0
    cos = np.linalg.svd(kept @ fresh[:r].T, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - float(np.min(cos)) ** 2)))


def background_directions(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """The token directions g_t and the corpus mean a build of ``index``'s library estimates its
    background from (its raw rows, its already updated lexical statistics; METHOD.md 4-5)."""
    from skillsight_fast import kernels
    from skillsight_fast.engine.background import index_background_terms

    lex = index.lexical.lexicon
    docs = np.asarray(index.dense.embeddings, np.float32)
    g = kernels.token_directions(index_background_terms(index), lex.post_indptr, lex.post_docs, docs)
    mean = docs.astype(np.float64).mean(axis=0) if docs.shape[0] else np.zeros(docs.shape[1])
    return g, mean


def fresh_basis(index: Any, directions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The background basis a build of ``index``'s library would estimate now (float32 (r, d)), as
    :func:`skillsight_fast.engine.background.estimate_background` does (``directions``: the
    :func:`background_directions` already computed)."""
    from skillsight_fast.engine.background import background_from_directions

    cfg = index.config
    g, mean = directions if directions is not None else background_directions(index)
    return background_from_directions(g, mean, max_rank=cfg.background.max_rank, rank=cfg.background.rank).basis


def _centroids(index: Any) -> np.ndarray | None:
    """The IVF scan's cell centroids (None for another scan)."""
    if index.scan.kind != "ivf":
        return None
    return np.asarray(index.scan.ivf.quantizer.reconstruct_n(0, index.scan.nlist), np.float32)


def layout_order(old_ids: Sequence[str], skills: Sequence[Any]) -> list[Any]:
    """``skills`` in the layout's row order: the skills the index has, at their rows (removed ones
    dropped), then the new ones in the library's order."""
    by_id = {s.id: s for s in skills}
    have = set(old_ids)
    return [by_id[i] for i in old_ids if i in by_id] + [s for s in skills if s.id not in have]


def _term_map(shared: dict[str, np.ndarray], vocab: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The layout's terms extended by the index's new ones: ``(to_layout (V_index,), head_term
    (V_layout,), blob, offsets)``."""
    from skillsight_fast.engine.columns import StringColumn, encode_strings

    old = StringColumn(np.asarray(shared["vocab_blob"]), np.asarray(shared["vocab_offsets"]), "layout terms")
    at = {t: i for i, t in enumerate(old)}
    terms = list(vocab)
    to_layout = np.empty(len(terms), np.int32)
    added = []
    for h, t in enumerate(terms):
        i = at.get(t)
        if i is None:
            i = len(at) + len(added)
            added.append(t)
        to_layout[h] = i
    n = len(at) + len(added)
    head_term = np.full(n, -1, np.int32)
    head_term[to_layout] = np.arange(len(terms), dtype=np.int32)
    if added:
        blob, offsets = encode_strings(added)
        base = np.asarray(shared["vocab_offsets"], np.int64)
        offsets = np.concatenate([base, base[-1] + offsets[1:]])
        blob = np.concatenate([np.asarray(shared["vocab_blob"], np.uint8), blob])
    else:
        blob, offsets = np.asarray(shared["vocab_blob"], np.uint8), np.asarray(shared["vocab_offsets"], np.int64)
    return to_layout, head_term, blob, offsets


def update_layout(directory: str | Path, layout: str | Path, skills: Sequence[Any], *, encoder: Any = None,
                  max_drift: float = MAX_BASIS_DRIFT, dry_run: bool = False,
                  wrap_encoder: Callable[[Any], Any] | None = None,
                  roots: Sequence[str] | None = None) -> dict[str, Any]:
    """Update the index in ``directory`` and its shard folders in ``layout`` to ``skills`` (the whole
    library as it is now), rewriting only the shards whose rows changed while the basis holds (see the
    module docstring).

    Returns a report: the update's (:class:`~skillsight_fast.engine.update.UpdateReport`), ``drift``
    (:func:`basis_drift`), ``directions`` (how the rule's token directions were had: ``"moved"``, the sums
    kept in the layout moved by this update's rows, or ``"summed"`` over the postings;
    :mod:`skillsight_fast.cluster.drift`), ``recomputed`` (the rule moved the basis), ``rewritten`` and
    ``kept`` shards, ``appended`` shards, ``shared_changed`` and the seconds of each phase.

    Raises
    ------
    IndexFormatError
        No layout, or a layout behind the index (split again), or a scan shard folders do not hold.
    """
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.engine.update import update_index

    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    clock = [t0]

    def phase(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(now - clock[0], 3)
        clock[0] = now

    directory, out = Path(directory), Path(layout)
    plan = read_layout(out)
    if plan.get("index") != index_digest(directory):
        raise IndexFormatError(f"{out}: the shard folders are not of the index in {directory} as it is now "
                               f"(write them anew: skillsight split -i {directory} {len(plan['shards'])})")
    old = SkillIndex.load(directory, mmap=True)
    check_scan(old)
    old_cells = _centroids(old)
    old_ids = list(old.ids)
    old_hash = record_fields(old.skills, range(len(old_ids)), "sha256")
    ordered = layout_order(old_ids, skills)
    new_hash = {s.id: s.sha256 for s in ordered}
    del old
    phase("order")
    report = update_index(directory, ordered, encoder=encoder, dry_run=dry_run, wrap_encoder=wrap_encoder,
                          roots=roots, keep_background=True)
    phase("update")
    # per old row: kept as it was (same skill, same text), else removed or changed
    clean = np.fromiter((i in new_hash and new_hash[i] == h for i, h in zip(old_ids, old_hash)), bool, len(old_ids))
    removed = np.fromiter((i not in new_hash for i in old_ids), bool, len(old_ids))
    n_added = len(ordered) - int((~removed).sum())
    entries = plan["shards"]
    capacity = int(plan.get("capacity") or max(1, max(e["stop"] - e["start"] for e in entries)))
    sizes, dirty = [], []
    for e in entries:
        a, b = int(e["start"]), int(e["stop"])
        sizes.append(int((~removed[a:b]).sum()))
        dirty.append(not bool(clean[a:b].all()))
    if old_cells is not None and not dry_run:  # IVF: retrained cells regroup every shard's rows
        new_cells = _centroids(SkillIndex.load(directory, mmap=True))
        if new_cells is None or not np.array_equal(old_cells, new_cells):
            dirty = [True] * len(dirty)
    room = max(0, capacity - sizes[-1]) if entries else 0
    into_last = min(n_added, room)
    if into_last:
        sizes[-1] += into_last
        dirty[-1] = True
    rest = n_added - into_last
    appended = 0
    while rest > 0:
        take = min(capacity, rest)
        sizes.append(take)
        dirty.append(True)
        rest -= take
        appended += 1
    result: dict[str, Any] = {"update": report.to_dict(), "rewritten": [i for i, d in enumerate(dirty) if d],
                              "kept": [i for i, d in enumerate(dirty) if not d], "appended": appended,
                              "drift": None, "directions": None, "recomputed": False, "shared_changed": None,
                              "phases": phases, "max_drift": max_drift, "layout": str(out)}
    # nothing to do only when no row's text changed (the update's report counts a text that became another
    # row's as unchanged, the layout must not)
    nothing = not (report.added or report.changed or report.removed) and bool(clean.all()) and n_added == 0
    if dry_run or nothing:
        if nothing and not dry_run:
            if plan.get("index") != index_digest(directory):  # a moved file: the index folder was rewritten
                kept_sums = read_sums(out, plan.get("index"))
                write_layout(out, {**plan, "index": index_digest(directory)})
                if kept_sums is not None:  # the same rows: the kept sums are this version's too
                    write_sums(out, kept_sums, index_digest(directory))
            result["rewritten"], result["kept"], result["appended"] = [], list(range(len(entries))), 0
        result["seconds"] = round(time.perf_counter() - t0, 3)
        return result
    new = SkillIndex.load(directory, mmap=True)
    _, shared_now = read_folder(out / plan["shared"])
    to_layout, head_term, blob, offsets = _term_map(shared_now, new.lexical.lexicon.vocab)
    # the token directions: the kept sums moved by this update's rows (removed or changed old rows out,
    # added or changed new rows in), else summed over the postings (skillsight_fast.cluster.drift)
    fresh_rows = np.concatenate([~clean[~removed], np.ones(n_added, bool)])
    sums, result["directions"] = current_sums(new, out, plan, ~clean, fresh_rows, to_layout, head_term.shape[0])
    phase("directions")
    drift = basis_drift(new.dense.basis, fresh_basis(new, sums.directions()))
    result["drift"] = round(drift, 6)
    phase("drift")
    if drift > max_drift:  # the rule: recompute the statistics whole; every shard's rows move
        index_terms = head_term[sums.terms]  # the background terms as the updated index's term ids
        vocab = vocab_arrays(new.lexical.lexicon.vocab)
        del new
        update_index(directory, ordered, encoder=encoder, roots=roots, recompute=True)
        phase("recompute")
        rewritten, shared_changed = refresh_layout(directory, out)
        result.update(recomputed=True, rewritten=rewritten, shared_changed=shared_changed, appended=0,
                      kept=[i for i in range(len(read_layout(out)["shards"])) if i not in rewritten])
        # the layout's terms are now the recomputed index's (refresh_layout wrote them to the shared part):
        # the sums are its own when that vocabulary is the one they were taken with
        _, shared_now = read_folder(out / plan["shared"], verify=False)
        if (np.array_equal(shared_now["vocab_blob"], vocab[0])
                and np.array_equal(shared_now["vocab_offsets"], vocab[1])):
            write_sums(out, DirectionSums(index_terms.astype(np.int32), sums.sums, sums.counts, sums.total,
                                          sums.rows), index_digest(directory))
        phase("shards")
        result["seconds"] = round(time.perf_counter() - t0, 3)
        return result
    library = plan["library"]
    new_entries, start = [], 0
    for s, (n, d) in enumerate(zip(sizes, dirty)):
        name = entries[s]["folder"] if s < len(entries) else shard_folder_name(s)
        if d:
            write_shard(out / name, new, start, start + n, library=library, to_layout=to_layout)
        new_entries.append({"folder": name, "start": start, "stop": start + n})
        start += n
    if start != len(new):
        raise IndexFormatError(f"{out}: the shards hold {start} rows, the updated index {len(new)}")
    arrays, smeta = shared_arrays(global_stats(new), head_term, blob, offsets)
    smeta["library"] = library
    shared_changed = not _unchanged(out / plan["shared"], arrays, smeta)
    if shared_changed:
        _replace_folder(out / plan["shared"], arrays, smeta)
    write_layout(out, {**plan, "n_skills": len(new), "shards": new_entries, "capacity": capacity,
                       "index": index_digest(directory)})
    write_sums(out, sums, index_digest(directory))
    result["shared_changed"] = shared_changed
    phase("shards")
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result
