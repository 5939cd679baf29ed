"""The command line's grammar: every subcommand, its options, its help and examples.

``main`` parses with it and dispatches; each command's work is in ``xla_bugkit.commands``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit import __version__, config
from xla_bugkit.cli import collect
from xla_bugkit.cli import options as opts

DESCRIPTION = """\
Turn a failing JAX/XLA program into a replayable bug bundle, and verify one.

examples:
  xla-bugkit collect -- python train.py
  xla-bugkit collect -o bug.zip --timeout 600 -- python train.py --steps 10
  xla-bugkit verify bundle.7z
  xla-bugkit replay dump/module_0006.jit_train_step.before_optimizations.hlo.pb
  xla-bugkit show bundle.7z
"""


VERIFY_EPILOG = """\
examples:
  xla-bugkit verify bundle.7z
  xla-bugkit verify --json bug.zip > verdicts.json
  xla-bugkit verify bug/
      a bundle unpacked by hand (unzip bug.zip -d bug): checked as its archive is
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
    collect.add_collect(sub)
    collect.add_bundle(sub)
    _add_verify(sub)
    _add_replay(sub)
    _add_show(sub)
    _add_repack(sub)
    _add_shrink(sub)
    _add_bisect(sub)
    _add_convert(sub)
    _add_cache(sub)
    _add_doctor(sub)
    return p


def _add_verify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = opts.subcommand(
        sub,
        "verify",
        help="check a bundle's integrity and replay it here",
        description="Unpack a bundle safely, check every file against the manifest, replay "
        "its modules, and say whether the recorded failure reproduces on this machine.",
        epilog=VERIFY_EPILOG,
    )
    p.add_argument(
        "bundle", type=Path, help="a .7z, .zip or .tar.gz bundle, or a folder one is unpacked into"
    )
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
        type=opts.duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long each module's replay may take (default %(default)g s)",
    )
    opts.add_tolerance(p)
    opts.add_fake_data(p)


def _add_replay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = opts.subcommand(
        sub,
        "replay",
        help="replay one dumped module (run_hlo_module without Bazel)",
        description="Compile and run a dumped HLO module in a child process, compare it with "
        "an op-by-op reference and its recorded result, and print the verdict.",
        epilog=REPLAY_EPILOG,
    )
    p.add_argument("target", type=Path, help="a before_optimizations.hlo.pb file or a dump dir")
    p.add_argument(
        "--module", dest="module_re", type=opts.regex, metavar="REGEX", help="module in a dump dir"
    )
    p.add_argument("--snapshot", type=Path, help="an HloSnapshot with the inputs to use")
    p.add_argument(
        "--platform",
        choices=("cpu", "gpu", "tpu"),
        help="replay on this platform (default: the one the dump was written on, from its "
        "files; a TPU's modules need a TPU, and their Pallas kernels run nowhere else)",
    )
    p.add_argument(
        "--flags",
        default="",
        metavar='"--xla_a=1 ..."',
        help="XLA flags that replace every recorded one (the module's debug options "
        "and those in its compile_options.pb); quote them",
    )
    p.add_argument(
        "--timeout",
        type=opts.duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long the replay may take (default %(default)g s)",
    )
    opts.add_tolerance(p)
    opts.add_fake_data(p)
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
    p = opts.subcommand(
        sub,
        "show",
        help="list what a bundle shares, without extracting it",
        description="Print a bundle's failure, modules, notes and every file with its size, "
        "reading the archive in place.",
        epilog="examples:\n  xla-bugkit show bundle.7z\n  xla-bugkit show --json bug.zip\n"
        "  xla-bugkit show bundle.7z --graph module.html\n"
        "      draw the shrunk module (or the chosen one) as a page that renders its graph",
    )
    p.add_argument(
        "bundle", type=Path, help="a .7z, .zip or .tar.gz bundle, or a folder one is unpacked into"
    )
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.add_argument("--issue", action="store_true", help="print the bundle's ISSUE.md")
    p.add_argument("--graph", type=Path, metavar="OUT",
                   help="write a module's graph to OUT (.html, or .dot for Graphviz)")  # fmt: skip
    p.add_argument("--module", dest="module_re", type=opts.regex, metavar="RE",
                   help="with --graph: the module whose label matches RE")  # fmt: skip
    p.add_argument("--force", action="store_true", help="with --graph: replace OUT")


def _add_repack(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = opts.subcommand(
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
    p = opts.subcommand(
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
        type=opts.regex,
        metavar="RE",
        help="shrink the module whose label matches RE",
    )
    p.add_argument(
        "--budget",
        type=opts.duration_text,
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
        type=opts.duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long each confirming replay may take (default %(default)g s)",
    )
    p.add_argument(
        "--probe-timeout",
        type=opts.duration,
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

    p = opts.subcommand(
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
        type=opts.regex,
        metavar="RE",
        help="bisect the module whose label matches RE",
    )
    p.add_argument(
        "--timeout",
        type=opts.duration,
        default=config.REPLAY_TIMEOUT,
        metavar="DURATION",
        help="how long each release's replay may take (default %(default)g s)",
    )
    opts.add_tolerance(p)


def _add_convert(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from xla_bugkit.commands import convert

    p = opts.subcommand(
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

    p = opts.subcommand(
        sub,
        "cache",
        help="the jaxlib releases bisect keeps unpacked: list them, or --clear",
        description="List the jaxlib releases that bisect and verify --jaxlib keep unpacked, "
        "with their size and last use, or remove them.",
        epilog=cache.EPILOG,
    )
    cache.add_arguments(p)


def _add_doctor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from xla_bugkit.commands import doctor

    p = opts.subcommand(
        sub,
        "doctor",
        help="check that the installation is whole: modules, data files, dependencies",
        description="Import every module of xla-bugkit, look for every data file it reads, and "
        "print the versions of its dependencies; say what is missing and how to reinstall.",
        epilog=doctor.EPILOG,
    )
    doctor.add_arguments(p)
