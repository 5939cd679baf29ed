"""``xla-bugkit collect -- CMD``: rerun a failing program with XLA dumps on and bundle what
failed; its own options (how the program runs, what the bundle adds) beside the bundle's,
which ``bundle`` shares (``_bundle_options``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import config
from xla_bugkit.cli import options
from xla_bugkit.cli.commands._bundle_options import add_bundle_options, collect_options
from xla_bugkit.proc import leftovers
from xla_bugkit.run import job_end
from xla_bugkit.ui import Ui

if TYPE_CHECKING:  # the pipeline: imported by ``run``, not by the parser every command builds
    from xla_bugkit.collecting.options import CollectOptions

HELP = "rerun a failing program with XLA dumps on and write a bug bundle"
DESCRIPTION = (
    "Rerun CMD with XLA dumps on, pick the modules that matter, prove by replay that they "
    "reproduce the failure, and write a bundle."
)
EPILOG = """\
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

# What only ``collect`` asks: how the program runs and what the bundle adds.
_RUN_OPTIONS = (
    "timeout", "workdir", "keep_workdir", "always", "include_source", "shrink", "bisect",
    "wheels", "bisect_python", "snapshots", "max_dump_size", "dump_passes", "job_grace",
)  # fmt: skip


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bundle_options(p)
    p.add_argument(
        "--timeout",
        type=options.duration,
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
        "PMI_RANK, TPU_WORKER_ID). A part keeps XLA's snapshot of every execution by "
        "default: it cannot run again without its job",
    )
    p.add_argument(
        "--job-grace",
        type=options.duration,
        default=job_end.GRACE,
        metavar="DURATION",
        help="a job's part whose output shows that its job ended it (another process failed: "
        "a collective lost its peer, the coordination service's error) is ended this long "
        f"after, not at jax's heartbeat timeout (default {job_end.GRACE:g}s)",
    )
    p.add_argument(
        "--shrink",
        nargs="?",
        type=options.duration_text,
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
        type=options.size,
        default=config.MAX_DUMP_SIZE,
        metavar="SIZE",
        help="the most disk the run's inputs may take, e.g. 500M (default 2GB)",
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


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Run the pipeline on the command after ``--``, then print what was chosen, the
    verdicts and what next."""
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        return options.usage_error(
            "nothing to run: give the command after --, e.g. collect -- python x.py"
        )
    from xla_bugkit.collecting import job

    defaults = config.load()
    part = job.parse(args.job_part) if args.job_part else job.detect(os.environ)
    chosen = collect_options(
        args, defaults, job_part=part, **{name: getattr(args, name) for name in _RUN_OPTIONS}
    )
    # This process is all ours: every temp file it makes goes in one folder, which the next
    # collect removes should this one be killed.
    with leftovers.temp_folder():
        return _collect(command, chosen, ui)


def _collect(command: Sequence[str], chosen: CollectOptions, ui: Ui) -> int:
    from xla_bugkit.collecting import collect

    result = collect(command, chosen, ui)
    # The summary reads the bundle's code, imported while the program ran (``warm``).
    from xla_bugkit.cli.commands._summary import kept_lines, render_summary

    ui.summary(render_summary(result, verbose=ui.verbosity > 0, quiet=ui.verbosity < 0))
    if kept := kept_lines(result):
        ui.summary("\n".join(kept))
    return int(result.exit_code)
