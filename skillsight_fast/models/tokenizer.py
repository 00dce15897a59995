"""Loading a Hugging Face ``tokenizer.json`` with the ``tokenizers`` library."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillsight_fast.errors import ModelError

if TYPE_CHECKING:
    from tokenizers import Tokenizer


def _pad_settings(path: Path, tok: Any) -> tuple[int, str]:
    """Pad id and token: tokenizer_config.json's ``pad_token`` first, then tokenizer.json."""
    pad_token: str | None = None
    cfg_path = path.parent / "tokenizer_config.json"
    if cfg_path.is_file():
        try:
            value = json.loads(cfg_path.read_text(encoding="utf-8")).get("pad_token")
        except (OSError, ValueError):
            value = None
        if isinstance(value, dict):  # {"content": "[PAD]", ...} in older files
            value = value.get("content")
        if isinstance(value, str):
            pad_token = value
    padding = tok.padding
    if pad_token is None and padding:
        pad_token = padding.get("pad_token")
    for candidate in (pad_token, "[PAD]", "<pad>"):
        if candidate is not None and tok.token_to_id(candidate) is not None:
            return int(tok.token_to_id(candidate)), candidate
    if padding:
        return int(padding.get("pad_id", 0)), str(padding.get("pad_token", "[PAD]"))
    return 0, "[PAD]"


def load_tokenizer(path: str | os.PathLike[str], max_length: int = 256) -> Tokenizer:
    """Load ``tokenizer.json`` truncating to ``max_length`` and padding to the longest text.

    Parameters
    ----------
    path : path
        A ``tokenizer.json`` file (or a folder containing one).
    max_length : int
        Maximum number of tokens per text, special tokens included.

    Returns
    -------
    tokenizers.Tokenizer
        ``encode_batch`` gives right-padded rows of equal length; ``tok.padding["pad_id"]``
        is the pad id (from ``tokenizer_config.json``'s ``pad_token`` when present).

    Raises
    ------
    ModelError
        If the file is missing or cannot be parsed.
    """
    from tokenizers import Tokenizer

    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ModelError(f"{path} not found: the encoder needs a Hugging Face tokenizer.json")
    if max_length < 2:
        raise ModelError(f"max_length must be >= 2, got {max_length}")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception
        raise ModelError(f"cannot load tokenizer {path}: {exc}") from exc
    pad_id, pad_token = _pad_settings(path, tok)
    tok.enable_truncation(max_length=max_length)
    tok.enable_padding(pad_id=pad_id, pad_token=pad_token)  # length=None: pad to longest
    return tok
