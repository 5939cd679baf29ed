"""``xla-bugkit shrink``'s command line: mistakes end in one line and an exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_bugkit.cli.main import main
from xla_bugkit.config import parse_budget
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.shrink.run import default_output, parse_only


def test_budgets() -> None:
    assert parse_budget("10m") == 600
    assert parse_budget("90s") == 90
    assert parse_budget("1h") == 3600
    assert parse_budget("45") == 45
    with pytest.raises(BugkitError, match="give a duration"):
        parse_budget("soon")


def test_stages() -> None:
    assert parse_only("module,passes") == ("module", "passes")
    with pytest.raises(BugkitError, match="choose among flags, module, passes"):
        parse_only("module,speed")


def test_default_output_sits_beside_the_input() -> None:
    assert default_output(Path("a/bug.zip")) == Path("a/bug.shrunk.zip")
    assert default_output(Path("bug.tar.gz")) == Path("bug.shrunk.tar.gz")
    assert default_output(Path("dump")) == Path("dump.shrunk.zip")
    # The shrunk bundle is the one to attach: GitHub takes no .7z.
    assert default_output(Path("bundle.7z")) == Path("bundle.shrunk.zip")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--only", "speed"],
            "--only 'speed': choose among flags, module, passes (comma-separated)",
        ),
        (["--max-probes", "0"], "--max-probes must be at least 1"),
    ],
)
def test_mistakes_are_one_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["shrink", str(tmp_path), *args]) == ExitCode.ERROR
    assert capsys.readouterr().err == f"xla-bugkit: error: {message}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "soon"], "argument --budget: not a duration: 'soon' (90, 90s, 2m or 1h)"),
        (["--probe-timeout", "0"], "argument --probe-timeout: not a duration: '0'"),
    ],
)
def test_durations_are_checked_as_the_command_line_is_read(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["shrink", str(tmp_path), *args]) == ExitCode.USAGE
    assert message in capsys.readouterr().err


def test_a_missing_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shrink", str(tmp_path / "nope.zip")]) == ExitCode.ERROR
    assert "does not exist" in capsys.readouterr().err


def test_not_a_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "bogus.zip"
    bogus.write_bytes(b"not a zip")
    assert main(["shrink", str(bogus)]) == ExitCode.BAD_BUNDLE
