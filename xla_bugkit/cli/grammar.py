"""The command line's grammar: the subcommands, in the order ``--help`` lists them, each
built by its module in ``cli.commands`` (its help, its options, the ``run`` that does it)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Protocol

from xla_bugkit._version import __version__
from xla_bugkit.cli import options
from xla_bugkit.cli.commands import (
    bisect,
    bundle,
    cache,
    collect,
    convert,
    doctor,
    merge,
    repack,
    replay,
    show,
    shrink,
    verify,
)
from xla_bugkit.ui import Ui

DESCRIPTION = """\
Turn a failing JAX/XLA program into a replayable bug bundle, and verify one.

examples:
  xla-bugkit collect -- python train.py
  xla-bugkit collect -o bug.zip --timeout 600 -- python train.py --steps 10
  xla-bugkit verify bundle.7z
  xla-bugkit replay dump/module_0006.jit_train_step.before_optimizations.hlo.pb
  xla-bugkit show bundle.7z
"""


class Command(Protocol):
    """What a module of ``cli.commands`` holds: its texts, its options, and its work."""

    HELP: str
    DESCRIPTION: str
    EPILOG: str

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, ui: Ui) -> int: ...


# Every subcommand, in the order ``xla-bugkit --help`` lists them.
COMMANDS: dict[str, Command] = {
    "collect": collect,
    "bundle": bundle,
    "verify": verify,
    "replay": replay,
    "show": show,
    "repack": repack,
    "merge": merge,
    "shrink": shrink,
    "bisect": bisect,
    "convert": convert,
    "cache": cache,
    "doctor": doctor,
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="xla-bugkit",
        description=DESCRIPTION,
        formatter_class=options.HelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"xla-bugkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        one = options.subcommand(
            sub, name, help=command.HELP, description=command.DESCRIPTION, epilog=command.EPILOG
        )
        command.add_arguments(one)
        options.name_positionals(one)
    return p


def attach_flags(argv: Sequence[str]) -> list[str]:
    """``replay --flags "--xla_a=1"`` as ``--flags=--xla_a=1``: argparse takes a lone value
    that starts with "--" for an option, and then says --flags lacks its argument."""
    args = list(argv)
    if next((a for a in args if not a.startswith("-")), None) != "replay":
        return args  # collect's CMD may hold a --flags of its own
    for i, arg in enumerate(args[:-1]):
        if arg == "--flags" and args[i + 1].startswith("--xla"):
            args[i : i + 2] = [f"--flags={args[i + 1]}"]
            break
    return args
