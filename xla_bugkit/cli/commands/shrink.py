"""``xla-bugkit shrink BUNDLE|DUMP_DIR``: the smallest module that still fails, the pass or
flag behind it, and flags that work around it, written as a new bundle."""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.cli import options
from xla_bugkit.errors import BugkitError
from xla_bugkit.ui import Ui

HELP = "shrink a failing module, and find the pass or flag behind it"
DESCRIPTION = (
    "Shrink the failing module of a bundle (or dump folder) to the smallest module that fails "
    "the same way, find the flags it needs, the HLO pass behind it and flags that work around "
    "it; write a bundle that keeps the original module and adds the shrunk one."
)
EPILOG = """\
examples:
  xla-bugkit shrink bug.zip
  xla-bugkit shrink bug.zip -o small.zip --budget 5m --only module,passes
  xla-bugkit shrink dump/ --module jit_train_step
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", type=Path, metavar="BUNDLE|DUMP_DIR", help="what to shrink")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="the bundle to write (default: NAME.shrunk.zip beside it; .tar.gz for a .tar.gz)",
    )
    options.add_module(p, "shrink the module whose label matches REGEX")
    p.add_argument(
        "--budget",
        type=options.duration_text,
        default="10m",
        help="wall time for probes, e.g. 10m, 90s (default %(default)s)",
    )
    p.add_argument(
        "--max-probes",
        type=int,
        default=1000,
        metavar="N",
        help="at most this many probes (default %(default)s)",
    )
    p.add_argument(
        "--only",
        default="flags,module,passes",
        metavar="STAGES",
        help="the stages to run, of flags,module,passes (default: all)",
    )
    options.add_timeout(p, "how long each confirming replay may take (default %(default)g s)")
    p.add_argument(
        "--probe-timeout",
        type=options.duration,
        metavar="DURATION",
        help="seconds each probe may take (default: five times the unmodified "
        "module's probe, at least 10)",
    )
    options.add_force(p)
    options.add_json(p, "print the shrink record as JSON")


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Shrink, write the bundle, print the findings (or ``--json``, the shrink record)."""
    from xla_bugkit.shrink.run import default_output, parse_only, shrink_bundle, shrink_dump
    from xla_bugkit.shrink.shrinker import ShrinkOptions

    target: Path = args.target
    if args.max_probes < 1:
        raise BugkitError("--max-probes must be at least 1")
    if args.probe_timeout is not None and not args.probe_timeout > 0:
        raise BugkitError("--probe-timeout must be a number of seconds above 0")
    shrink_options = ShrinkOptions(
        budget=config.parse_budget(args.budget),
        max_probes=args.max_probes,
        stages=parse_only(args.only),
        timeout=args.timeout,
        probe_timeout=args.probe_timeout,
    )
    if not target.exists():
        raise BugkitError(f"{target} does not exist")
    out = args.output or default_output(target)
    shrink = shrink_dump if target.is_dir() else shrink_bundle
    written = shrink(
        target, out, module_re=args.module_re, options=shrink_options, force=args.force, ui=ui
    )
    options.emit(
        args.json,
        lambda: {**written.result.record(), "bundle": str(out), "verified": written.verified},
        lambda: "\n".join([*written.result.findings(), f"bundle: {out}"]),
    )
    return written.exit_code
