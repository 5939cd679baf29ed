"""The CLI layer: exit codes and the exact error lines."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from xla_bugkit import __version__
from xla_bugkit.cli.main import main

XLA_BUGKIT = str(Path(sys.executable).with_name("xla-bugkit"))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"xla-bugkit {__version__}"


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("collect", "bundle", "verify", "replay"):
        assert main([command, "--help"]) == 0
        assert "examples:" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "examples:" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["collect"], ["collect", "--"], ["collect", "-o", "b.zip"]])
def test_collect_without_a_command_is_a_bad_command_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "xla-bugkit: error: nothing to run: give the command after --, "
        "e.g. collect -- python x.py\n"
    )


# A program that would be the user's long run: its first act leaves a file behind, so a
# check that comes only after the run is caught by the file being there.
MARKER_PROGRAM = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"


def _collect_marker(tmp_path: Path, *options: str) -> tuple[int, Path]:
    marker = tmp_path / "program-started"
    argv = ["collect", "-q", "--workdir", str(tmp_path / "w"), *options,
            "--", sys.executable, "-c", MARKER_PROGRAM, str(marker)]  # fmt: skip
    return main(argv), marker


def test_an_invalid_module_regex_stops_collect_before_the_program_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, marker = _collect_marker(tmp_path, "-o", str(tmp_path / "b.zip"), "--module", "jit_(")
    assert code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --module: not a regular expression: 'jit_(' "
        "(missing ), unterminated subpattern at position 4)\n"
    )
    assert not marker.exists()
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--module", "jit_(", "dumps"],
        ["shrink", "--module", "[a-", "bundle.zip"],
        ["bundle", "--module", "(", "work"],
    ],
)
def test_an_invalid_module_regex_is_a_usage_error_everywhere(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert "argument --module: not a regular expression" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["collect", "--timeout", "-5", "--", "x"], "--timeout"),
        (["collect", "--replay-timeout", "0", "--", "x"], "--replay-timeout"),
        (["collect", "--shrink", "soon", "--", "x"], "--shrink"),
        (["verify", "--timeout", "never", "b.zip"], "--timeout"),
        (["shrink", "--budget=-1m", "b.zip"], "--budget"),
        (["shrink", "--probe-timeout", "0s", "b.zip"], "--probe-timeout"),
    ],
)
def test_durations_have_one_grammar(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "(90, 90s, 2m or 1h)" in err


def test_a_duration_in_minutes_is_taken_by_collect() -> None:
    from xla_bugkit.cli import grammar

    args = grammar.parser().parse_args(["collect", "--budget", "2m", "--timeout", "1h", "--", "x"])
    assert (args.budget, args.timeout) == (120.0, 3600.0)


def test_an_output_folder_that_does_not_exist_stops_collect_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no-such-folder" / "b.zip"
    code, marker = _collect_marker(tmp_path, "-o", str(out))
    assert code == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: cannot write {out}: {out.parent} does not exist\n"
    )
    assert not marker.exists()


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's sysfs")
def test_an_output_folder_nobody_can_write_stops_collect_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # sysfs takes no new files, not even from root: a folder that is there but not writable.
    code, marker = _collect_marker(tmp_path, "-o", "/sys/kernel/b.zip")
    assert code == 1
    assert capsys.readouterr().err == (
        "xla-bugkit: error: cannot write /sys/kernel/b.zip: Permission denied\n"
    )
    assert not marker.exists()
    assert not Path("/sys/kernel/b.zip").exists()


def test_an_output_name_that_disagrees_with_format_stops_collect_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.zip"
    code, marker = _collect_marker(tmp_path, "-o", str(out), "--format", "tar.gz")
    assert code == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {out} is named as a zip archive but --format is tar.gz: "
        f"name it {tmp_path / 'b.tar.gz'} or leave out --format\n"
    )
    assert not marker.exists()
    assert not out.exists()


def test_collect_never_replaces_a_file_that_is_not_a_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.zip"
    out.write_text("a week of results")
    code, marker = _collect_marker(tmp_path, "-o", str(out))
    assert code == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {out} exists and is not an xla-bugkit bundle: choose another "
        "output, or pass --force to replace it\n"
    )
    assert not marker.exists()
    assert out.read_text() == "a week of results"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.zip"]  # no temp file left


def test_force_lets_collect_run_over_a_file_that_is_not_a_bundle(tmp_path: Path) -> None:
    out = tmp_path / "results.zip"
    out.write_text("a week of results")
    code, marker = _collect_marker(tmp_path, "-o", str(out), "--force")
    assert code == 5  # the program ran, and did not fail: nothing is written
    assert marker.read_text() == "ran"
    assert out.read_text() == "a week of results"


def test_repack_never_replaces_a_file_that_is_not_a_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "notes.zip"
    out.write_text("mine")
    assert main(["repack", str(tmp_path / "no-bundle.7z"), str(out)]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {out} exists and is not an xla-bugkit bundle: choose another "
        "output, or pass --force to replace it\n"
    )
    assert out.read_text() == "mine"


def test_bundle_of_a_folder_that_is_not_a_work_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bundle", str(tmp_path / "nowhere")]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {tmp_path / 'nowhere'} does not exist: give the work dir collect "
        "kept\n"
    )
    assert main(["bundle", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {tmp_path} has no run.json: give a work dir that collect kept "
        "(--keep-workdir, or the one it named when the bundle could not be written)\n"
    )
    (tmp_path / "run.json").write_text('{"schema": 1}')
    (tmp_path / "run.log").write_text("")
    assert main(["bundle", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"xla-bugkit: error: {tmp_path / 'run.json'} is not a run record xla-bugkit can read "
        "(no 'xla_flags')\n"
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


@pytest.mark.parametrize("value", ["-0.1", "nan", "inf", "lots"])
def test_a_tolerance_must_be_a_finite_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["verify", "b.zip"], ["replay", "m.hlo.pb"], ["collect", "--", "x"]):
        assert main([*command[:1], f"--rtol={value}", *command[1:]]) == 2
        assert "--rtol" in capsys.readouterr().err


def test_python_dash_m_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "xla_bugkit", "--version"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and __version__ in done.stdout


@pytest.mark.jax
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


@pytest.mark.jax
def test_a_program_that_replaces_or_defaults_xla_flags_keeps_its_flags_and_our_dumps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``os.environ["XLA_FLAGS"] = ...`` drops collect's flags, and ``setdefault`` keeps them
    out when collect sets XLA_FLAGS first: the hook puts collect's back before XLA reads
    them, after the program's own, which it leaves in force."""
    for line in (
        "os.environ['XLA_FLAGS'] = '--xla_cpu_enable_fast_math=false'",
        "os.environ.setdefault('XLA_FLAGS', '--xla_cpu_enable_fast_math=false')",
        # After jax's import, before its first computation: XLA has not read them yet.
        "import jax; os.environ.setdefault('XLA_FLAGS', '--xla_cpu_enable_fast_math=false')",
    ):
        program = tmp_path / "own_flags.py"
        program.write_text(
            f"import os\n{line}\n"
            "import jax.numpy as jnp\n"
            "print(jnp.ones(3).sum())\n"
            "raise SystemExit('failing after setting its flags')\n"
        )
        out = tmp_path / "b.zip"
        argv = ["collect", "-q", "--no-replay", "--force", "-o", str(out), "--",
                sys.executable, str(program)]  # fmt: skip
        code = main(argv)
        err = capsys.readouterr().err
        assert code != 1 and "wrote no XLA dumps" not in err, err
        with zipfile.ZipFile(out) as z:
            manifest = json.loads(z.read("manifest.json"))
        assert manifest["xla_flags"] == ["--xla_cpu_enable_fast_math=false"], line
        assert manifest["modules"], line
