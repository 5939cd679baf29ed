"""``xla-bugkit merge PART...``: one bundle from the parts of a job that ran on several machines."""

from __future__ import annotations

import argparse
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.cli import options
from xla_bugkit.ui import Ui, shown

HELP = "one bundle from the parts of a job of several machines (one collect per process)"
DESCRIPTION = (
    "Open the bundles that each process of a jax.distributed job wrote under its own collect "
    "(bundle.part-I-of-N.zip), judge the job by the part that failed inside XLA (among equals, "
    "the one that stopped first), summarise the others, keep the modules several processes "
    "compiled the same way once, replay each module whose inputs it stitched from every "
    "part's shards on them and judge the job again, and write one bundle within the size "
    "budget."
)
EPILOG = """\
examples:
  xla-bugkit merge /shared/run/bundle.part-*.zip
      writes /shared/run/bundle.zip
  xla-bugkit merge -o job.zip /shared/run/
      the part bundles in a folder
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "parts",
        nargs="+",
        type=Path,
        metavar="PART",
        help="a part's bundle (bundle.part-I-of-N.zip), or a folder that holds them",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="the bundle to write (default: the parts' name without the part, "
        "bundle.part-0-of-4.zip -> bundle.zip)",
    )
    p.add_argument("--format", choices=config.FORMATS, help="archive format")
    p.add_argument(
        "--max-size",
        type=options.size,
        default=None,
        metavar="SIZE",
        help=f"size budget of the whole bundle (default {config.Config.max_size}, or the "
        "user config file's); the other parts' modules are left out first",
    )
    options.add_timeout(
        p,
        "how long the replay of each module on its stitched inputs may take "
        "(default %(default)g s)",
    )
    options.add_json(p, "print what was merged as JSON on stdout")
    options.add_force(p)


def run(args: argparse.Namespace, ui: Ui) -> int:
    """Write the merged bundle; exit as collect would for the part it is judged by."""
    from xla_bugkit.bundle.merge import default_output, merge
    from xla_bugkit.bundle.output import check_output
    from xla_bugkit.bundle.parts import part_paths

    paths = part_paths(args.parts)
    out: Path = args.output or default_output(paths)
    fmt = check_output(out, args.format, force=args.force)
    budget = args.max_size
    if budget is None:
        budget = config.parse_size(config.load().max_size)
    with ui.phase(f"merging {len(paths)} parts"):
        merged = merge(paths, out, fmt, max_size=budget, ui=ui, timeout=args.timeout)
    options.emit(
        args.json,
        lambda: {
            "bundle": str(merged.out),
            "size": merged.size,
            "parts": merged.parts,
            "judged_by": merged.failing,
            "exit_code": int(merged.exit_code),
            "failure": merged.manifest["failure"],
            "job": merged.manifest.get("job"),
            "data": merged.manifest["data"],
            "title": merged.manifest["title"],
            "modules": [
                {"label": m["label"], "replay": m["replay"]} for m in merged.manifest["modules"]
            ],
        },
        # The lines quote the parts' headlines: a stranger's text.
        lambda: shown("\n".join(merged.lines)),
    )
    return merged.exit_code
