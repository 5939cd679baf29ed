"""protocol: how a replay child ends, as its parent reads it."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import sys
from xla_bugkit.replay import protocol

def main():
    protocol.say(protocol.PHASE, "done")
    print("buffered, not yet flushed", end="")
    sys.stderr.write("on stderr")
    {body}

protocol.run_and_exit(main)
"""


@pytest.mark.parametrize(
    ("body", "status", "tail"),
    [
        ("return 4", 4, ""),
        ("raise RuntimeError('INTERNAL: an XLA error status')", 1,
         "RuntimeError: INTERNAL: an XLA error status\n"),
    ],
)  # fmt: skip
def test_a_child_ends_with_its_status_and_all_it_wrote(body: str, status: int, tail: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(body=body)], capture_output=True, text=True
    )
    assert done.returncode == status
    assert done.stdout == "XLA_BUGKIT_PHASE: done\nbuffered, not yet flushed"
    assert done.stderr.startswith("on stderr")
    # An exception reads as the interpreter prints it: the parent classifies that text.
    assert done.stderr.endswith(tail)
    assert ("Traceback (most recent call last):" in done.stderr) == bool(tail)
