"""The command line of ``collect`` and ``bundle``: the run's options, the bundle's, and the
``CollectOptions`` they make."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import config
from xla_bugkit.cli import options as opts

if TYPE_CHECKING:
    from xla_bugkit.collecting import CollectOptions

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


def add_collect(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = opts.subcommand(
        sub,
        "collect",
        help="rerun a failing program with XLA dumps on and write a bug bundle",
        description="Rerun CMD with XLA dumps on, pick the modules that matter, prove by "
        "replay that they reproduce the failure, and write a bundle.",
        epilog=COLLECT_EPILOG,
    )
    add_bundle_options(p)
    p.add_argument(
        "--timeout",
        type=opts.duration,
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
        "--job-part",
        metavar="I/N",
        help="this collect runs part I (from 0) of a job of N processes on several machines: "
        "the bundle's name says so (bundle.part-I-of-N.zip), so parts never write over each "
        "other (default: from the launcher, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK, "
        "PMI_RANK, TPU_WORKER_ID)",
    )
    p.add_argument(
        "--shrink",
        nargs="?",
        type=opts.duration_text,
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
        type=opts.size,
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


def add_bundle_options(p: argparse.ArgumentParser) -> None:
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
        type=opts.duration,
        metavar="DURATION",
        default=config.REPLAY_TIMEOUT,
        help="seconds one module's replay may take (default %(default)g)",
    )
    p.add_argument(
        "--budget",
        type=opts.duration,
        default=config.SEARCH_BUDGET,
        metavar="DURATION",
        help="for a wrong result: seconds to spend replaying modules against "
        "the op-by-op reference to find the one that differs "
        "(default %(default)g)",
    )
    p.add_argument(
        "--module",
        dest="module_re",
        type=opts.regex,
        metavar="REGEX",
        help="bundle the modules whose name matches",
    )
    p.add_argument("--symbol", metavar="TEXT", help="bundle the modules whose HLO contains TEXT")
    p.add_argument(
        "--max-size",
        type=opts.size,
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
    opts.add_tolerance(p)
    p.add_argument("--no-replay", dest="replay", action="store_false", help="skip the replay")
    p.add_argument(
        "--no-data",
        dest="data",
        action="store_false",
        help="leave the real inputs (snapshots) out of the bundle",
    )


def add_bundle(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = opts.subcommand(
        sub,
        "bundle",
        help="make a bundle again from a work dir that collect kept",
        description="Index, choose, replay and bundle the run kept in WORKDIR again, with "
        "new options; the program does not run again.",
        epilog=BUNDLE_EPILOG,
    )
    p.add_argument("workdir", type=Path, help="the work dir collect kept")
    add_bundle_options(p)


def collect_options(args: argparse.Namespace, defaults: config.Config) -> CollectOptions:
    """``CollectOptions`` from a parsed ``collect`` or ``bundle`` command line, over the
    user's config defaults (``bundle`` has no run options: they keep their defaults)."""
    from xla_bugkit.collecting import CollectOptions

    fmt = args.format or (None if args.output else defaults.format)
    max_size = args.max_size if args.max_size is not None else config.parse_size(defaults.max_size)
    run = {name: getattr(args, name) for name in _RUN_OPTIONS} if args.command == "collect" else {}
    output = args.output or Path(f"bundle.{args.format or defaults.format}")
    part = None
    if args.command == "collect":
        from xla_bugkit.collecting import job

        part = job.parse(args.job_part) if args.job_part else job.detect(os.environ)
        output = job.part_output(output, part) if part is not None else output
    return CollectOptions(
        output=output,
        job_part=part,
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
        tolerance=opts.tolerance(args),
        **run,
    )


# What only ``collect`` asks: how the program runs and what the bundle adds.
_RUN_OPTIONS = (
    "timeout", "workdir", "keep_workdir", "always", "include_source", "shrink", "bisect",
    "wheels", "bisect_python", "snapshots", "max_dump_size", "dump_passes",
)  # fmt: skip
