"""``xla-bugkit collect -- CMD``: the command line of the collect pipeline, and its summary."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from xla_bugkit import config, leftovers
from xla_bugkit.collecting import CollectOptions, collect
from xla_bugkit.ui import Ui


def options_from(args: argparse.Namespace, defaults: config.Config) -> CollectOptions:
    """``CollectOptions`` from the parsed command line, over the user's config defaults."""
    fmt = args.format or (None if args.output else defaults.format)
    return CollectOptions(
        output=args.output or Path(f"bundle.{args.format or defaults.format}"),
        fmt=fmt, timeout=args.timeout,
        replay_timeout=args.replay_timeout, module_re=args.module_re, symbol=args.symbol,
        budget=args.budget,
        workdir=args.workdir, keep_workdir=args.keep_workdir, always=args.always,
        replay=args.replay, data=args.data, repo=args.repo, force=args.force,
        include_source=args.include_source, shrink=getattr(args, "shrink", None),
        max_size=args.max_size if args.max_size is not None
        else config.parse_size(defaults.max_size),
    )  # fmt: skip


def collect_command(command: Sequence[str], options: CollectOptions, ui: Ui) -> int:
    """CLI: run the pipeline, then print what was chosen, the verdicts and what next."""
    if options.shrink is not None:
        # Imported here: shrink pulls in ml_dtypes (~1 s), which a collect without it never needs.
        from xla_bugkit.shrink.run import parse_budget

        parse_budget(options.shrink)  # a mistake must stop the run before it starts
    # This process is all ours: every temp file it makes goes in one folder, which the next
    # collect removes should this one be killed.
    with leftovers.temp_folder():
        return _collect(command, options, ui)


def _collect(command: Sequence[str], options: CollectOptions, ui: Ui) -> int:
    result = collect(command, options, ui)
    from xla_bugkit.commands._summary import kept_lines, render_summary  # after the run: see warm

    ui.summary(render_summary(result, repo=options.repo, verbose=ui.verbosity > 0))
    if kept := kept_lines(result):
        ui.summary("\n".join(kept))
    if options.shrink is not None and result.bundle is not None and result.exit_code == 0:
        from xla_bugkit.collecting import shrink_written

        shrink_written(result.bundle, options, ui)
    return int(result.exit_code)
