"""The one exit-code table: docs/exit-codes.md and every command's help follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xla_bugkit.cli.main import main
from xla_bugkit.errors import COMMAND_MEANINGS, MEANINGS, ExitCode, exit_codes_help

EXIT_CODES_PAGE = Path(__file__).resolve().parent.parent / "docs" / "exit-codes.md"


def test_every_exit_code_has_a_meaning() -> None:
    assert set(MEANINGS) == set(ExitCode)
    for meanings in COMMAND_MEANINGS.values():
        assert set(meanings) <= set(ExitCode)


def test_the_documented_table_is_the_exit_code_table() -> None:
    text = EXIT_CODES_PAGE.read_text("utf-8")
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", text, re.MULTILINE)
    assert {int(code): meaning for code, meaning in rows} == {
        int(code): meaning for code, meaning in MEANINGS.items()
    }


@pytest.mark.parametrize("command", sorted(COMMAND_MEANINGS))
def test_each_commands_help_lists_its_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == ExitCode.OK
    shown = " ".join(capsys.readouterr().out.split())
    assert exit_codes_help(command) in shown
