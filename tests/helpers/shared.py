"""What a test session makes once and every pytest-xdist worker reads: a costly program run,
a collected bundle. Each result is made by the first worker that asks for it, under a lock
file in a folder the workers share, and written there as JSON; a worker that asks while
another makes it waits on the lock (a readiness signal, not a delay), then reads it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def worker_index() -> int:
    """This process's xdist worker number (gw3: 3), 0 outside xdist."""
    found = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(found.group(1)) if found else 0


def shared_folder(factory: pytest.TempPathFactory, name: str) -> Path:
    """``name`` in the folder every worker of this session shares: the session's base temp
    dir alone, its parent under xdist (each worker's base is a folder of its own there)."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def once(folder: Path, key: str, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``make()``'s JSON-able result for ``key``, made once for all the session's workers.
    A ``make`` that raises leaves nothing behind: the next worker that asks makes it again
    (and its test says what went wrong)."""
    lock = folder / f"{key}.lock"
    done = folder / f"{key}.json"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        if done.exists():
            return json.loads(done.read_text("utf-8"))  # type: ignore[no-any-return]
        value = make()
        partial = done.with_suffix(".partial")
        partial.write_text(json.dumps(value), "utf-8")
        partial.replace(done)
        return value
