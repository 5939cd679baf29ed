"""The command line's building blocks: a subcommand's parser, the types of its option values
(sizes, durations, regular expressions, tolerances) and the options several commands share."""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import TYPE_CHECKING

from xla_bugkit import config
from xla_bugkit.errors import exit_codes_help

if TYPE_CHECKING:
    from xla_bugkit.verdict.tolerance import Tolerance


def size(text: str) -> int:
    """ "25MB", "500kB", "1GB" or a number of bytes."""
    try:
        return config.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def subcommand(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str,
    epilog: str,
) -> argparse.ArgumentParser:
    """A subcommand's parser: examples kept as written, and the -q/-v every command takes."""
    epilog = f"{epilog.rstrip()}\n\n{textwrap.fill(exit_codes_help(name), 90)}\n"
    p = sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-q", "--quiet", action="count", default=0, help="say less")
    p.add_argument("-v", "--verbose", action="count", default=0, help="say more")
    return p


def add_tolerance(p: argparse.ArgumentParser) -> None:
    """--rtol and --atol: how far a replay's output may be from its reference."""
    p.add_argument(
        "--rtol",
        type=tolerance_value,
        default=None,
        metavar="X",
        help="relative error an output may have against its reference before it is a "
        "wrong result (default 1e-3)",
    )
    p.add_argument(
        "--atol",
        type=tolerance_value,
        default=None,
        metavar="X",
        help="absolute error an output may have, as it is (default: 1e-3 scaled to the "
        "reference's values when they are small, never under 8 units in the last place)",
    )


def add_fake_data(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fake-data",
        action="store_true",
        help="replay on generated inputs even where real ones were recorded "
        "(run_hlo_module's --force_fake_data)",
    )


def duration(text: str) -> float:
    """A duration of the one grammar (``config.parse_duration``), as seconds."""
    seconds = config.parse_duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (90, 90s, 2m or 1h)")
    return seconds


def duration_text(text: str) -> str:
    """A duration as written (``--shrink``, shrink's ``--budget``), once checked."""
    duration(text)
    return text


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({e})") from None
    return text


def tolerance_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more: {text!r}")
    return value


def tolerance(args: argparse.Namespace) -> Tolerance:
    """The tolerance --rtol/--atol ask for (the defaults for what they leave out)."""
    from xla_bugkit.verdict.tolerance import REL_BOUND, Tolerance

    rtol = args.rtol if args.rtol is not None else REL_BOUND
    return Tolerance(rtol=rtol, atol=args.atol)
