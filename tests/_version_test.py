"""The version the package says is the wheel's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import xla_bugkit
from xla_bugkit._version import __version__


def test_the_package_says_the_wheels_version() -> None:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"] == __version__
    assert xla_bugkit.__version__ == __version__
