"""The ASCII fast path of WordPiece gives the tokenizer's own ids (skillsight_fast/models/wordpiece.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast.models.wordpiece import FastWordPiece

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def tokenizer():
    import tokenizers

    from skillsight_fast.config import DEFAULT_MODEL
    from skillsight_fast.models import find_model_dir

    tok = tokenizers.Tokenizer.from_file(str(find_model_dir(DEFAULT_MODEL) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def fast(tokenizer):
    fw = FastWordPiece.from_tokenizer(tokenizer)
    assert fw is not None
    return fw


def _reference(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False).ids)


def _dataset_texts() -> list[str]:
    texts: list[str] = []
    for folder in sorted(p for p in DATA.iterdir() if (p / "meta.json").is_file()):
        from skillsight_fast.lab.evaluation.datasets import load_dataset

        ds = load_dataset(folder)
        # every task, and the head of every third skill document (the texts run to 95M characters)
        texts += [q.text for q in ds.queries] + [t[:2000] for t in ds.texts[::3]]
    return texts


def test_equals_tokenizer_on_every_dataset_text(tokenizer, fast):
    texts = _dataset_texts()
    assert len(texts) > 8_000
    covered = [t for t in texts if fast.covers(t)]
    assert len(covered) > len(texts) // 2  # the fast path is the common case
    got = [fast.ids(t) for t in covered]
    want = [list(e.ids) for e in tokenizer.encode_batch(covered, add_special_tokens=False)]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{len(bad)} texts differ, first: {covered[bad[0]][:200]!r}"


EDGE = [
    "", " ", "\t\n\r", "merge two PDF files", "MERGE Two-PDF_files!!", "a" * 100, "a" * 101,
    "x" * 250 + " tail", "unaffable", "e-mail: someone@example.com (urgent)", "C++ / C# & F#",
    "ctrl\x00chars\x01here\x7f and\x0bvertical\x0ctabs\x1f", "[MASK] is special", "[mask] is not",
    "tab\tseparated\nlines\r\nwindows", "1,234.56 $ 78% ~ ^ ` | \\ { } < > = ? ; : ' \"",
    "naïve café", "日本語のテキスト", "emoji 🙂 here", "ｆｕｌｌｗｉｄｔｈ", "camelCaseWordsAndHTTPServer",
    "snake_case_name__double", "...---...", "ab12cd34 56ef", "##prefix ##", "[UNK] [CLS][SEP]",
]


@pytest.mark.parametrize("text", EDGE)
def test_edge_cases_equal_tokenizer(tokenizer, fast, text):
    assert fast.encode_ids([text])[0] == _reference(tokenizer, text)


def test_random_ascii_equals_tokenizer(tokenizer, fast):
    rng = np.random.default_rng(7)
    alphabet = np.array(list("abcXYZ019 _-.,;:!?()[]{}'\"\t\n\r\x00\x07\x7f#@$%^&*+=/\\|~`<>")
                        + ["ing", "un", "##"])
    texts = ["".join(rng.choice(alphabet, size=rng.integers(0, 80))) for _ in range(3000)]
    got = fast.encode_ids(texts)
    want = [list(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert got == want


def test_non_ascii_and_added_tokens_fall_back(fast):
    assert fast.covers("plain text")
    assert not fast.covers("café")
    assert not fast.covers("use [MASK] here")


def test_other_pipelines_get_no_fast_path(tokenizer):
    import tokenizers

    spec = json.loads(tokenizer.to_str())
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    other = tokenizers.Tokenizer.from_str(json.dumps(spec))
    assert FastWordPiece.from_tokenizer(other) is None
    spec = json.loads(tokenizer.to_str())
    spec["normalizer"]["clean_text"] = False
    assert FastWordPiece.from_tokenizer(tokenizers.Tokenizer.from_str(json.dumps(spec))) is None


def test_cased_tokenizer_keeps_case(tokenizer):
    import tokenizers

    spec = json.loads(tokenizer.to_str())
    spec["normalizer"]["lowercase"] = False
    cased = tokenizers.Tokenizer.from_str(json.dumps(spec))
    fw = FastWordPiece.from_tokenizer(cased)
    assert fw is not None and not fw.lowercase
    for text in ["Merge PDF Files", "HTTPServer and camelCase", "lower only"]:
        assert fw.ids(text) == list(cased.encode(text, add_special_tokens=False).ids)


def test_word_cache_is_bounded(tokenizer, monkeypatch):
    import skillsight_fast.models.wordpiece as wp

    monkeypatch.setattr(wp, "MAX_CACHED_WORDS", 10)
    fw = FastWordPiece.from_tokenizer(tokenizer)
    text = " ".join(f"word{i}" for i in range(50))
    assert fw.ids(text) == _reference(tokenizer, text)
    assert len(fw._cache) <= 10
