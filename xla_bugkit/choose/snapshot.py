"""Which of a module's snapshots a replay runs on: its newest, or, when its result holds a
NaN or an infinity that an earlier execution made first, that one."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from xla_bugkit.choose.dumps import DumpFile, DumpModule, Role
from xla_bugkit.hlo.finite import result_finite


def replay_snapshot(root: Path, module: DumpModule) -> DumpFile | None:
    """The snapshot a replay of ``module`` (a module of the dump at ``root``) runs on: its
    newest, unless its result holds a NaN or an infinity that an earlier execution's was
    the first to hold, after results that held none (``onset``): that one, then."""
    return onset(root, module) or module.newest_snapshot


@functools.lru_cache(maxsize=256)
def onset(root: Path, module: DumpModule) -> DumpFile | None:
    """Of a module's snapshots in time order, whose first result was finite and newest
    not: the first whose result holds a NaN or an infinity; None otherwise. Read once per
    module: the bundle's note, its layout and each replay ask."""
    snapshots = sorted(module.all(Role.SNAPSHOT), key=lambda f: (f.mtime, f.rel))
    if len(snapshots) < 2:
        return None
    first, newest = (result_finite(root / s.path) for s in (snapshots[0], snapshots[-1]))
    if not first or newest is not False:
        return None
    return next((s for s in snapshots[1:] if result_finite(root / s.path) is False), None)


def replay_note(root: Path, modules: Iterable[DumpModule]) -> str | None:
    """What the bundle says of the modules replayed on an earlier execution than their
    newest (``replay_snapshot``); None when there is none."""
    earlier = [m.label for m in modules if onset(root, m) is not None]
    if not earlier:
        return None
    return (
        f"{', '.join(earlier)}: replayed on the execution whose result first held a NaN or an "
        "infinity (those before it held none), not on the newest, which ran after it"
    )
