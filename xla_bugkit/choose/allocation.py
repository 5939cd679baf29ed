"""Out of memory: the module whose buffer assignment holds the allocation that failed.

XLA says how much it failed to allocate ("Out of memory allocating 57600000000 bytes"), and
each module's buffer assignment lists its allocations with their exact sizes
("allocation 9: size 57600000000, preallocated-temp:"). A failure inside an asynchronous
execution reaches Python only when a later computation reads the result, so the execution
that raised is not the one that ran out: the size says which one did.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role

_OOM = re.compile(r"Out of memory allocating (\d+) bytes")
_READ_LIMIT = 64 << 20  # a buffer assignment past this is left unread


def failed_allocation(text: str) -> int | None:
    """The size of the last allocation XLA said it could not make, in bytes."""
    sizes = _OOM.findall(text)
    return int(sizes[-1]) if sizes else None


def modules_allocating(
    index: DumpIndex, size: int, modules: Sequence[DumpModule] | None = None
) -> list[tuple[DumpModule, str]]:
    """Each module whose buffer assignment holds an allocation of exactly ``size`` bytes,
    with what that allocation is ("allocation 9, preallocated-temp")."""
    line = re.compile(rb"^allocation (\d+): size %d,\s*([^:\n]*)" % size, re.M)
    found = []
    for module in index.modules if modules is None else modules:
        for file in module.all(Role.BUFFER_ASSIGNMENT):
            if file.size > _READ_LIMIT:
                continue
            try:
                text = (index.root / file.path).read_bytes()
            except OSError:
                continue
            for m in line.finditer(text):
                what = m.group(2).decode("ascii", "replace").strip()
                # A module given the huge value as a parameter did not allocate it: its
                # producer did (or tried to).
                if not what.startswith("parameter"):
                    found.append((module, f"allocation {int(m.group(1))}, {what}".rstrip(", ")))
                    break
            else:
                continue
            break
    return found
