"""``xla-bugkit bisect BUNDLE``: does the failure still happen on the newest jaxlib, and
which release brought it (or fixed it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit.cli import options
from xla_bugkit.errors import ExitCode
from xla_bugkit.ui import Ui

if TYPE_CHECKING:
    from xla_bugkit.bisect.search import Bisection

HELP = "replay a bundle under other jaxlib (or libtpu) releases: still failing? since when?"
DESCRIPTION = (
    "Replay the failing module of a bundle under jaxlib releases from the package index (or a "
    "folder of wheels), and say whether it still fails on the newest and between which two "
    "releases that changed. A TPU bundle is replayed under libtpu releases instead (from PyPI "
    "or a folder of libtpu wheels), on a TPU machine only; --from and --to then name libtpu "
    "versions."
)
EPILOG = """examples:
  xla-bugkit bisect bundle.7z
  xla-bugkit bisect bundle.7z --from 0.8.0 --to 0.10.2
  xla-bugkit bisect bundle.7z --wheels ~/wheels -o bundle.bisected.zip
  xla-bugkit bisect bundle.7z --python python3.12
      also the releases published only for Python 3.12 and newer (0.11 on)
  xla-bugkit bisect tpu-bundle.7z --from 0.0.40 --wheels ~/libtpu-wheels
      on a TPU machine: libtpu 0.0.40 on, under the installed jax and jaxlib

Each release is downloaded through pip (your pip configuration and index apply) once, and
kept unpacked in xla-bugkit's cache (or $XLA_BUGKIT_CACHE): about 350 MB a release, up
to 4 GB ($XLA_BUGKIT_CACHE_LIMIT), the releases used longest ago removed first
(xla-bugkit cache lists them; --clear removes them).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="a .7z, .zip or .tar.gz bundle")
    p.add_argument(
        "--from",
        dest="low",
        type=options.release_number,
        metavar="VERSION",
        help="the oldest release to try",
    )
    p.add_argument(
        "--to",
        dest="high",
        type=options.release_number,
        metavar="VERSION",
        help="the newest release to try",
    )
    options.add_releases(p)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="write the bundle again as OUT with the result (manifest and ISSUE.md)",
    )
    options.add_force(p)
    options.add_json(p, "print the result as JSON on stdout")
    options.add_module(p, "bisect the module whose label matches REGEX")
    options.add_timeout(p, "how long each release's replay may take (default %(default)g s)")
    options.add_tolerance(p)


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Bisect, print the releases tried and the answer; exit 0 when some release fails the
    recorded way (the answer means something), 3 when none does."""
    from xla_bugkit.bisect.run import Range, bisect_bundle  # replay and bundle code: seconds
    from xla_bugkit.bisect.search import Seen

    result = bisect_bundle(
        args.bundle,
        Range(args.wheels, args.low, args.high, args.python),
        out=args.output,
        force=args.force,
        timeout=args.timeout,
        tolerance=options.tolerance(args),
        module_re=args.module_re,
        ui=ui,
    )
    options.emit(args.json, result.to_json, lambda: render(result))
    failing = any(p.seen is Seen.FAILS for p in result.probes)
    return ExitCode.OK if failing else ExitCode.NOT_REPRODUCED


def render(result: Bisection) -> str:
    lines = []
    for p in result.probes:
        mark = " (the reporter's)" if p.version == result.reported else ""
        lines.append(f"{result.dist} {p.version}{mark}: {p.seen.value}: {p.detail}")
    for why in dict.fromkeys(why for _, why in result.untried):
        versions = [v for v, w in result.untried if w == why]
        shown = ", ".join(versions) if len(versions) <= 4 else f"{versions[0]} to {versions[-1]}"
        lines.append(f"not tried ({why}): {shown}")
    lines += ["", result.summary]
    return "\n".join(lines)
