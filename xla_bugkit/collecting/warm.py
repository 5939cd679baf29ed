"""What collect needs after the program, imported while the program runs.

The stages after the run pull in py7zr, numpy, protobuf and most of xla-bugkit: a third of
a second of imports that, made before the program starts, would add to every run. A thread
makes them while the program runs, when this process only waits on it, and is joined
before the stages start, so nothing runs beside them (the symbol search forks its workers
only when no other thread runs).

The thread keeps this process's priority: at a lower one it would hold the GIL, unscheduled,
while the program keeps the CPUs busy, and the threads that read the program's output (and
the program, on a full pipe) would wait for it.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator, Sequence

# The stages after the run; what they import, they import.
AFTER_RUN = (
    "xla_bugkit.collecting.bundling",
    # The hook's saved arguments become snapshots through it (ml_dtypes: most of a second).
    "xla_bugkit.hlo.literal",
)


@contextlib.contextmanager
def importing(modules: Sequence[str] = AFTER_RUN) -> Iterator[None]:
    """Import ``modules`` in a thread for as long as the block runs; joined at its end. An
    import that fails here is left for the stage that needs it to raise, as it would have."""
    thread = threading.Thread(target=_import, args=(modules,), name="xla-bugkit-warm", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # raised again, where it is said, by the import that needs it
            continue
