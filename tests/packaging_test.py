"""What users install: the sdist and the wheel built from it hold every file of the package.

An editable install reads the source tree and hides a package or data file the wheel lacks;
this builds both as ``pip install .`` does (the wheel from the sdist) and compares them with
the tree. ``doctor``'s lists of packages and data files are held equal to the tree too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from xla_bugkit.cli.commands import doctor

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xla_bugkit"


def _tree_files() -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it, of a copy of the tree (the build writes
    egg-info and build/ beside the sources: not into the checkout)."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "xla_bugkit", ignore=shutil.ignore_patterns("__pycache__"))
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_wheel_holds_every_file_of_the_package(built: Path) -> None:
    (wheel,) = built.glob("xla_bugkit-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = z.read(entry_points).decode()
    ours = {n for n in names if n.startswith("xla_bugkit/")}
    assert ours == _tree_files()
    assert "xla-bugkit = xla_bugkit.cli.main:entry" in scripts


def test_the_sdist_holds_every_file_of_the_package(built: Path) -> None:
    (sdist,) = built.glob("xla_bugkit-*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {m.name.split("/", 1)[1] for m in t.getmembers() if m.isfile()}
    assert _tree_files() <= names
    assert {"pyproject.toml", "README.md", "LICENSE"} <= names


def test_doctors_lists_are_the_trees() -> None:
    packages = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert set(doctor.PACKAGES) == packages
    data = {
        f"{p.parent.relative_to(ROOT).as_posix()}/{p.name}"
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    data.add("xla_bugkit/run/hook/site/sitecustomize.py")  # a folder of the hook's, no package
    declared = {f"{pkg.replace('.', '/')}/{name}" for pkg, name in doctor.DATA_FILES}
    assert declared == data
