"""``xla-bugkit collect -- CMD``: the command line of the collect pipeline, and its summary."""

from __future__ import annotations

from collections.abc import Sequence

from xla_bugkit.collecting import CollectOptions, collect
from xla_bugkit.proc import leftovers
from xla_bugkit.ui import Ui


def collect_command(command: Sequence[str], options: CollectOptions, ui: Ui) -> int:
    """CLI: run the pipeline, then print what was chosen, the verdicts and what next."""
    # This process is all ours: every temp file it makes goes in one folder, which the next
    # collect removes should this one be killed.
    with leftovers.temp_folder():
        return _collect(command, options, ui)


def _collect(command: Sequence[str], options: CollectOptions, ui: Ui) -> int:
    result = collect(command, options, ui)
    from xla_bugkit.commands._summary import kept_lines, render_summary  # after the run: see warm

    ui.summary(render_summary(result, verbose=ui.verbosity > 0, quiet=ui.verbosity < 0))
    if kept := kept_lines(result):
        ui.summary("\n".join(kept))
    return int(result.exit_code)
