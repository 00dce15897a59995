"""An exact fast path of BERT's WordPiece tokenization for ASCII text.

A static query encoder spends most of its time in the tokenizer: the Hugging Face ``tokenizers``
pipeline (BertNormalizer, BertPreTokenizer, WordPiece) takes about 0.5 ms for a 1,200-character
task on one core, while the table lookup and the mean take 0.05 ms. For ASCII text that pipeline
reduces to a few string operations:

- BertNormalizer (``clean_text``, ``lowercase``): drop the control characters other than tab, line
  feed and carriage return (code points 0-31 and 127), map those three to a space, lower-case.
  Accent stripping and the spacing of CJK characters do nothing to ASCII.
- BertPreTokenizer: split on white space and cut every ASCII punctuation character (all printable
  characters that are neither letters, digits nor space) out as a word of its own.
- WordPiece: greedy longest match per word; the result depends only on the word, so it is memoised
  (the first occurrence of a word asks the tokenizer's own WordPiece model).

Anything else is left to the tokenizer itself: a text with a non-ASCII character, a text that
contains the literal content of an added token (``[MASK]``...), and any tokenizer that is not this
pipeline (:meth:`FastWordPiece.from_tokenizer` returns None). ``tests/models/test_wordpiece.py`` checks
the ids equal the tokenizer's on every query and skill text of the shared datasets and on edge cases.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: ASCII words after normalisation: runs of letters and digits, or one punctuation character.
_WORD = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
_WORD_CASED = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
#: Control characters BertNormalizer removes (tab, line feed and carriage return become spaces).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: Memoised words kept at most (a server fed adversarial text must not grow without bound).
MAX_CACHED_WORDS = 200_000


class FastWordPiece:
    """Token ids of a BERT WordPiece tokenizer, computed without it for ASCII text.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer
        A tokenizer whose pipeline is BertNormalizer + BertPreTokenizer + WordPiece (use
        :meth:`from_tokenizer`, which checks it).
    lowercase : bool
        The normaliser's ``lowercase``.
    """

    def __init__(self, tokenizer: Any, lowercase: bool = True) -> None:
        self.tokenizer = tokenizer
        self.lowercase = lowercase
        self._word = _WORD if lowercase else _WORD_CASED
        self._model = tokenizer.model
        self._cache: dict[str, list[int]] = {}
        added = tokenizer.get_added_tokens_decoder().values()
        self._added = tuple(t.content for t in added if t.content)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> FastWordPiece | None:
        """The fast path for ``tokenizer``, or None when its pipeline is not BERT's WordPiece.

        Reads the pipeline's components (not the tokenizer's JSON, which costs ~50 ms to dump).
        """
        norm = getattr(tokenizer, "normalizer", None)
        pre = getattr(tokenizer, "pre_tokenizer", None)
        model = getattr(tokenizer, "model", None)
        if (type(norm).__name__ != "BertNormalizer" or type(pre).__name__ != "BertPreTokenizer"
                or type(model).__name__ != "WordPiece"
                or getattr(model, "continuing_subword_prefix", None) != "##"
                or not getattr(norm, "clean_text", False)):
            return None
        # strip_accents None follows lowercase; for ASCII text it changes nothing either way
        return cls(tokenizer, lowercase=bool(norm.lowercase))

    def covers(self, text: str) -> bool:
        """True if the fast path gives the tokenizer's ids for ``text``."""
        if not text.isascii():
            return False
        return not any(a in text for a in self._added) if self._added else True

    def _pieces(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            ids = [t.id for t in self._model.tokenize(word)]
            if len(self._cache) >= MAX_CACHED_WORDS:
                self._cache.clear()
            self._cache[word] = ids
        return ids

    def ids(self, text: str) -> list[int]:
        """Token ids of one text the fast path :meth:`covers` (no special tokens)."""
        text = _CONTROL.sub("", text)
        if self.lowercase:
            text = text.lower()
        out: list[int] = []
        cache = self._cache
        for word in self._word.findall(text):
            ids = cache.get(word)
            out.extend(self._pieces(word) if ids is None else ids)
        return out

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text: the fast path where it covers the text, the tokenizer elsewhere."""
        out: list[list[int] | None] = [self.ids(t) if self.covers(t) else None for t in texts]
        rest = [i for i, ids in enumerate(out) if ids is None]
        if rest:
            encs = self.tokenizer.encode_batch([texts[i] for i in rest], add_special_tokens=False)
            for i, enc in zip(rest, encs):
                out[i] = list(enc.ids)
        return out  # type: ignore[return-value]
