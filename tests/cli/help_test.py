"""``--help``: wrapped to the terminal's width (COLUMNS), the examples kept as written, and
one name for one thing in every command."""

from __future__ import annotations

import argparse

import pytest

from xla_bugkit.cli import grammar
from xla_bugkit.cli.main import main

WIDTH = 60


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    top = grammar.parser()
    (sub,) = (a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", list(grammar.COMMANDS))
def test_the_help_is_wrapped_to_the_terminal_and_keeps_the_examples(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    examples = [
        line
        for line in grammar.COMMANDS[command].EPILOG.splitlines()
        if line.startswith("  xla-bugkit")
    ]
    # Prose (not an indented example or option) fits the width.
    prose = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert all(len(line) <= WIDTH for line in prose if not line.startswith("usage:")), out
    assert examples and all(line in out.splitlines() for line in examples), out
    description = " ".join(grammar.COMMANDS[command].DESCRIPTION.split())
    assert description in " ".join(out.split())


def test_the_top_help_is_wrapped_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert main(["--help"]) == 0
    assert "  xla-bugkit collect -- python train.py\n" in capsys.readouterr().out


@pytest.mark.parametrize(("command", "parser"), _subparsers().items())
def test_one_name_for_one_thing(command: str, parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        name = action.metavar
        if not action.option_strings:
            assert name is None or str(name) == str(name).upper(), name
        elif "--module" in action.option_strings:
            assert name == "REGEX", command
        elif "--output" in action.option_strings:
            assert name == "OUT", command
