"""How a rerun keeps the real inputs of executions, on a disk bounded whatever the run's length.

XLA's ``--xla_dump_hlo_snapshots`` writes a snapshot (the arguments and the result) of every
execution: a training loop writes its whole state once per step, which costs several times
the program's own time and grows without bound (6.3 GB in 200 steps of 16 MB of parameters).
So by default (``first``) XLA writes none; the start-up hook saves the arguments of each
compiled function's first execution, which always passes through Python, before it runs (a
crash in it keeps them), and of an execution that raises. That is once per function, so its
cost does not grow with the number of steps. The inputs are the first call's values: a
failure that depends on later values needs ``every``.

``every`` keeps XLA's snapshot of every execution, pruned while the program runs
(``Pruner``): each module keeps its first snapshot, its newest few, and, where its first
result was finite, the first whose result holds a NaN or an infinity (a loop feeds a NaN
back into every later step, so the newest inputs would only show NaN staying NaN), and all
of them together stay within the budget, the oldest going first.

The budget (``--max-dump-size``) bounds the inputs a run keeps on disk either way.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit import config
from xla_bugkit.hlo import finite

FIRST, EVERY = "first", "every"
MODES = (FIRST, EVERY)
DEFAULT_BUDGET = config.MAX_DUMP_SIZE  # bytes of inputs a run may keep: a laptop survives it
NEWEST_KEPT = 2  # ``every``: the newest snapshots of each module kept, beside its first
PRUNE_EVERY = 1.0  # seconds between two looks at the dump folder
_SNAPSHOT = re.compile(r"^(?:\d+\.)?module_(\d+)\..+\.snapshot\.-?\d+\.pb$")


@dataclass(frozen=True)
class Capture:
    """How a rerun keeps inputs: ``mode`` (``first`` or ``every``) within ``budget`` bytes."""

    mode: str = FIRST
    budget: int = DEFAULT_BUDGET

    @property
    def xla_snapshots(self) -> bool:
        return self.mode == EVERY

    def describe(self) -> str:
        """One line for the summary: what was kept, and the bound."""
        bound = f"at most {self.budget / 1e9:.3g} GB"
        if self.mode == EVERY:
            return (
                f"inputs: XLA's snapshot of every execution, each module's first and newest "
                f"{NEWEST_KEPT} kept ({bound})"
            )
        return (
            f"inputs: each compiled function's first call ({bound}); "
            "a failure that needs later values: --snapshots every"
        )


DEFAULT_CAPTURE = Capture()


class Pruner:
    """A thread that keeps a dump folder's XLA snapshots to each module's first and newest
    ``NEWEST_KEPT``, and all of them within ``budget`` bytes, while a run writes them.
    ``stop`` prunes once more and ends it; what it removed is counted in ``removed``."""

    def __init__(self, dump_dir: Path, budget: int, interval: float = PRUNE_EVERY) -> None:
        self.dump_dir, self.budget, self.interval = dump_dir, budget, interval
        self.removed = 0
        self.removed_bytes = 0
        # Per module: the snapshot kept as the first whose result held a NaN or an
        # infinity, once found; or None where the first result already held one (nothing
        # to look for: such values are that module's normal).
        self._onset: dict[tuple[str, str], Path | None] = {}
        self._first_looked: set[tuple[str, str]] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="xla-bugkit-pruner", daemon=True)

    def __enter__(self) -> Pruner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.prune()

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self.prune()

    def prune(self) -> None:
        """One pass: remove what the rule does not keep."""
        by_module = _snapshots(self.dump_dir)
        spare: list[tuple[float, int, Path]] = []  # removable if over the budget, oldest first
        total = 0
        for key, files in by_module.items():
            files.sort()
            first, rest = files[0], files[1:]
            # The newest may still be being written: it is never removed.
            old, newest = (
                rest[:-NEWEST_KEPT] if len(rest) > NEWEST_KEPT else [],
                rest[-NEWEST_KEPT:],
            )
            kept = [first, *newest]
            if old and key not in self._onset and key not in self._first_looked:
                self._first_looked.add(key)
                if finite.result_finite(first[2]) is False:
                    self._onset[key] = None
            for item in old:
                if key not in self._onset and finite.result_finite(item[2]) is False:
                    self._onset[key] = item[2]
                if item[2] == self._onset.get(key):
                    kept.append(item)
                else:
                    self._remove(item)
            total += sum(size for _, size, _ in kept)
            spare += [item for item in kept if item is not newest[-1]] if newest else kept
        for item in sorted(spare):
            if total <= self.budget:
                break
            self._remove(item)
            total -= item[1]

    def _remove(self, item: tuple[float, int, Path]) -> None:
        try:
            item[2].unlink()
        except OSError:
            return
        self.removed += 1
        self.removed_bytes += item[1]


def _snapshots(dump_dir: Path) -> dict[tuple[str, str], list[tuple[float, int, Path]]]:
    """XLA's snapshots under ``dump_dir``, by (folder, module number): each as (mtime, size,
    path)."""
    by_module: dict[tuple[str, str], list[tuple[float, int, Path]]] = {}
    for folder, _, names in os.walk(dump_dir):
        for name in names:
            found = _SNAPSHOT.match(name)
            if found is None:
                continue
            path = Path(folder) / name
            try:
                stat = path.stat()
            except OSError:  # written and renamed while we looked
                continue
            key = (folder, found.group(1))
            by_module.setdefault(key, []).append((stat.st_mtime, stat.st_size, path))
    return by_module
