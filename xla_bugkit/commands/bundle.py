"""``xla-bugkit bundle WORKDIR``: a bundle made again from a work dir that collect kept.

The program does not run again: a run that took hours is bundled with other options
(another ``--module``, ``--no-data``), or once the disk that was full has room.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.collecting import CollectOptions, rebundle
from xla_bugkit.commands._summary import render_summary
from xla_bugkit.ui import Ui


def options_from(args: argparse.Namespace, defaults: config.Config) -> CollectOptions:
    """``CollectOptions`` from the parsed command line, over the user's config defaults."""
    fmt = args.format or (None if args.output else defaults.format)
    max_size = args.max_size if args.max_size is not None else config.parse_size(defaults.max_size)
    return CollectOptions(
        output=args.output or Path(f"bundle.{args.format or defaults.format}"),
        fmt=fmt, replay_timeout=args.replay_timeout, module_re=args.module_re, budget=args.budget,
        symbol=args.symbol, replay=args.replay, data=args.data, repo=args.repo,
        max_size=max_size, force=args.force,
    )  # fmt: skip


def bundle_command(workdir: Path, options: CollectOptions, ui: Ui) -> int:
    """CLI: bundle the run kept in ``workdir``, then print the same summary as collect."""
    result = rebundle(workdir, options, ui)
    ui.summary(render_summary(result, repo=options.repo, verbose=ui.verbosity > 0))
    return int(result.exit_code)
