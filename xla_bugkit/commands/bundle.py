"""``xla-bugkit bundle WORKDIR``: a bundle made again from a work dir that collect kept.

The program does not run again: a run that took hours is bundled with other options
(another ``--module``, ``--no-data``), or once the disk that was full has room.
"""

from __future__ import annotations

from pathlib import Path

from xla_bugkit.collecting import CollectOptions, rebundle
from xla_bugkit.commands._summary import render_summary
from xla_bugkit.ui import Ui


def bundle_command(workdir: Path, options: CollectOptions, ui: Ui) -> int:
    """CLI: bundle the run kept in ``workdir``, then print the same summary as collect."""
    result = rebundle(workdir, options, ui)
    ui.summary(render_summary(result, verbose=ui.verbosity > 0, quiet=ui.verbosity < 0))
    return int(result.exit_code)
