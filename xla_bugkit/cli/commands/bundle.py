"""``xla-bugkit bundle WORKDIR``: a bundle made again from a work dir that collect kept.

The program does not run again: a run that took hours is bundled with other options
(another ``--module``, ``--no-data``), or once the disk that was full has room.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.cli.commands._bundle_options import add_bundle_options, collect_options
from xla_bugkit.ui import Ui

HELP = "make a bundle again from a work dir that collect kept"
DESCRIPTION = (
    "Index, choose, replay and bundle the run kept in WORKDIR again, with new options; the "
    "program does not run again."
)
EPILOG = """\
examples:
  xla-bugkit collect --keep-workdir --workdir run1 -- python train.py
  xla-bugkit bundle run1 -o other.zip --module jit_train_step
      bundle the same run again, choosing another module, without running it again
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workdir", type=Path, help="the work dir collect kept")
    add_bundle_options(p)


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Bundle the run kept in the work dir, then print the same summary as collect."""
    from xla_bugkit.cli.commands._summary import render_summary
    from xla_bugkit.collecting import rebundle

    result = rebundle(args.workdir, collect_options(args, config.load()), ui)
    ui.summary(render_summary(result, verbose=ui.verbosity > 0, quiet=ui.verbosity < 0))
    return int(result.exit_code)
