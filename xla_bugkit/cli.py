"""The command line's grammar: every subcommand, its options, its help and examples.

``main`` parses with it and dispatches; each command's work is in ``xla_bugkit.commands``.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import __version__, config
from xla_bugkit.errors import exit_codes_help

if TYPE_CHECKING:
    from xla_bugkit.collecting import CollectOptions
    from xla_bugkit.replay.tolerance import Tolerance

DESCRIPTION = """\
Turn a failing JAX/XLA program into a replayable bug bundle, and verify one.

examples:
  xla-bugkit collect -- python train.py
  xla-bugkit collect -o bug.zip --timeout 600 -- python train.py --steps 10
  xla-bugkit verify bundle.7z
  xla-bugkit replay dump/module_0006.jit_train_step.before_optimizations.hlo.pb
  xla-bugkit show bundle.7z
"""

COLLECT_EPILOG = """\
examples:
  xla-bugkit collect -- python train.py
      rerun train.py with XLA dumps on; write bundle.7z
  xla-bugkit collect -o bug.zip -- python train.py
      a .zip, which GitHub accepts as an attachment
  xla-bugkit collect --module 'jit_train_step' --timeout 900 -- bash run.sh
      choose the module yourself; stop the run (and bundle what exists) after 15 minutes
  xla-bugkit collect --symbol 'custom_call_target="my_kernel"' -- python train.py
      choose the modules whose HLO contains the text
"""

BUNDLE_EPILOG = """\
examples:
  xla-bugkit collect --keep-workdir --workdir run1 -- python train.py
  xla-bugkit bundle run1 -o other.zip --module jit_train_step
      bundle the same run again, choosing another module, without running it again
"""

VERIFY_EPILOG = """\
examples:
  xla-bugkit verify bundle.7z
  xla-bugkit verify --json bug.zip > verdicts.json
"""

REPLAY_EPILOG = """\
examples:
  xla-bugkit replay dump/module_0006.jit_train_step.before_optimizations.hlo.pb
  xla-bugkit replay dump/ --module jit_train_step --flags "--xla_cpu_enable_fast_math=true"
  xla-bugkit replay m.before_optimizations.hlo.pb --snapshot m.snapshot.123.pb
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="xla-bugkit",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"xla-bugkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_collect(sub)
    _add_bundle(sub)
    _add_verify(sub)
    _add_replay(sub)
    _add_show(sub)
    _add_repack(sub)
    _add_shrink(sub)
    _add_bisect(sub)
    _add_convert(sub)
    _add_cache(sub)
    return p


def _size(text: str) -> int:
    """ "25MB", "500kB", "1GB" or a number of bytes."""
    try:
        return config.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _subcommand(
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


def _add_collect(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "collect",
        help="rerun a failing program with XLA dumps on and write a bug bundle",
        description="Rerun CMD with XLA dumps on, pick the modules that matter, prove by "
        "replay that they reproduce the failure, and write a bundle.",
        epilog=COLLECT_EPILOG,
    )
    _add_bundle_options(p)
    p.add_argument(
        "--timeout",
        type=_duration,
        metavar="DURATION",
        help="stop the program after this long (90, 90s, 2m, 1h)",
    )
    p.add_argument("--workdir", type=Path, help="where dumps go (default: the user cache dir)")
    p.add_argument(
        "--keep-workdir",
        action="store_true",
        help="keep the dumps afterwards (xla-bugkit bundle reads them)",
    )
    p.add_argument("--always", action="store_true", help="bundle even if the program succeeds")
    p.add_argument(
        "--shrink",
        nargs="?",
        type=_duration_text,
        const="10m",
        metavar="BUDGET",
        help="then shrink the failing module into the bundle (xla-bugkit shrink), "
        "within BUDGET (default 10m)",
    )
    p.add_argument(
        "--snapshots",
        choices=("first", "every"),
        help="real inputs kept: each compiled function's first call (cost does not grow with "
        "the run's length), or XLA's snapshot of every execution (for a failure that needs "
        "later values; slower, pruned to each module's first and newest). Default: first, "
        "and the program runs again with every when a wrong result does not show on them",
    )
    p.add_argument(
        "--max-dump-size",
        type=_size,
        default=config.MAX_DUMP_SIZE,
        metavar="SIZE",
        help="the most disk the run's inputs may take, e.g. 500MB (default 2GB)",
    )
    p.add_argument(
        "--dump-passes",
        metavar="REGEX",
        help="have XLA dump the module around each HLO pass whose name REGEX matches "
        "(--xla_dump_hlo_pass_re), and bundle the chosen module's, the last before the "
        "failure first; '.*' for every pass",
    )
    p.add_argument(
        "--bisect",
        action="store_true",
        help="then replay the bundle under other jaxlib releases (xla-bugkit bisect): "
        "does it still fail on the newest, and since which release",
    )
    p.add_argument(
        "--wheels",
        type=Path,
        metavar="DIR",
        help="with --bisect: take the releases from the wheels in DIR, not the package index",
    )
    p.add_argument(
        "--bisect-python",
        metavar="PATH",
        help="with --bisect: another Python interpreter (python3.12), for the releases built "
        "only for newer Pythons than this one",
    )
    p.add_argument(
        "--include-source",
        action="store_true",
        help="add the command's script (python train.py: train.py), redacted, "
        "to the bundle; off by default",
    )
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the program to run, after --"
    )


def _add_bundle_options(p: argparse.ArgumentParser) -> None:
    """The options of the bundle itself, which collect and bundle share."""
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="the bundle to write: .7z, .zip or .tar.gz (default: bundle.7z, or "
        "the format set in the user config file)",
    )
    p.add_argument("--format", choices=config.FORMATS, help="archive format")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output that is not an xla-bugkit bundle",
    )
    p.add_argument(
        "--replay-timeout",
        type=_duration,
        metavar="DURATION",
        default=config.REPLAY_TIMEOUT,
        help="seconds one module's replay may take (default %(default)g)",
    )
    p.add_argument(
        "--budget",
        type=_duration,
        default=config.SEARCH_BUDGET,
        metavar="DURATION",
        help="for a wrong result: seconds to spend replaying modules against "
        "the op-by-op reference to find the one that differs "
        "(default %(default)g)",
    )
    p.add_argument(
        "--module",
        dest="module_re",
        type=_regex,
        metavar="REGEX",
        help="bundle the modules whose name matches",
    )
    p.add_argument("--symbol", metavar="TEXT", help="bundle the modules whose HLO contains TEXT")
    p.add_argument(
        "--max-size",
        type=_size,
        metavar="SIZE",
        help=f"size budget of the bundle, e.g. 10MB (default {config.Config.max_size}, "
        "GitHub's limit)",
    )
    p.add_argument(
        "--repo",
        default=None,
        help="where to file (default: the framework's tracker, jax-ml/jax, "
        "tensorflow/tensorflow or pytorch/xla; openxla/xla when a jaxlib replay "
        "of a TensorFlow or PyTorch/XLA module reproduces it)",
    )
    _add_tolerance(p)
    p.add_argument("--no-replay", dest="replay", action="store_false", help="skip the replay")
    p.add_argument(
        "--no-data",
        dest="data",
        action="store_false",
        help="leave the real inputs (snapshots) out of the bundle",
    )


def _add_tolerance(p: argparse.ArgumentParser) -> None:
    """--rtol and --atol: how far a replay's output may be from its reference."""
    p.add_argument(
        "--rtol",
        type=_tolerance,
        default=None,
        metavar="X",
        help="relative error an output may have against its reference before it is a "
        "wrong result (default 1e-3)",
    )
    p.add_argument(
        "--atol",
        type=_tolerance,
        default=None,
        metavar="X",
        help="absolute error an output may have, as it is (default: 1e-3 scaled to the "
        "reference's values when they are small, never under 8 units in the last place)",
    )


def _add_fake_data(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fake-data",
        action="store_true",
        help="replay on generated inputs even where real ones were recorded "
        "(run_hlo_module's --force_fake_data)",
    )


def _duration(text: str) -> float:
    """A duration of the one grammar (``config.parse_duration``), as seconds."""
    seconds = config.parse_duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (90, 90s, 2m or 1h)")
    return seconds


def _duration_text(text: str) -> str:
    """A duration as written (``--shrink``, shrink's ``--budget``), once checked."""
    _duration(text)
    return text


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({e})") from None
    return text


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more: {text!r}")
    return value


def tolerance(args: argparse.Namespace) -> Tolerance:
    """The tolerance --rtol/--atol ask for (the defaults for what they leave out)."""
    from xla_bugkit.replay.tolerance import REL_BOUND, Tolerance

    rtol = args.rtol if args.rtol is not None else REL_BOUND
    return Tolerance(rtol=rtol, atol=args.atol)


def _add_bundle(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "bundle",
        help="make a bundle again from a work dir that collect kept",
        description="Index, choose, replay and bundle the run kept in WORKDIR again, with "
        "new options; the program does not run again.",
        epilog=BUNDLE_EPILOG,
    )
    p.add_argument("workdir", type=Path, help="the work dir collect kept")
    _add_bundle_options(p)


def _add_verify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "verify",
        help="check a bundle's integrity and replay it here",
        description="Unpack a bundle safely, check every file against the manifest, replay "
        "its modules, and say whether the recorded failure reproduces on this machine.",
        epilog=VERIFY_EPILOG,
    )
    p.add_argument("bundle", type=Path, help="a .7z, .zip or .tar.gz bundle")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON on stdout")
    from xla_bugkit.commands.bisect import add_range_options, release_number

    p.add_argument(
        "--jaxlib",
        type=release_number,
        metavar="VERSION",
        help="replay under this jaxlib release (downloaded through pip once, then cached)",
    )
    add_range_options(p)
    p.add_argument(
        "--timeout",
        type=_duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long each module's replay may take (default %(default)g s)",
    )
    _add_tolerance(p)
    _add_fake_data(p)


def _add_replay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "replay",
        help="replay one dumped module (run_hlo_module without Bazel)",
        description="Compile and run a dumped HLO module in a child process, compare it with "
        "an op-by-op reference and its recorded result, and print the verdict.",
        epilog=REPLAY_EPILOG,
    )
    p.add_argument("target", type=Path, help="a before_optimizations.hlo.pb file or a dump dir")
    p.add_argument(
        "--module", dest="module_re", type=_regex, metavar="REGEX", help="module in a dump dir"
    )
    p.add_argument("--snapshot", type=Path, help="an HloSnapshot with the inputs to use")
    p.add_argument(
        "--flags",
        default="",
        metavar='"--xla_a=1 ..."',
        help="XLA flags that replace every recorded one (the module's debug options "
        "and those in its compile_options.pb); quote them",
    )
    p.add_argument(
        "--timeout",
        type=_duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long the replay may take (default %(default)g s)",
    )
    _add_tolerance(p)
    _add_fake_data(p)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")


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


def _add_show(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "show",
        help="list what a bundle shares, without extracting it",
        description="Print a bundle's failure, modules, notes and every file with its size, "
        "reading the archive in place.",
        epilog="examples:\n  xla-bugkit show bundle.7z\n  xla-bugkit show --json bug.zip\n"
        "  xla-bugkit show bundle.7z --graph module.html\n"
        "      draw the shrunk module (or the chosen one) as a page that renders its graph",
    )
    p.add_argument("bundle", type=Path, help="a .7z, .zip or .tar.gz bundle")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.add_argument("--issue", action="store_true", help="print the bundle's ISSUE.md")
    p.add_argument("--graph", type=Path, metavar="OUT",
                   help="write a module's graph to OUT (.html, or .dot for Graphviz)")  # fmt: skip
    p.add_argument("--module", dest="module_re", type=_regex, metavar="RE",
                   help="with --graph: the module whose label matches RE")  # fmt: skip
    p.add_argument("--force", action="store_true", help="with --graph: replace OUT")


def _add_repack(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "repack",
        help="write a bundle again in another format (GitHub accepts .zip, not .7z)",
        description="Unpack a bundle safely, check it against its manifest, and write it "
        "again in the format OUT's name asks for.",
        epilog="examples:\n  xla-bugkit repack bundle.7z bundle.zip",
    )
    p.add_argument("bundle", type=Path, help="the bundle to read")
    p.add_argument("out", type=Path, help="the bundle to write: .zip, .tar.gz or .7z")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing OUT that is not an xla-bugkit bundle",
    )


def _add_shrink(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _subcommand(
        sub,
        "shrink",
        help="shrink a failing module, and find the pass or flag behind it",
        description="Shrink the failing module of a bundle (or dump folder) to the smallest "
        "module that fails the same way, find the flags it needs, the HLO pass behind it and "
        "flags that work around it; write a bundle that keeps the original module and adds "
        "the shrunk one.",
        epilog="examples:\n  xla-bugkit shrink bug.zip\n"
        "  xla-bugkit shrink bug.zip -o small.zip --budget 5m --only module,passes\n"
        "  xla-bugkit shrink dump/ --module jit_train_step",
    )
    p.add_argument("target", type=Path, metavar="BUNDLE|DUMP_DIR", help="what to shrink")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="the bundle to write (default: NAME.shrunk.zip beside it; .tar.gz for a .tar.gz)",
    )
    p.add_argument(
        "--module",
        dest="module_re",
        type=_regex,
        metavar="RE",
        help="shrink the module whose label matches RE",
    )
    p.add_argument(
        "--budget",
        type=_duration_text,
        default="10m",
        help="wall time for probes, e.g. 10m, 90s (default %(default)s)",
    )
    p.add_argument(
        "--max-probes",
        type=int,
        default=1000,
        help="at most this many probes (default %(default)s)",
    )
    p.add_argument(
        "--only",
        default="flags,module,passes",
        help="the stages to run, of flags,module,passes (default: all)",
    )
    p.add_argument(
        "--timeout",
        type=_duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long each confirming replay may take (default %(default)g s)",
    )
    p.add_argument(
        "--probe-timeout",
        type=_duration,
        metavar="DURATION",
        help="seconds each probe may take (default: five times the unmodified "
        "module's probe, at least 10)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output that is not an xla-bugkit bundle",
    )
    p.add_argument("--json", action="store_true", help="print the shrink record as JSON")


def _add_bisect(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from xla_bugkit.commands import bisect

    p = _subcommand(
        sub,
        "bisect",
        help="replay a bundle under other jaxlib releases: still failing? since when?",
        description="Replay the failing module of a bundle under jaxlib releases from the "
        "package index (or a folder of wheels), and say whether it still fails on the newest "
        "and between which two releases that changed.",
        epilog=bisect.EPILOG,
    )
    bisect.add_arguments(p)
    p.add_argument(
        "--module",
        dest="module_re",
        type=_regex,
        metavar="RE",
        help="bisect the module whose label matches RE",
    )
    p.add_argument(
        "--timeout",
        type=_duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long each release's replay may take (default %(default)g s)",
    )
    _add_tolerance(p)


def _add_convert(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from xla_bugkit.commands import convert

    p = _subcommand(
        sub,
        "convert",
        help="a module from one form to another: HLO text, .hlo.pb, StableHLO, a graph",
        description="Convert a module between HLO text, the .hlo.pb proto, StableHLO (text or "
        "bytecode), metadata-free text for older releases, and a graph (DOT or HTML), as "
        "XLA's hlo-opt does, without Bazel. The input's form is read from its content.",
        epilog=convert.EPILOG,
    )
    convert.add_arguments(p)


def _add_cache(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from xla_bugkit.commands import cache

    p = _subcommand(
        sub,
        "cache",
        help="the jaxlib releases bisect keeps unpacked: list them, or --clear",
        description="List the jaxlib releases that bisect and verify --jaxlib keep unpacked, "
        "with their size and last use, or remove them.",
        epilog=cache.EPILOG,
    )
    cache.add_arguments(p)


def collect_options(args: argparse.Namespace, defaults: config.Config) -> CollectOptions:
    """``CollectOptions`` from a parsed ``collect`` or ``bundle`` command line, over the
    user's config defaults (``bundle`` has no run options: they keep their defaults)."""
    from xla_bugkit.collecting import CollectOptions

    fmt = args.format or (None if args.output else defaults.format)
    max_size = args.max_size if args.max_size is not None else config.parse_size(defaults.max_size)
    run = {name: getattr(args, name) for name in _RUN_OPTIONS} if args.command == "collect" else {}
    return CollectOptions(
        output=args.output or Path(f"bundle.{args.format or defaults.format}"),
        fmt=fmt,
        replay_timeout=args.replay_timeout,
        module_re=args.module_re,
        symbol=args.symbol,
        budget=args.budget,
        replay=args.replay,
        data=args.data,
        repo=args.repo,
        force=args.force,
        max_size=max_size,
        tolerance=tolerance(args),
        **run,
    )


# What only ``collect`` asks: how the program runs and what the bundle adds.
_RUN_OPTIONS = (
    "timeout", "workdir", "keep_workdir", "always", "include_source", "shrink", "bisect",
    "wheels", "bisect_python", "snapshots", "max_dump_size", "dump_passes",
)  # fmt: skip
