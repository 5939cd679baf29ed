"""Release numbers on the command line are checked before anything runs."""

from __future__ import annotations

import pytest

from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode


@pytest.mark.parametrize(
    "argv",
    [
        ["bisect", "bug.zip", "--from", "abc"],
        ["bisect", "bug.zip", "--to", "v0.8.1"],
        ["bisect", "bug.zip", "--to", "0.8.1rc1"],
        ["verify", "bug.zip", "--jaxlib", "latest"],
    ],
)
def test_a_release_that_is_not_a_number_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == ExitCode.USAGE
    assert "is not a release number such as 0.8.1" in capsys.readouterr().err


def test_wheels_without_a_release_to_take_from_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["verify", "bug.zip", "--wheels", "."]) == ExitCode.ERROR
    assert "--wheels goes with --jaxlib VERSION" in capsys.readouterr().err
