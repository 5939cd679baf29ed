"""``%xla_bugkit collect [collect options]``: rerun the cells run so far under collect.

The cells go into one script that a fresh Python process runs under ``xla-bugkit collect``
in the notebook's working directory; collect's output streams into the cell. The cells run
are those up to and including the last one that raised since the extension was loaded (all
cells run before the magic's, when none raised).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from xla_bugkit.failure import xla_log
from xla_bugkit.notebook.cells import script

USAGE = "usage: %xla_bugkit collect [collect options, e.g. -o bug.zip]"


class _Failures:
    """Which executions raised, from IPython's ``post_run_cell`` event."""

    def __init__(self) -> None:
        self.last: int | None = None

    def after_cell(self, result: Any) -> None:
        if result.error_in_exec is not None and result.execution_count is not None:
            self.last = int(result.execution_count)


def load(ipython: Any) -> None:
    """Register the ``%xla_bugkit`` line magic and start noting which cells raise."""
    failures = _Failures()
    ipython.events.register("post_run_cell", failures.after_cell)

    def xla_bugkit(line: str) -> None:
        run_magic(ipython, failures, line)

    ipython.register_magic_function(xla_bugkit, "line", "xla_bugkit")


def run_magic(ipython: Any, failures: _Failures, line: str) -> int | None:
    try:
        argv = shlex.split(line)
    except ValueError as e:
        print(f"xla-bugkit: {e}\n{USAGE}", file=sys.stderr)
        return None
    if not argv or argv[0] != "collect" or "--" in argv:
        print(USAGE, file=sys.stderr)
        return None
    source = notebook_script(ipython, failures)
    folder = Path(tempfile.mkdtemp(prefix="xla-bugkit-notebook-"))
    path = folder / "notebook_cells.py"
    path.write_text(source, "utf-8")
    command = [sys.executable, "-m", "xla_bugkit", *argv, "--", sys.executable, str(path)]
    print(f"xla-bugkit: rerunning the notebook's cells ({path}) in a fresh process")
    return _stream(command)


def notebook_script(ipython: Any, failures: _Failures) -> str:
    raw = list(ipython.history_manager.input_hist_raw)
    current = int(ipython.execution_count)
    # The magic's own cell is running now: it is never part of the rerun.
    cells = {count: raw[count] for count in range(1, min(len(raw), current))}
    return script(cells, ipython.transform_cell, upto=failures.last)


def _stream(command: list[str]) -> int:
    """Run ``command`` with its output shown in the cell as it arrives; Ctrl-C (the kernel's
    interrupt) stops it as it would in a terminal."""
    env = dict(os.environ)
    if xla_log.users_level(env) is None:
        env.pop(xla_log.MIN_LOG_LEVEL, None)  # jax's own, from the kernel's import: not the user's
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    )
    assert child.stdout is not None
    try:
        for text in child.stdout:
            print(text, end="", flush=True)
        return child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        return child.wait()
