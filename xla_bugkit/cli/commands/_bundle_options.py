"""The options ``collect`` and ``bundle`` share (the bundle's: its output, format, size
budget, the module's choice and the replay), and the one builder of ``CollectOptions`` from
a parsed command line: both commands read them here, neither from the other."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xla_bugkit import config
from xla_bugkit.cli import options

if TYPE_CHECKING:  # the pipeline's options: imported by the command that runs, not the parser
    from xla_bugkit.collecting import job
    from xla_bugkit.collecting.options import CollectOptions


def add_bundle_options(p: argparse.ArgumentParser) -> None:
    """The options of the bundle itself, which collect and bundle share."""
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="the bundle to write: .7z, .zip or .tar.gz (default: bundle.7z, or "
        "the format set in the user config file)",
    )
    p.add_argument("--format", choices=config.FORMATS, help="archive format")
    options.add_force(p)
    p.add_argument(
        "--replay-timeout",
        type=options.duration,
        metavar="DURATION",
        default=config.REPLAY_TIMEOUT,
        help="seconds one module's replay may take (default %(default)g)",
    )
    p.add_argument(
        "--budget",
        type=options.duration,
        default=config.SEARCH_BUDGET,
        metavar="DURATION",
        help="for a wrong result: seconds to spend replaying modules against "
        "the op-by-op reference to find the one that differs "
        "(default %(default)g)",
    )
    options.add_module(p, "bundle the modules whose name matches", metavar="REGEX")
    p.add_argument("--symbol", metavar="TEXT", help="bundle the modules whose HLO contains TEXT")
    p.add_argument(
        "--max-size",
        type=options.size,
        metavar="SIZE",
        help=f"size budget of the bundle, e.g. 10M or 500k; bytes only with B, as in 800B "
        f"(default {config.Config.max_size}, GitHub's limit)",
    )
    p.add_argument(
        "--repo",
        default=None,
        help="where to file (default: the framework's tracker, jax-ml/jax, "
        "tensorflow/tensorflow or pytorch/xla; openxla/xla when a jaxlib replay "
        "of a TensorFlow or PyTorch/XLA module reproduces it)",
    )
    options.add_tolerance(p)
    p.add_argument("--no-replay", dest="replay", action="store_false", help="skip the replay")
    p.add_argument(
        "--no-data",
        dest="data",
        action="store_false",
        help="leave the real inputs (snapshots) out of the bundle",
    )


def collect_options(
    args: argparse.Namespace,
    defaults: config.Config,
    *,
    job_part: job.JobPart | None = None,
    **run: Any,
) -> CollectOptions:
    """``CollectOptions`` from the bundle's options (``add_bundle_options``) of a parsed
    command line, over the user's config defaults; ``job_part`` and ``run`` are what only
    ``collect`` asks (``bundle`` leaves them at their defaults)."""
    from xla_bugkit.collecting import job
    from xla_bugkit.collecting.options import CollectOptions

    output = args.output or Path(f"bundle.{args.format or defaults.format}")
    max_size = args.max_size if args.max_size is not None else config.parse_size(defaults.max_size)
    return CollectOptions(
        output=job.part_output(output, job_part) if job_part is not None else output,
        job_part=job_part,
        fmt=args.format or (None if args.output else defaults.format),
        replay_timeout=args.replay_timeout,
        module_re=args.module_re,
        symbol=args.symbol,
        budget=args.budget,
        replay=args.replay,
        data=args.data,
        repo=args.repo,
        force=args.force,
        max_size=max_size,
        tolerance=options.tolerance(args),
        **run,
    )
