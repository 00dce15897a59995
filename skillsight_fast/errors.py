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


def install_hint(extra: str) -> str:
    """The pip command that installs an optional extra, one that works however the package was installed.

    No package index serves ``skillsight-fast``, so ``pip install 'skillsight-fast[EXTRA]'`` fails; the
    extra's own requirements (read from the installed package's metadata) always install. In a checkout
    run in place (no metadata) the hint is the clone's own ``pip install '.[EXTRA]'``.

    Parameters
    ----------
    extra : str
        An optional-dependencies name of ``pyproject.toml``, e.g. ``"serve"``.

    Returns
    -------
    str
        E.g. ``"pip install 'mcp>=1.0'  (the [serve] extra)"``.
    """
    import re
    from importlib import metadata

    try:
        requires = metadata.requires("skillsight-fast") or []
    except metadata.PackageNotFoundError:
        requires = []
    marker = re.compile(r"""extra\s*==\s*["']""" + re.escape(extra) + r"""["']""")
    wanted = [r.split(";")[0].strip() for r in requires if marker.search(r)]
    if not wanted:
        return f"pip install '.[{extra}]' (in the skillsight-fast clone)"
    return "pip install " + " ".join(f"'{r.replace(' ', '')}'" for r in wanted) + f"  (the [{extra}] extra)"
