"""The built wheel works outside the repository: package data ships, the console script runs.

The wheel is built from a copy of the sources (the checkout stays clean), installed without its
dependencies into a fresh venv whose only other path is the test environment's site-packages
(added by a ``.pth`` line, so the checkout's editable install is not active there), and run from
a folder outside the repository.
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
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "skillsight_fast", src / "skillsight_fast",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(src)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = dist.glob("skillsight_fast-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    # the dependencies come from this environment, after the venv's own site-packages
    deps = [p for p in [*site.getsitepackages(), sysconfig.get_path("purelib")] if Path(p).is_dir()]
    (purelib / "zz_test_dependencies.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    outside = work / "elsewhere"
    outside.mkdir()
    return {"python": py, "script": env_dir / "bin" / "skillsight", "cwd": outside, "purelib": purelib,
            "wheel": wheel}


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120,
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
