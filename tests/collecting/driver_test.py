"""collect's driver: when the program can run a second time."""

from __future__ import annotations

import sys

from xla_bugkit.collecting.driver import _cannot_run_again


def test_a_program_read_from_standard_input_cannot_run_a_second_time() -> None:
    consumed = "Python read the program from standard input, which the first run consumed"
    assert _cannot_run_again([sys.executable, "-"]) == consumed
    assert _cannot_run_again(["python3", "-u", "-X", "dev", "-"]) == consumed
    assert _cannot_run_again(["python"]) == consumed
    # A script, a module or a command line is read again as it was.
    assert _cannot_run_again(["python", "train.py", "-"]) is None
    assert _cannot_run_again(["python", "-m", "pkg.main"]) is None
    assert _cannot_run_again(["python", "-c", "import train"]) is None
    assert _cannot_run_again(["bash", "run.sh"]) is None
