"""One shard of a build: a chunk of skills analysed, encoded and summarised (plain arrays).

:func:`encode_shard` is the unit of work that a streaming build runs chunk after chunk and a Ray
build runs on its workers; :class:`Shard` is what it hands back to the process that writes the
index (:class:`~skillsight_fast.indexing.stream.StreamBuilder`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.build import checked_embeddings
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.state import SkillMeta
from skillsight_fast.errors import EmbeddingError
from skillsight_fast.indexing.stats import CorpusStats
from skillsight_fast.library.skills import Skill, namedesc_text
from skillsight_fast.types import Encoder


@dataclass
class Shard:
    """A chunk of skills after analysis and encoding.

    Attributes
    ----------
    metas : list of SkillMeta
        What the index keeps of each skill, in row order.
    bodies : list of str
        Each skill's Markdown body (``texts.jsonl``).
    flags : list of list of str
        The prompt-injection scan's reasons per skill ([] = clean).
    vocab : list of str
        The shard's sorted terms; ``doc_terms`` are positions in it.
    doc_indptr, doc_terms, doc_tf, doc_len : int64 (n + 1,), int32, uint16, int32 (n,)
        The shard's forward lexical index (sorted term ids per document), term frequencies and
        document lengths, as :meth:`Lexicon.build <skillsight_fast.engine.lexicon.Lexicon.build>` makes them.
    embeddings : float32 (n, d)
    stats : CorpusStats
        Round-1 statistics over ``vocab``.
    namedesc : float32 (n, d) or None
        Embeddings of each skill's name + description, when the config's document vector is
        ``text+namedesc`` (``IndexConfig.settled(...).encoder.document_vector``).
    cues : list of (triggers, examples)
        The retrieval fields :class:`SkillMeta` does not keep, so the process that writes the index can
        give the fitted tier's fit each skill as it was read (:func:`skill_rows`).
    token_sums, token_counts : float64 (V, d), int64 (V,) or None
        Sums of the transformer's token states over the shard's texts, per word piece, and how many
        states each sum holds (:func:`skillsight_fast.models.contextual.encode_with_token_sums`): when the
        build settles into a table tier (``auto`` with an encoder that gives token states). They add up
        over shards to the whole library's, as the contextual table needs.
    """

    metas: list[SkillMeta]
    bodies: list[str]
    flags: list[list[str]]
    vocab: list[str]
    doc_indptr: np.ndarray
    doc_terms: np.ndarray
    doc_tf: np.ndarray
    doc_len: np.ndarray
    embeddings: np.ndarray
    stats: CorpusStats
    namedesc: np.ndarray | None = None
    cues: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    token_sums: np.ndarray | None = None
    token_counts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.metas)

    def rows(self) -> ShardRows:
        """What a shard folder needs of these rows (a Ray build's shard writer)."""
        return ShardRows(self.embeddings, self.namedesc, self.vocab, self.doc_indptr, self.doc_terms,
                         self.doc_tf, self.doc_len)


@dataclass
class ShardRows:
    """The part of a :class:`Shard` a shard folder is written from: its rows' vectors and their
    document -> terms lists over the chunk's own sorted vocabulary (no texts, no statistics).

    A Ray build keeps these in Ray's object store until the index's library-wide statistics are known,
    then the shard writers (:mod:`skillsight_fast.cluster.build`) read them from there.
    """

    embeddings: np.ndarray
    namedesc: np.ndarray | None
    vocab: list[str]
    doc_indptr: np.ndarray
    doc_terms: np.ndarray
    doc_tf: np.ndarray
    doc_len: np.ndarray

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])


def encode_shard(skills: Sequence[Skill], encoder: Encoder, config: IndexConfig) -> Shard:
    """Analyse, encode and summarise a chunk of skills.

    Parameters
    ----------
    skills : sequence of Skill
    encoder : Encoder
    config : IndexConfig
        Its analyzer bounds are used.

    Raises
    ------
    EmbeddingError
        The encoder returned the wrong shape, or NaN / infinite vectors.
    """
    from skillsight_fast.library.screen import screen_skill

    texts = [s.text for s in skills]
    lex = Lexicon.build(texts, config.analyzer.min_token_len, config.analyzer.max_token_len)
    sums = counts = None
    if wants_token_sums(config, encoder):  # the table tier's token states, from the same pass
        from skillsight_fast.models.contextual import encode_with_token_sums

        emb, sums, counts = encode_with_token_sums(encoder, texts)
    else:
        emb = encoder.encode(texts)
    emb = checked_embeddings(emb, len(texts))
    assert lex.doc_tf is not None and lex.doc_len is not None
    namedesc = None
    if config.settled(can_fit=False).encoder.document_vector == "text+namedesc":
        texts = [namedesc_text(s.name, s.description) for s in skills]
        namedesc = np.ascontiguousarray(encoder.encode(texts),
                                        dtype=np.float32)
        if namedesc.shape != emb.shape or not np.isfinite(namedesc).all():
            raise EmbeddingError(f"name + description embeddings {namedesc.shape} are not {emb.shape} "
                                 "finite vectors")
    return Shard(
        metas=[SkillMeta.of(s) for s in skills], bodies=[s.body for s in skills],
        flags=[screen_skill(s) for s in skills], vocab=lex.vocab,
        doc_indptr=lex.doc_indptr, doc_terms=lex.doc_terms, doc_tf=lex.doc_tf, doc_len=lex.doc_len,
        embeddings=emb, stats=CorpusStats.of(lex.vocab, lex.df(), emb), namedesc=namedesc,
        cues=[(tuple(s.triggers), tuple(s.examples)) for s in skills], token_sums=sums, token_counts=counts,
    )


def wants_token_sums(config: IndexConfig, encoder: Encoder | None) -> bool:
    """Whether a build with ``config`` settles into a table tier (``contextual`` / ``fitted``) and
    ``encoder`` gives the token states that tier's table is made of: what the in-memory build decides
    (:meth:`IndexConfig.settled` with ``can_fit`` true when the encoder gives token states)."""
    from skillsight_fast.config import TABLE_TIERS
    from skillsight_fast.engine.query_encoders import gives_token_states

    return gives_token_states(encoder) and config.settled(can_fit=True).encoder.query_encoder in TABLE_TIERS


def skill_rows(metas: list[SkillMeta], bodies: Sequence[str],
               cues: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> SkillRows:
    """The skills of a build as :class:`Skill` values again, made one at a time (:class:`SkillRows`)."""
    return SkillRows(metas, bodies, cues)


class SkillRows(Sequence[Skill]):
    """A read-only sequence of the :class:`Skill` of each row, rebuilt on access from what the build
    keeps (its :class:`SkillMeta`, its body, its triggers and examples): the skills the fitted tier's fit
    and the index's own checks read, without holding every skill in memory at once."""

    def __init__(self, metas: list[SkillMeta], bodies: Sequence[str],
                 cues: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
        if not len(metas) == len(bodies) == len(cues):
            raise ValueError(f"{len(metas)} skills, {len(bodies)} bodies and {len(cues)} cue rows")
        self._metas, self._bodies, self._cues = metas, bodies, cues

    def __len__(self) -> int:
        return len(self._metas)

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        m = self._metas[i]
        triggers, examples = self._cues[i]
        return Skill(m.id, m.name, m.description, self._bodies[i], m.path, m.tags, m.when_to_use,
                     triggers, examples)

    def __iter__(self):  # type: ignore[no-untyped-def]
        for m, body, (triggers, examples) in zip(self._metas, self._bodies, self._cues):
            yield Skill(m.id, m.name, m.description, body, m.path, m.tags, m.when_to_use, triggers, examples)
