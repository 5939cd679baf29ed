"""Errors that jax raises about the program's own use of it, not about XLA.

Some of jax's errors carry XLA's words or XLA's exception name and are still the program's:
``checkify``'s failed check is raised by jax's Python as ``jax._src.checkify.JaxRuntimeError``
(a class of checkify's own, named like XLA's), and an array the program donated or deleted
and then used is refused by jax's Python (``Array has been deleted``) or by PjRt's argument
check before anything runs (``INVALID_ARGUMENT: ... Buffer has been deleted or donated``).
Where an error is raised decides whose it is, not its type's name: each row here names the
raise by what only it prints (real excerpts of jaxlib 0.10.2 in the tests), and why it is
the program's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Misuse:
    """One of jax's errors about the program's use of it: what matches its exception line,
    and why it is the program's (a clause)."""

    line: re.Pattern[str]
    why: str


MISUSES: tuple[Misuse, ...] = (
    Misuse(
        re.compile(r"^jax\._src\.checkify\.\w+: .*\(`check` failed\)", re.M),
        "a checkify.check of the program's own failed on its values (jax's Python raised it, "
        "after the computation ran to its end)",
    ),
    Misuse(
        re.compile(r"^(?:\w+\.)*RuntimeError: Array has been deleted with shape=", re.M),
        "the program read an array after donating it to a jitted call (donate_argnums) or "
        "deleting it; jax's Python refused it before anything ran",
    ),
    Misuse(
        re.compile(
            r"^(?:[\w.]+: )?INVALID_ARGUMENT: (?:Invalid buffer passed to Execute\(\) as "
            r"argument \d+ to replica \d+: INVALID_ARGUMENT: )?Buffer has been deleted or "
            r"donated",
            re.M,
        ),
        "the program passed an array it had donated to an earlier jitted call "
        "(donate_argnums) or deleted; the runtime refused it as an argument before the "
        "computation started",
    ),
    Misuse(
        re.compile(
            r"^(?:[\w.]+: )?INVALID_ARGUMENT: \w+\(\) called on deleted or donated buffer", re.M
        ),
        "the program waited on an array it had donated to a jitted call (donate_argnums) or "
        "deleted",
    ),
)


def misuse(exception_line: str) -> str | None:
    """Why the error of ``exception_line`` (Python's last line of it) is the program's use
    of jax, or None when it is none of jax's errors about its use."""
    for row in MISUSES:
        if row.line.search(exception_line.strip()):
            return row.why
    return None
