"""An exception the program raised itself, in words that look like XLA's.

A program may word its own errors after XLA's (``raise RuntimeError("INTERNAL: Check failed:
shard count mismatch (21 vs. 24)")``, as a runbook greps for them): the status code and the
"Check failed" in its message are the program's, not XLA's. Python's traceback says who
raised it: its last frame is the ``raise`` statement, in the program's own file. XLA's
errors reach a jax program as jax's or jaxlib's exception types (``JaxRuntimeError``,
``XlaRuntimeError``), raised inside jax, whose traceback filter leaves the program's call
as the last frame, never a ``raise``; a program that caught XLA's error and raised its own
from it prints XLA's exception first, in the same chain. Either is XLA's error and stays so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from xla_bugkit.failure.pytraceback import FRAME, NOT_PROGRAM, XLA_RAISED

_FRAMES_LOOKED_AT = 60  # lines above the exception line in which its last frame must be


@dataclass(frozen=True)
class OwnRaise:
    """Where the program raised its own exception: ``check (reshard_verify.py:53)``."""

    where: str


def raised_by_program(output: str, exception_line: str) -> OwnRaise | None:
    """Where the program's own ``raise`` raised the exception of ``exception_line`` (its
    last line in ``output``), or None: its last frame is not a ``raise`` in a file of the
    program's, or XLA's exception is in the output (a cause the program wrapped)."""
    if XLA_RAISED.search(output):
        return None
    lines = output.splitlines()
    at = _last_index(lines, exception_line)
    if at is None:
        return None
    for i in range(at - 1, max(at - _FRAMES_LOOKED_AT, 0) - 1, -1):
        frame = FRAME.match(lines[i])
        if frame is None:
            continue
        source = lines[i + 1].strip() if i + 1 < at else ""
        if not source.startswith("raise ") or NOT_PROGRAM.search(frame["file"]):
            return None
        return OwnRaise(f"{frame['fun']} ({PurePath(frame['file']).name}:{frame['line']})")
    return None


def _last_index(lines: list[str], wanted: str) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == wanted.strip():
            return i
    return None
