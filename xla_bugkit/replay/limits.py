"""How much a replay child may take: the policy for modules from someone else's machine."""

from __future__ import annotations

import os

from xla_bugkit import platforms


def memory_limit(platform: str) -> int | None:
    """The address-space limit for replaying an untrusted module: 3/4 of this machine's RAM.

    A hostile or runaway module then fails in its child instead of swapping the machine to a
    halt. An accelerator's client maps far more address space than it uses: those run
    unlimited (``platforms.Platform.memory_capped``).
    """
    found = platforms.find(platform)
    if found is None or not found.memory_capped:
        return None
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)
    except (ValueError, OSError):
        return None


def capped(limit: int | None, cap: int | None) -> int | None:
    """``limit``, lowered to ``cap``: the limit a program set itself, which its modules
    must meet again in the replay to fail as they did."""
    if cap is None:
        return limit
    return cap if limit is None else min(limit, cap)
