"""How busy a child's process group kept the host's CPUs in its last seconds: what tells a
computation that never ends (a long loop, a loop whose condition never turns false) from a
wait that never ends (a deadlock, a lost peer), where both run past a timeout.

Read from Linux's ``/proc/PID/stat`` (user and system time of every process in the group,
its threads included); None elsewhere, or where the group cannot be read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

# The last seconds before a timeout over which the group's CPU time is measured (at most a
# quarter of the timeout).
WINDOW_SECONDS = 10.0
_PROC = Path("/proc")


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    cpu: float  # the group's CPU seconds so far


def window(timeout: float) -> float:
    """The seconds before ``timeout`` over which a child's busyness is measured."""
    return min(WINDOW_SECONDS, timeout / 4)


def sample(group: int) -> Sample | None:
    """The CPU seconds the processes of group ``group`` have used so far, now."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        entries = list(_PROC.iterdir())
    except (OSError, ValueError):
        return None
    total, seen = 0, False
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone, or not ours to read
        # "pid (comm) state ppid pgrp ... utime stime": comm may hold spaces and brackets.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 13 or int(fields[2]) != group:
            continue
        total += int(fields[11]) + int(fields[12])
        seen = True
    return Sample(time.monotonic(), total / ticks) if seen else None


def cores_busy(since: Sample | None, group: int) -> float | None:
    """The CPU cores the group kept busy on average from ``since`` until now."""
    if since is None:
        return None
    now = sample(group)
    if now is None or now.at <= since.at:
        return None
    return max(now.cpu - since.cpu, 0.0) / (now.at - since.at)
