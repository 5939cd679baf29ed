"""How busy a child kept the CPU before its timeout stopped it: real children, one that
computes and one that waits. The bounds are far apart (a loaded machine still gives a
computing child a tenth of a core; a sleeping one uses none)."""

from __future__ import annotations

import sys

import pytest

from xla_bugkit import proc
from xla_bugkit.verdict import BUSY_CORES


@pytest.mark.parametrize(
    ("program", "computing"),
    [
        ("import time\nwhile True: time.sleep(3600)", False),
        ("import os\nprint('ready', flush=True)\nwhile True: os.getpid()", True),
    ],
)
def test_a_child_stopped_by_its_timeout_says_whether_it_was_computing(
    program: str, computing: bool
) -> None:
    done = proc.run([sys.executable, "-c", program], timeout=8.0)
    assert done.timed_out and done.busy is not None
    assert (done.busy >= BUSY_CORES) is computing, done.busy


def test_a_child_that_ends_by_itself_has_no_busy_measure() -> None:
    done = proc.run([sys.executable, "-c", "pass"], timeout=60.0)
    assert not done.timed_out and done.busy is None
