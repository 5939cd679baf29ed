"""The one exit-code table: the README and every command's help follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xla_bugkit.errors import COMMAND_MEANINGS, MEANINGS, ExitCode, exit_codes_help
from xla_bugkit.main import main

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_exit_code_has_a_meaning() -> None:
    assert set(MEANINGS) == set(ExitCode)
    for meanings in COMMAND_MEANINGS.values():
        assert set(meanings) <= set(ExitCode)


def test_the_readme_table_is_the_exit_code_table() -> None:
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", README.read_text("utf-8"), re.MULTILINE)
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
