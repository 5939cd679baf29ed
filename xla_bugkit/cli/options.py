"""The command line's building blocks: a subcommand's parser, the types of its option values
(sizes, durations, regular expressions, tolerances, releases), the options several commands
share, and the one way a command prints its result (text, or JSON with ``--json``)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import config
from xla_bugkit.errors import ExitCode, exit_codes_help
from xla_bugkit.frameworks import is_release_number

if TYPE_CHECKING:
    from xla_bugkit.verdict.tolerance import Tolerance


def size(text: str) -> int:
    """A size with its unit ("25M", "500k", "1.5G", "800B"), as ``config.parse_size`` reads
    it; a bare number is refused, with how to write it."""
    try:
        return config.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help, with the description and epilog wrapped to the terminal's width
    (``COLUMNS``) as the options are: prose is filled, a line that ends in a colon ends its
    paragraph, and an indented line (an example command and what it does) is kept as
    written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        prose: list[str] = []

        def fill() -> None:
            if prose:
                lines.append(textwrap.fill(" ".join(prose), width, initial_indent=indent,
                                           subsequent_indent=indent))  # fmt: skip
                prose.clear()

        for line in text.splitlines():
            if line[:1].isspace() or not line:
                fill()
                lines.append(indent + line if line else "")
                continue
            prose.append(line.strip())
            if line.endswith(":"):
                fill()
        fill()
        return "\n".join(lines)


def subcommand(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str,
    epilog: str,
) -> argparse.ArgumentParser:
    """A subcommand's parser: examples kept as written, and the -q/-v every command takes."""
    epilog = f"{epilog.rstrip()}\n\n{exit_codes_help(name)}\n"
    p = sub.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=HelpFormatter
    )
    p.add_argument("-q", "--quiet", action="count", default=0, help="say less")
    p.add_argument("-v", "--verbose", action="count", default=0, help="say more")
    return p


def name_positionals(p: argparse.ArgumentParser) -> None:
    """Name each positional in capitals in the usage and the help (BUNDLE, OUT, WORKDIR), as
    the descriptions and the options' metavars name what a user gives."""
    for action in p._actions:
        if not action.option_strings and action.metavar is None and action.nargs != 0:
            action.metavar = action.dest.upper()


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


def add_bundle(p: argparse.ArgumentParser) -> None:
    """BUNDLE, the bundle a command reads: an archive, or the folder it was unpacked into."""
    p.add_argument(
        "bundle", type=Path, help="a .7z, .zip or .tar.gz bundle, or a folder one is unpacked into"
    )


def add_json(p: argparse.ArgumentParser, help: str) -> None:
    """--json: the result as JSON on stdout (``emit``); ``help`` says which result."""
    p.add_argument("--json", action="store_true", help=help)


def add_timeout(p: argparse.ArgumentParser, help: str) -> None:
    """--timeout: how long a replay may take (``help`` says which; it shows the default)."""
    p.add_argument(
        "--timeout",
        type=duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help=help,
    )


def add_module(p: argparse.ArgumentParser, help: str, metavar: str = "REGEX") -> None:
    """--module: a regular expression on module labels, as ``args.module_re``."""
    p.add_argument("--module", dest="module_re", type=regex, metavar=metavar, help=help)


def add_force(
    p: argparse.ArgumentParser,
    help: str = "replace an existing output that is not an xla-bugkit bundle",
) -> None:
    p.add_argument("--force", action="store_true", help=help)


def add_releases(p: argparse.ArgumentParser) -> None:
    """--wheels and --python: where jaxlib releases come from and the Python they run
    under (``bisect``, ``verify --jaxlib``)."""
    p.add_argument(
        "--wheels",
        type=Path,
        metavar="DIR",
        help="take releases from the jaxlib-*.whl and jax-*.whl wheels in DIR instead of "
        "downloading them (for machines without access to the package index)",
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        help="another Python interpreter (python3.12), for the releases built only for "
        "newer Pythons than this one: their wheels and the numpy, ml_dtypes and scipy they "
        "need are taken for it, and their replay runs under it",
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


def release_number(text: str) -> str:
    """A release number as the index spells it: "0.8.1", "0.9.0.1"."""
    if not is_release_number(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a release number such as 0.8.1")
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


def emit(json_output: bool, to_json: Callable[[], object], text: Callable[[], str]) -> None:
    """A command's result on stdout: ``to_json()`` as JSON with ``--json``, else ``text()``."""
    if json_output:
        json.dump(to_json(), sys.stdout, indent=2)
        print()
    else:
        print(text())


def usage_error(message: str) -> int:
    """What argparse finds wrong, found after it: one line, and its exit code."""
    print(f"xla-bugkit: error: {message}", file=sys.stderr)
    return ExitCode.USAGE
