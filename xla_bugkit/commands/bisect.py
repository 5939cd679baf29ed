"""``xla-bugkit bisect BUNDLE``: does the failure still happen on the newest jaxlib, and
which release brought it (or fixed it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit.errors import ExitCode
from xla_bugkit.frameworks import is_release_number
from xla_bugkit.ui import Ui
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance

if TYPE_CHECKING:
    from xla_bugkit.bisect.run import Range
    from xla_bugkit.bisect.search import Bisection

EPILOG = """examples:
  xla-bugkit bisect bundle.7z
  xla-bugkit bisect bundle.7z --from 0.8.0 --to 0.10.2
  xla-bugkit bisect bundle.7z --wheels ~/wheels -o bundle.bisected.zip
  xla-bugkit bisect bundle.7z --python python3.12
      also the releases published only for Python 3.12 and newer (0.11 on)

Each release is downloaded through pip (your pip configuration and index apply) once, and
kept unpacked in xla-bugkit's cache (or $XLA_BUGKIT_CACHE): about 350 MB a release, up
to 4 GB ($XLA_BUGKIT_CACHE_LIMIT), the releases used longest ago removed first
(xla-bugkit cache lists them; --clear removes them).
"""


def add_range_options(p: argparse.ArgumentParser) -> None:
    """--wheels and --python, shared by ``bisect`` and ``verify --jaxlib``."""
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


def release_number(text: str) -> str:
    """A release number as the index spells it: "0.8.1", "0.9.0.1"."""
    if not is_release_number(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a release number such as 0.8.1")
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="a .7z, .zip or .tar.gz bundle")
    p.add_argument(
        "--from",
        dest="low",
        type=release_number,
        metavar="VERSION",
        help="the oldest release to try",
    )
    p.add_argument(
        "--to",
        dest="high",
        type=release_number,
        metavar="VERSION",
        help="the newest release to try",
    )
    add_range_options(p)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="write the bundle again as OUTPUT with the result (manifest and ISSUE.md)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output that is not an xla-bugkit bundle",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def bisect_command(
    bundle: Path,
    chosen: Range,
    *,
    out: Path | None = None,
    force: bool = False,
    timeout: float,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    module_re: str | None = None,
    json_output: bool = False,
    ui: Ui | None = None,
) -> int:
    """CLI: bisect, print the releases tried and the answer; exit 0 when some release fails
    the recorded way (the answer means something), 3 when none does."""
    from xla_bugkit.bisect.run import bisect_bundle  # replay and bundle code: seconds to import

    ui = ui or Ui()
    result = bisect_bundle(
        bundle,
        chosen,
        out=out,
        force=force,
        timeout=timeout,
        tolerance=tolerance,
        module_re=module_re,
        ui=ui,
    )
    if json_output:
        json.dump(result.to_json(), sys.stdout, indent=2)
        print()
    else:
        print(render(result))
    from xla_bugkit.bisect.search import Seen  # every command builds the parser from here

    failing = any(p.seen is Seen.FAILS for p in result.probes)
    return ExitCode.OK if failing else ExitCode.NOT_REPRODUCED


def render(result: Bisection) -> str:
    lines = []
    for p in result.probes:
        mark = " (the reporter's)" if p.version == result.reported else ""
        lines.append(f"jaxlib {p.version}{mark}: {p.seen.value}: {p.detail}")
    for why in dict.fromkeys(why for _, why in result.untried):
        versions = [v for v, w in result.untried if w == why]
        shown = ", ".join(versions) if len(versions) <= 4 else f"{versions[0]} to {versions[-1]}"
        lines.append(f"not tried ({why}): {shown}")
    lines += ["", result.summary]
    return "\n".join(lines)
