"""Listing jaxlib releases through the pip a fresh venv brings (bisect, verify --jaxlib).

A real pip, in a real venv made by ``python -m venv`` (its bundled pip, not upgraded), asked
through the user's own pip configuration: here a find-links folder and no index, so the test
reaches no network and still reads what that pip really prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xla_bugkit.errors import BugkitError
from xla_bugkit.releases import index


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the pip ``venv`` bundles (23.2.1 on Python 3.11.7: no ``--json``)."""
    where = tmp_path_factory.mktemp("oldpip") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, capture_output=True)
    return where / "bin" / "python"


def _pip_version(python: Path) -> tuple[int, ...]:
    out = subprocess.run(
        [python, "-m", "pip", "--version"], capture_output=True, text=True, check=True
    ).stdout
    return tuple(int(p) for p in out.split()[1].split(".")[:2])


@pytest.fixture
def find_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's pip configuration, as pip reads it: no index, one find-links folder."""
    folder = tmp_path / "links"
    folder.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return folder


def _wheels(folder: Path, python: str, *versions: str) -> None:
    for v in versions:
        (folder / f"jaxlib-{v}-{python}-{python}-manylinux2014_x86_64.whl").write_bytes(b"")


def test_an_old_pip_lists_the_releases_from_the_users_configuration(
    venv_python: Path, find_links: Path
) -> None:
    old = _pip_version(venv_python)
    _wheels(find_links, "cp311", "0.10.2", "0.10.1", "0.9.0.1", "0.4.30")
    (find_links / "jaxlib-0.11.0rc1-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"")
    found = index._index_versions(None, str(venv_python))
    assert found == {"0.10.2", "0.10.1", "0.9.0.1", "0.4.30"}, old
    # The releases only a newer Python can load: pip's own --python-version filter.
    _wheels(find_links, "cp312", "0.12.0")
    assert index._index_versions("3.12", str(venv_python)) == {"0.12.0"}


def test_the_bundled_pip_is_one_without_json(venv_python: Path) -> None:
    # What the test above stands for: a pip older than `pip index versions --json` (24.0).
    if sys.version_info[:2] != (3, 11):
        pytest.skip("only Python 3.11's venv is known to bundle a pip before 24")
    assert _pip_version(venv_python) < (24, 0)


def test_no_release_found_is_said_with_pips_own_words(venv_python: Path, find_links: Path) -> None:
    with pytest.raises(BugkitError) as e:
        index._index_versions(None, str(venv_python))
    said = str(e.value)
    assert said.startswith("cannot list jaxlib releases through pip (")
    assert "No matching distribution found for jaxlib" in said
    assert "experimental" not in said
    assert "--wheels DIR" in said
