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

from xla_bugkit.choose.dumps import TEXT_READ_LIMIT, DumpIndex, DumpModule, Role

_OOM = re.compile(r"Out of memory allocating (\d+) bytes")
# The TPU compiler's own check of a module against the chip's memory, at compile time.
_HBM = re.compile(
    r"Ran out of memory (?:on|in memory space) \w+[^(]*\((?P<need>[\d.]+\s*[KMGT]i?B?)\)"
    r"\s*exceeds available \w+\s*\((?P<have>[\d.]+\s*[KMGT]i?B?)\)"
)
# The TPU runtime's allocator, out of memory when a computation runs ("Error allocating
# device buffer: Attempting to allocate 4.00G. That was not possible. There are 3.75G free.;
# (0x0x0_HBM0)"): what it was asked and what was free then, not what the chip has.
_SHORT = re.compile(
    r"Attempting to (?:allocate|reserve) (?P<asked>[\d.]+\s*[KMGT]?i?B?)\b[^.]*\.\s+"
    r"That was not possible\.\s+There (?:are|is) (?P<free>[\d.]+\s*[KMGT]?i?B?) free"
)
# Scoped VMEM, the kernel's own on-chip scratch, reported in the same words: no array of the
# program's holds it.
_VMEM = re.compile(r"vmem", re.I)
# One row of a memory-usage report: "24.00GiB( 50%);   24.00GiB;  offset;  4; shapes".
_REPORT_ROW = re.compile(
    r"^\s*[\d.]+\w+\(\s*\d+%\);\s*(?P<size>[\d.]+\w+);\s*\d+;\s*\d+;\s*(?P<shapes>.+)$", re.M
)


def failed_allocation(text: str) -> int | None:
    """The size of the last allocation XLA said it could not make, in bytes."""
    sizes = _OOM.findall(text)
    return int(sizes[-1]) if sizes else None


def over_device_memory(text: str) -> tuple[str, str] | None:
    """(needed, available) when the TPU compiler said a module needs more device memory
    than the chip has ("... HLO temporaries (24.00G) exceeds available HBM (15.75G)")."""
    m = _HBM.search(text)
    if m is None:
        return None
    return m.group("need").replace(" ", ""), m.group("have").replace(" ", "")


def short_at_run_time(text: str) -> tuple[str, str] | None:
    """(asked, free) when the TPU runtime said it could not allocate a buffer of ``asked``
    with ``free`` of the device's memory left ("Attempting to allocate 4.00G. That was not
    possible. There are 3.75G free."): the last such line of ``text``; None where scoped VMEM
    is named with it (a kernel's scratch, not the device's memory)."""
    found = list(_SHORT.finditer(text))
    if not found or _VMEM.search(text, found[-1].start(), found[-1].end() + 600):
        return None
    return found[-1]["asked"].replace(" ", ""), found[-1]["free"].replace(" ", "")


def largest_allocations(report: str, count: int = 3) -> list[str]:
    """The ``count`` largest allocations of a memory-usage report (its first table, which
    is the device's memory), each as "24.00GiB: f32[1536,2048,2048]" (its shapes as the
    report lists them)."""
    first = report.split("\n\n", 1)[0]
    rows = [(m["size"], m["shapes"].strip()) for m in _REPORT_ROW.finditer(first)]
    rows.sort(key=lambda r: -_bytes(r[0]))
    return [f"{size}: {shapes}" for size, shapes in rows[:count]]


def device_report(index: DumpIndex, module: DumpModule) -> list[str]:
    """``largest_allocations`` of ``module``'s memory-usage report; [] without one."""
    report = next((f for f in module.all(Role.MEMORY_REPORT) if f.path.suffix == ".txt"), None)
    if report is None or report.size > TEXT_READ_LIMIT:
        return []
    try:
        return largest_allocations((index.root / report.path).read_text("utf-8", "replace"))
    except OSError:
        return []


def _bytes(size: str) -> float:
    m = re.fullmatch(r"([\d.]+)([KMGT]?)i?B?", size)
    if m is None:
        return 0.0
    return float(m.group(1)) * float(1024 ** " KMGT".index(m.group(2) or " "))


def modules_allocating(
    index: DumpIndex, size: int, modules: Sequence[DumpModule] | None = None
) -> list[tuple[DumpModule, str]]:
    """Each module whose buffer assignment holds an allocation of exactly ``size`` bytes,
    with what that allocation is ("allocation 9, preallocated-temp")."""
    line = re.compile(rb"^allocation (\d+): size %d,\s*([^:\n]*)" % size, re.M)
    found = []
    for module in index.modules if modules is None else modules:
        for file in module.all(Role.BUFFER_ASSIGNMENT):
            if file.size > TEXT_READ_LIMIT:
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
