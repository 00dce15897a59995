"""One shard of a build: a chunk of skills analysed, encoded and summarised (plain arrays).

:func:`encode_shard` is the unit of work that a streaming build runs chunk after chunk and a Ray
build runs on its workers; :class:`Shard` is what it hands back to the process that writes the
index (:class:`~skillsight_fast.indexing.stream.StreamBuilder`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from skillsight_fast.indexing.stats import CorpusStats
from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.engine.state import SkillMeta
from skillsight_fast.errors import EmbeddingError
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

    def __len__(self) -> int:
        return len(self.metas)


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
    emb = np.ascontiguousarray(encoder.encode(texts), dtype=np.float32)
    if emb.ndim != 2 or emb.shape[0] != len(texts):
        raise EmbeddingError(f"embeddings {emb.shape} do not match {len(texts)} skills")
    if not np.isfinite(emb).all():
        bad = int((~np.isfinite(emb).all(axis=1)).sum())
        raise EmbeddingError(f"{bad} document embeddings contain NaN or infinity")
    assert lex.doc_tf is not None and lex.doc_len is not None
    namedesc = None
    if config.settled(can_fit=False).encoder.document_vector == "text+namedesc":
        namedesc = np.ascontiguousarray(encoder.encode([namedesc_text(s.name, s.description) for s in skills]),
                                        dtype=np.float32)
        if namedesc.shape != emb.shape or not np.isfinite(namedesc).all():
            raise EmbeddingError(f"name + description embeddings {namedesc.shape} are not {emb.shape} finite vectors")
    return Shard(
        metas=[SkillMeta.of(s) for s in skills], bodies=[s.body for s in skills],
        flags=[screen_skill(s) for s in skills], vocab=lex.vocab,
        doc_indptr=lex.doc_indptr, doc_terms=lex.doc_terms, doc_tf=lex.doc_tf, doc_len=lex.doc_len,
        embeddings=emb, stats=CorpusStats.of(lex.vocab, lex.df(), emb), namedesc=namedesc,
    )
