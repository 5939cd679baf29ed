"""Sizes on the command line, in config.toml and $XLA_BUGKIT_CACHE_LIMIT: a unit always
(``25M``, ``10k``, ``1.5G``; bytes only with ``B``), a bare number refused with how to write
it; and a budget the bundle cannot meet said, not silently exceeded."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect
from xla_bugkit import config
from xla_bugkit.cli.main import main
from xla_bugkit.collecting import CollectOptions, rebundle_command
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.releases import cache


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("25M", 25_000_000),
        ("25MB", 25_000_000),
        ("10k", 10_000),
        ("10kB", 10_000),
        ("1.5G", 1_500_000_000),
        ("2 GB", 2_000_000_000),
        ("800B", 800),
        ("800b", 800),
    ],
)
def test_a_size_with_its_unit(text: str, size: int) -> None:
    assert config.parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("10", "'10' has no unit: 10M for megabytes, 10k for kilobytes, 10B for bytes"),
        ("1.5", "'1.5' has no unit: 1.5M for megabytes, 1.5k for kilobytes, 1.5B for bytes"),
        ("lots", f"not a size: 'lots' ({config.SIZE_HOWTO})"),
        ("10x", f"not a size: '10x' ({config.SIZE_HOWTO})"),
        ("-5M", f"not a size: '-5M' ({config.SIZE_HOWTO})"),
    ],
)
def test_a_size_without_a_unit_is_refused_saying_how_to_write_it(text: str, error: str) -> None:
    with pytest.raises(ValueError) as e:
        config.parse_size(text)
    assert str(e.value) == error


@pytest.mark.parametrize("command", ["collect", "bundle", "merge"])
def test_max_size_10_is_a_bad_command_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    program = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    rest = {"collect": program, "bundle": [str(tmp_path)], "merge": [str(tmp_path / "a.zip")]}
    assert main([command, "--max-size", "10", "-o", str(tmp_path / "b.zip"), *rest[command]]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"xla-bugkit {command}: error: argument --max-size: '10' has no unit: "
        "10M for megabytes, 10k for kilobytes, 10B for bytes"
    )
    assert not marker.exists() and not (tmp_path / "b.zip").exists()


def test_a_bare_number_in_config_toml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("max_size = 10\n")
    with pytest.raises(BugkitError) as e:
        config.load(path)
    assert str(e.value) == (
        f"{path}: max_size: '10' has no unit: 10M for megabytes, 10k for kilobytes, 10B for bytes"
    )


def test_a_bare_number_as_the_cache_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.LIMIT_ENV, "8")
    with pytest.raises(BugkitError, match=f"^{cache.LIMIT_ENV}: '8' has no unit"):
        cache.limit()
    monkeypatch.setenv(cache.LIMIT_ENV, "8G")
    assert cache.limit() == 8_000_000_000


def test_the_bundle_command_collect_prints_gives_its_size_with_a_unit(tmp_path: Path) -> None:
    options = CollectOptions(output=tmp_path / "b.zip", max_size=123_456)
    line = rebundle_command(tmp_path, options)
    assert "--max-size 123456B" in line
    assert config.parse_size(line.split("--max-size ")[1].split()[0]) == 123_456


@pytest.mark.jax
def test_a_budget_the_bundle_cannot_meet_is_said(tmp_path: Path) -> None:
    program = [sys.executable, str(PROGRAMS / "compile_error.py")]
    done = run_collect(tmp_path / "b.zip", program, "-q", "--max-size", "800B")
    assert done.returncode == ExitCode.OK, done.stderr
    size = done.bundle.stat().st_size
    assert size > 800
    assert (
        f"xla-bugkit: warning: the bundle is {config.size_text(size)}, over --max-size 800 B, "
        "with nothing left to drop (what is left is what the report needs): raise --max-size "
        "to keep what was left out\n"
    ) in done.stderr
