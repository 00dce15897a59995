"""Exceptions raised by skillsight_fast.

Every error a user can cause (bad input, a broken index, a missing model) is a subclass of
:class:`SkillsightError`, so the CLI can turn it into a clear message and a non-zero exit code.
"""

from __future__ import annotations


class SkillsightError(Exception):
    """Base class of every error skillsight_fast raises on purpose."""


class ModelNotFoundError(SkillsightError):
    """The requested encoder is neither a registry name nor a usable path."""


class ModelError(SkillsightError):
    """An encoder folder or ONNX file is unusable (wrong config, missing file)."""


class ModelMismatchError(SkillsightError):
    """The encoder differs from the one the index was built with."""


class SkillFormatError(SkillsightError):
    """A skill source (SKILL.md, JSONL record, dataset folder) is malformed."""


class EmptyLibraryError(SkillsightError):
    """No skill could be read from the given sources."""


class DuplicateSkillError(SkillsightError):
    """Two skills have the same id."""


class EmbeddingError(SkillsightError):
    """Embeddings are unusable: NaN or infinite values, or a shape that does not match the skills."""


class IndexFormatError(SkillsightError):
    """An index folder is missing, truncated, corrupt or of an unknown format version."""


class QueryError(SkillsightError):
    """A query or a search argument is invalid (empty text, k <= 0, ...)."""
