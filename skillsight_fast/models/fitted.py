"""The fitted query table: a table-lookup task encoder fitted at index build to the transformer.

The contextual tier (:mod:`skillsight_fast.models.contextual`) encodes a task as the normalised mean of
the transformer's token states averaged over the library. Here that table is the prior and starting
point of a fit: a table ``E`` (one row per token the library uses) and per-token pooling weights
``w = exp(a)`` are fitted so that the lookup-and-pool ``q = normalise(sum_t w_t E_t)`` of a text matches
the transformer's vector ``t`` of it **in the space the scores are computed in** (background removed,
``P = I - B B^T``), on pieces of the library's own texts cut to task size (:func:`training_pieces`).
No labels, no queries; NumPy and Numba (:mod:`skillsight_fast.kernels.tablefit`), no torch.

Objectives (``FitConfig.objective``), each plus the prior ``lam/n * sum_v |E_v - E0_v|^2 + mu * |a|^2``:

- ``mse``: ``|P (q - t)|^2``, the regression of the scored part of the vector (direction and length:
  the fusion with the lexical side reads the dense score's scale);
- ``ctr``: cross-entropy of the piece's own skill in a softmax of ``q . D_perp / tau`` over candidates
  (the teacher's top documents of the piece plus the skill), as LightRetriever trains its lookup;
- ``kl``: KL divergence from the teacher's softmax over the same candidates to the student's (ranking
  distillation);
- ``mse+kl``: both.

Since ``q`` is normalised, the weights fold into the rows (``w_v E_v``): the result is a table of the
contextual tier's shape and is searched by :class:`~skillsight_fast.models.contextual.ContextualEncoder`
unchanged (its mean over the rows has the same direction as the weighted sum).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError

logger = logging.getLogger(__name__)

OBJECTIVES = ("mse", "ctr", "kl", "mse+kl")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = " \t#*>-`|_="
#: Longest training piece, characters (task-sized).
PIECE_CHARS = 400
#: Body windows (two sentences each) per skill.
WINDOWS = 3


def _sentences(text: str) -> list[str]:
    out = []
    for part in _SENTENCE_END.split(text):
        part = part.strip(_MARKUP)
        if len(part.split()) >= 4:
            out.append(part[:PIECE_CHARS])
    return out


def task_template(name: str, description: str) -> str:
    """One task-like text from a skill's name and description: ``How do I <first sentence>? (<name>)``.

    The first sentence of the description, its first letter lower-cased, its final stop removed.
    "" when the description is empty.
    """
    first = _sentences(description)
    if not first:
        return ""
    s = first[0].rstrip(".!? ")
    s = s[:1].lower() + s[1:]
    words = re.sub(r"[-_/]+", " ", name).strip()
    return f"How do I {s}? ({words})" if words else f"How do I {s}?"


def training_pieces(skills: Sequence[Any]) -> tuple[list[str], np.ndarray]:
    """Task-sized pieces of the skills' own texts, and the row of the skill each comes from.

    Per skill, in this order: the description; ``when_to_use``, the first two ``examples``, the
    ``triggers`` (``; ``-joined); up to :data:`WINDOWS` two-sentence windows of the body, evenly spread;
    and :func:`task_template`. Empty pieces and pieces seen before (in any skill) are dropped. The
    name + description and the whole text are not here: their vectors are the index's own.

    Returns
    -------
    texts : list of str
    owner : int64 (len(texts),)
    """
    texts: list[str] = []
    owner: list[int] = []
    seen: set[str] = set()
    for row, s in enumerate(skills):
        cands = [s.description, getattr(s, "when_to_use", ""), *list(getattr(s, "examples", ()))[:2],
                 "; ".join(getattr(s, "triggers", ()))]
        sents = _sentences(getattr(s, "body", "") or "")
        wins = [" ".join(sents[i:i + 2]) for i in range(0, len(sents), 2)]
        if wins:
            pick = np.unique(np.linspace(0, len(wins) - 1, min(WINDOWS, len(wins))).round().astype(int))
            cands.extend(wins[i] for i in pick)
        cands.append(task_template(s.name, s.description))
        for c in cands:
            c = (c or "").strip()[:PIECE_CHARS]
            if c and c not in seen:
                seen.add(c)
                texts.append(c)
                owner.append(row)
    return texts, np.asarray(owner, np.int64)


@dataclass(frozen=True)
class Bags:
    """Texts as bags of table slots, CSR: text ``i`` holds ``slots[indptr[i]:indptr[i+1]]`` with
    multiplicities ``counts`` (float32)."""

    indptr: np.ndarray
    slots: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def dense(self, m: int) -> np.ndarray:
        """float32 (n, m) count matrix (tests, small problems)."""
        out = np.zeros((len(self), m), np.float32)
        for i in range(len(self)):
            lo, hi = self.indptr[i], self.indptr[i + 1]
            out[i, self.slots[lo:hi]] += self.counts[lo:hi]
        return out


def bags_of_slots(token_rows: Sequence[np.ndarray], slot_of: np.ndarray) -> Bags:
    """:class:`Bags` of token id rows; ids whose ``slot_of`` is -1 (not in the table) are dropped."""
    indptr = [0]
    slots: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for ids in token_rows:
        s = slot_of[np.asarray(ids, np.int64)]
        s = s[s >= 0]
        u, c = np.unique(s, return_counts=True)
        slots.append(u)
        counts.append(c)
        indptr.append(indptr[-1] + u.size)
    def cat(xs: list[np.ndarray], dt: type) -> np.ndarray:
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)

    return Bags(np.asarray(indptr, np.int64), cat(slots, np.int64), cat(counts, np.float32))


@dataclass(frozen=True)
class FitConfig:
    """The fit's constants (the same for every library; docs/ENCODERS.md, experiments/fitted_query_table.py).

    Attributes
    ----------
    objective : str
        One of :data:`OBJECTIVES`.
    learn_weights : bool
        Fit the per-token pooling weights too (else they stay 1: a plain mean).
    steps, batch : int
        Adam steps over mini-batches of at most ``batch`` texts.
    epochs : float or None
        Scale the batch with the library: ``clip(ceil(epochs * n_texts / steps), min_batch, batch)``, so
        the fit sees each text about ``epochs`` times and its cost grows with the library (a fixed
        ``steps * batch`` made small libraries pay a large library's fit). None: always ``batch``.
    min_batch : int
        The smallest scaled batch.
    lr, lr_weights : float
        Adam step sizes of the table (rows scaled to median norm 1) and of the log-weights.
    prior : float
        ``lam``: the pull toward the prior rows, in texts (``lam / n_texts * |E - E0|^2``).
    weight_prior : float
        ``mu``: the pull of the log-weights toward 0.
    temperature : float
        Softmax temperature of ``ctr`` / ``kl`` over the scored document vectors.
    candidates : int
        Teacher's top documents per piece in the softmax (plus the piece's skill).
    seed : int
    """

    objective: str = "mse"
    learn_weights: bool = True
    steps: int = 300
    batch: int = 1024
    epochs: float | None = None
    min_batch: int = 64
    lr: float = 2e-3
    lr_weights: float = 1e-2
    prior: float = 1.0
    weight_prior: float = 1e-4
    temperature: float = 0.05
    candidates: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")

    def batch_for(self, n: int) -> int:
        """The mini-batch size for ``n`` training texts (at most ``n``)."""
        b = self.batch
        if self.epochs is not None:
            b = int(min(max(np.ceil(self.epochs * n / max(self.steps, 1)), self.min_batch), self.batch))
        return max(1, min(b, n))


@dataclass
class FitResult:
    """A fitted table: ``table`` (m, d) float32 with the weights folded in, the weights (m,), and the
    data loss per step (the mini-batch's, before the step; without the prior terms)."""

    table: np.ndarray
    weights: np.ndarray
    history: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _project(x: np.ndarray, basis: np.ndarray) -> np.ndarray:
    return x - (x @ basis.T) @ basis if basis.shape[0] else x


def teacher_candidates(targets: np.ndarray, docs_perp: np.ndarray, basis: np.ndarray,
                       owner: np.ndarray | None, k: int, chunk: int = 4096) -> np.ndarray:
    """int64 (n, k + 1): per text, its skill (column 0; the teacher's best when ``owner`` is None or -1)
    then the teacher's best ``k`` other documents by ``P t . D_perp``."""
    n, n_docs = targets.shape[0], docs_perp.shape[0]
    k = min(k, max(n_docs - 1, 0))
    out = np.zeros((n, k + 1), np.int64)
    for lo in range(0, n, chunk):
        s = _project(targets[lo:lo + chunk], basis) @ docs_perp.T
        rows = np.arange(s.shape[0])
        own = owner[lo:lo + chunk] if owner is not None else np.full(s.shape[0], -1)
        own = np.where(own >= 0, own, np.argmax(s, axis=1))
        out[lo:lo + chunk, 0] = own
        s[rows, own] = -np.inf
        if k:
            top = np.argpartition(-s, k - 1, axis=1)[:, :k]
            out[lo:lo + chunk, 1:] = top
    return out


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def batch_loss(u: np.ndarray, targets: np.ndarray, basis: np.ndarray, config: FitConfig,
               cand_docs: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Mean loss of a batch of pooled vectors ``u`` (b, d) and its gradient with respect to ``u``.

    ``cand_docs`` (b, k + 1, d): the scored document vectors of each text's candidates, its skill first
    (``ctr`` / ``kl``).
    """
    b = u.shape[0]
    norm = np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    q = u / norm
    loss = 0.0
    g = np.zeros_like(q)
    obj = config.objective
    if obj in ("mse", "mse+kl"):
        diff = _project(q - targets, basis)
        loss += float(np.sum(diff * diff)) / b
        g += 2.0 * diff / b
    if obj in ("ctr", "kl", "mse+kl"):
        assert cand_docs is not None
        inv_t = 1.0 / config.temperature
        p_s = _softmax(np.einsum("bd,bkd->bk", q, cand_docs) * inv_t)
        if obj == "ctr":
            p_t = np.zeros_like(p_s)
            p_t[:, 0] = 1.0
        else:
            p_t = _softmax(np.einsum("bd,bkd->bk", _project(targets, basis), cand_docs) * inv_t)
        loss += float(np.sum(p_t * (np.log(np.maximum(p_t, 1e-30)) - np.log(np.maximum(p_s, 1e-30))))) / b
        g += np.einsum("bk,bkd->bd", p_s - p_t, cand_docs) * (inv_t / b)
    # through the normalisation q = u / |u|
    g_u = (g - np.sum(g * q, axis=1, keepdims=True) * q) / norm
    return loss, g_u.astype(np.float32)


def fit_query_table(bags: Bags, targets: np.ndarray, prior: np.ndarray, basis: np.ndarray, *,
                    docs_perp: np.ndarray | None = None, owner: np.ndarray | None = None,
                    config: FitConfig = FitConfig()) -> FitResult:
    """Fit the table and pooling weights (module docstring).

    Parameters
    ----------
    bags : Bags
        The training texts as bags of table slots (:func:`bags_of_slots`).
    targets : float (n, d)
        The transformer's unit vector of each text (the teacher).
    prior : float (m, d)
        The starting rows and prior (the contextual table).
    basis : float (r, d)
        The index's background basis (orthonormal rows; (0, d) for none).
    docs_perp : float (N, d), optional
        The index's scored document matrix (``ctr`` / ``kl``).
    owner : int (n,), optional
        The document each text comes from, -1 for none (``ctr`` / ``kl``).
    config : FitConfig

    Returns
    -------
    FitResult
    """
    from skillsight_fast.kernels.tablefit import adam_rows, pool_rows, pool_rows_backward_into

    t0 = time.perf_counter()
    targets = np.ascontiguousarray(targets, np.float32)
    prior = np.asarray(prior, np.float32)
    basis = np.ascontiguousarray(basis, np.float32).reshape(-1, prior.shape[1])
    n, m = len(bags), prior.shape[0]
    if targets.shape != (n, prior.shape[1]):
        raise ModelError(f"fit: {targets.shape} targets for {n} texts of dimension {prior.shape[1]}")
    if bags.slots.size and (bags.slots.min() < 0 or bags.slots.max() >= m):
        raise ModelError(f"fit: slots outside the table's {m} rows")
    needs_docs = config.objective != "mse"
    if needs_docs and docs_perp is None:
        raise ModelError(f"the {config.objective!r} objective needs the scored document matrix")
    norms = np.linalg.norm(prior, axis=1)
    scale = float(np.median(norms[norms > 0])) if np.any(norms > 0) else 1.0  # zero rows: a new feature
    e0 = np.ascontiguousarray(prior / scale, np.float32)
    table = e0.copy()
    logw = np.zeros(m, np.float32)
    cands = cand_vecs = None
    if needs_docs:
        docs = np.ascontiguousarray(docs_perp, np.float32)
        cands = teacher_candidates(targets, docs, basis, owner, config.candidates)
        cand_vecs = docs
    rng = np.random.default_rng(config.seed)
    lam = config.prior / max(n, 1)
    m1, v1 = np.zeros_like(table), np.zeros_like(table)
    m2, v2 = np.zeros_like(logw), np.zeros_like(logw)
    g_table, g_logw = np.zeros_like(table), np.zeros_like(logw)
    mark = np.zeros(m, np.bool_)
    b1, b2, eps = 0.9, 0.999, 1e-8
    history: list[float] = []
    batch = config.batch_for(n)
    for step in range(1, config.steps + 1):
        rows = rng.choice(n, size=batch, replace=False) if batch < n else np.arange(n)
        w = np.exp(logw)
        u = pool_rows(rows, bags.indptr, bags.slots, bags.counts, w, table)
        cd = cand_vecs[cands[rows]] if cands is not None else None
        loss, g_u = batch_loss(u, targets[rows], basis, config, cd)
        history.append(loss)
        g_logw[:] = 0.0
        touched = pool_rows_backward_into(rows, bags.indptr, bags.slots, bags.counts, w, table, g_u, g_table,
                                          g_logw, mark)
        # lazy Adam: the rows of this batch's tokens (with their prior pull); a row no batch touches
        # keeps its value, and a row only ever moved by data is pulled back when next touched
        adam_rows(touched, table, e0, g_table, m1, v1, mark, lam, config.lr, b1, b2,
                  1 - b1 ** step, 1 - b2 ** step, eps)
        if config.learn_weights:
            g_a = g_logw + 2.0 * config.weight_prior * logw
            m2 = b1 * m2 + (1 - b1) * g_a
            v2 = b2 * v2 + (1 - b2) * g_a * g_a
            logw -= config.lr_weights * (m2 / (1 - b1 ** step)) / (np.sqrt(v2 / (1 - b2 ** step)) + eps)
    w = np.exp(logw)
    out = np.ascontiguousarray(table * w[:, None] * scale, np.float32)
    return FitResult(out, w.astype(np.float32), history, time.perf_counter() - t0)


def encode_bags(bags: Bags, table: np.ndarray) -> np.ndarray:
    """Unit vectors of the bags with a (weights folded in) table: what the encoder gives, float32 (n, d)."""
    from skillsight_fast.kernels.tablefit import pool_rows

    u = pool_rows(np.arange(len(bags)), bags.indptr, bags.slots, bags.counts,
                  np.ones(table.shape[0], np.float32), np.ascontiguousarray(table, np.float32))
    return u / np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)


def library_training_set(skills: Sequence[Any], texts: Sequence[str], doc_emb: np.ndarray,
                         namedesc_texts: Sequence[str], namedesc_emb: np.ndarray | None, task_encoder: Any
                         ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The training texts of a library, their teacher vectors and the row of the skill of each.

    The pieces (:func:`training_pieces`) are encoded by ``task_encoder`` (the index's task encoder:
    the int8 graph by default); the name + description texts and the whole texts reuse the index's
    own vectors (``namedesc_emb`` of ``namedesc_texts``, ``doc_emb`` of ``texts``), so they cost no pass.
    """
    pieces, owner = training_pieces(skills)
    if not pieces:
        parts = [np.zeros((0, doc_emb.shape[1]), np.float32)]
    elif getattr(task_encoder, "bar", None) is not None:  # a progress wrapper draws its own bar
        parts = [task_encoder.encode(pieces)]
    else:  # never silent: a large library's pieces take the transformer minutes
        from skillsight_fast.progress import still

        with still(f"encoding {len(pieces)} training pieces for the query table"):
            parts = [task_encoder.encode(pieces)]
    all_texts = list(pieces)
    owners = [owner]
    rows = np.arange(len(texts), dtype=np.int64)
    if namedesc_emb is not None:
        all_texts += list(namedesc_texts)
        parts.append(np.asarray(namedesc_emb, np.float32))
        owners.append(rows)
    all_texts += list(texts)
    parts.append(np.asarray(doc_emb, np.float32))
    owners.append(rows)
    return all_texts, np.vstack(parts).astype(np.float32), np.concatenate(owners)


#: The fit an index build runs (the arm experiments/fitted_query_table.py adopted), its batch scaled with
#: the library (experiments/general_fitted_table.py: same accuracy, the cost grows with the library).
DEFAULT_FIT = FitConfig(objective="mse+kl", epochs=14.0)
#: A library of fewer skills searches with the shipped general table as it is, unfitted
#: (:mod:`skillsight_fast.models.general`; experiments/general_fitted_table.py: on the 199-tool metatool
#: library it loses 5.3 R@10 points against the per-library fit's 15.4; on the 1,437-function bfcl library
#: it loses 3.0 where the fit gains 0.3). A round number below the smallest fit set, not tuned.
GENERAL_DIRECT_BELOW = 500


def direct_general_table(n_skills: int, checksum: str | None,
                         dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The shipped general table when a library of ``n_skills`` is small enough to use it directly
    (:data:`GENERAL_DIRECT_BELOW`) and it was fitted for the model (``checksum``, ``dim``); else None."""
    if n_skills >= GENERAL_DIRECT_BELOW:
        return None
    from skillsight_fast.models.general import shipped_general_table

    return shipped_general_table(checksum, dim)


def fit_library_table(token_ids: np.ndarray, prior: np.ndarray, tokenize: Any, texts: Sequence[str],
                      targets: np.ndarray, owner: np.ndarray, basis: np.ndarray, docs_perp: np.ndarray,
                      config: FitConfig = DEFAULT_FIT, drop: Sequence[int] = (),
                      general: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, FitResult]:
    """Fit a library's query table from its contextual table ``(token_ids, prior)``.

    ``tokenize`` maps texts to token id rows as the transformer sees them (``[CLS] ... [SEP]``, the
    encoder's ``tokenize``); ids in ``drop`` (``[UNK]``: the task encoder skips it) are left out of the
    bags. With ``general`` (a general table, :mod:`skillsight_fast.models.general`), the fit starts
    from and is pulled toward :func:`~skillsight_fast.models.general.merge_prior` of the two: every
    general token with its general row, the library's other tokens with their (rescaled) contextual
    rows. Returns the token ids (the prior's) and the :class:`FitResult`, whose ``table`` the
    contextual tier's encoder searches with.
    """
    if general is not None:
        from skillsight_fast.models.general import merge_prior

        token_ids, prior = merge_prior(token_ids, prior, general[0], general[1])
    token_ids = np.asarray(token_ids, np.int64)
    n_vocab = int(token_ids.max()) + 1 if token_ids.size else 0
    rows = tokenize(list(texts))
    n_vocab = max([n_vocab, *(int(r.max()) + 1 for r in rows if len(r))])
    slot_of = np.full(n_vocab, -1, np.int64)
    slot_of[token_ids] = np.arange(token_ids.size)
    for t in drop:
        if 0 <= t < n_vocab:
            slot_of[t] = -1
    bags = bags_of_slots(rows, slot_of)
    res = fit_query_table(bags, targets, prior, basis, docs_perp=docs_perp, owner=owner, config=config)
    logger.info("fitted query table: %d texts, %d rows, %.1f s", len(bags), token_ids.size, res.seconds)
    return token_ids.astype(np.int32), res
