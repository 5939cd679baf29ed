"""The CLI layer: exit codes and the exact error lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xla_bugkit import __version__
from xla_bugkit.main import main

XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"xla-bugkit {__version__}"


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["collect", "--help"], ["verify", "--help"], ["replay", "--help"]):
        assert main(argv) == 0
        assert "examples:" in capsys.readouterr().out


def test_collect_without_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collect"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "xla-bugkit: error: nothing to run: give the command after --, e.g. collect -- python x.py"
    )


def test_collect_with_an_unknown_output_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collect", "-o", "bug.rar", "--", "true"]) == 1
    assert capsys.readouterr().err.strip() == (
        "xla-bugkit: error: cannot tell the archive format of bug.rar: name it .7z, .zip or .tar.gz"
    )


def test_collect_of_a_missing_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["collect", "-q", "--workdir", str(tmp_path / "w"), "--", "no-such-program-xyz"])
    assert code == 1
    assert "cannot run 'no-such-program-xyz': command not found" in capsys.readouterr().err


def test_usage_error_exit_code() -> None:
    assert main(["frobnicate"]) == 2


def test_python_dash_m_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "xla_bugkit", "--version"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and __version__ in done.stdout


def test_installed_command_replay_of_a_missing_file(tmp_path: Path) -> None:
    done = subprocess.run([XLA_BUGKIT, "replay", str(tmp_path / "x.hlo.pb")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == f"xla-bugkit: error: {tmp_path / 'x.hlo.pb'} does not exist"


def test_a_users_workdir_keeps_their_files(tmp_path: Path) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    assert main(["collect", "-q", "--workdir", str(tmp_path), "--", "no-such-program-xyz"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert mine.read_text() == "mine"


def test_config_file_makes_zip_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xla_bugkit import config

    (tmp_path / "xla-bugkit").mkdir()
    (tmp_path / "xla-bugkit" / "config.toml").write_text('format = "zip"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config.load() == config.Config(format="zip", max_size="25MB")


def test_a_bad_config_file_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "xla-bugkit").mkdir()
    (tmp_path / "xla-bugkit" / "config.toml").write_text('format = "rar"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["collect", "--", "true"]) == 1
    path = tmp_path / "xla-bugkit" / "config.toml"
    assert capsys.readouterr().err.strip() == (
        f"xla-bugkit: error: {path}: format must be one of 7z, zip, tar.gz, not 'rar'"
    )


def test_a_program_that_replaces_xla_flags_is_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "overwrites.py"
    program.write_text(
        "import os\n"
        "os.environ['XLA_FLAGS'] = '--xla_cpu_enable_fast_math=false'\n"
        "import jax.numpy as jnp\n"
        "print(jnp.ones(3).sum())\n"
        "raise SystemExit('failing after the flags were replaced')\n"
    )
    code = main(
        ["collect", "-q", "--workdir", str(tmp_path / "w"), "--", sys.executable, str(program)]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "the program wrote no XLA dumps (non-XLA failure: failing after the flags" in err
    assert "instead of appending to it" in err
