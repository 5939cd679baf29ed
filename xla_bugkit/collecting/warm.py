"""What collect needs after the program, imported while the program runs; and what it
does of the bundle once the program's main module has finished (``at_main_end``).

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xla_bugkit.redact import Redactor

# The stages after the run; what they import, they import.
AFTER_RUN = (
    # The run's end: its failure, its processes' records.
    "xla_bugkit.failure.classify",
    "xla_bugkit.run.processes",
    "xla_bugkit.run.weigh",
    "xla_bugkit.collecting.bundling",
    # The hook's saved arguments become snapshots through it (ml_dtypes: most of a second).
    "xla_bugkit.hlo.literal",
    # The archive writer (``archive`` loads it on first use; py7zr's start runs ``file``).
    "xla_bugkit.archive.write",
)


@contextlib.contextmanager
def importing(
    modules: Sequence[str] = AFTER_RUN, prepare: Callable[[], object] | None = None
) -> Iterator[None]:
    """Import ``modules`` in a thread for as long as the block runs, then call ``prepare``
    there (what the stages will build again, cheaply once its lookups and regular
    expressions are cached: the redactor); joined at the block's end. An import or a
    ``prepare`` that fails here is left for the stage that needs it to raise, as it would
    have."""
    thread = threading.Thread(
        target=_import, args=(modules, prepare), name="xla-bugkit-warm", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import(modules: Sequence[str], prepare: Callable[[], object] | None) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # raised again, where it is said, by the import that needs it
            continue
    if prepare is not None:
        with contextlib.suppress(Exception):  # the stage does it again, and says why it fails
            prepare()


def at_main_end(
    command: Sequence[str],
    work: Path,
    pid: int,
    exited: Callable[[], bool],
    *,
    max_size: int | None = None,
) -> None:
    """Once the program's main module has finished, while it tears itself down: what the
    stages after the run would do first for its process ``pid``. The snapshots of the
    arguments it saved, written in its dump folder (``arguments.write_snapshots`` then finds
    them written); then, newest first until the program has exited, each one's redacted
    copy, sha256 and packing, which staging and the archive then find (``filememo``). A
    process that did not fail leaves them unread, and a snapshot larger than the bundle may
    be (``max_size``), which the size budget leaves out before staging, gets no copy."""
    from xla_bugkit.archive import packing  # imported while the program ran (warm)
    from xla_bugkit.bundle.manifest.write import hash_ahead
    from xla_bugkit.collecting import workdir
    from xla_bugkit.run import arguments, evidence_files

    found = next((p for p in evidence_files.load(work) if p.pid == pid), None)
    if found is None:
        return
    own = found.dump_dir is not None and found.dump_dir.is_dir()
    folder = found.dump_dir if own and found.dump_dir is not None else work / workdir.DUMP
    arguments.write_snapshots(folder, (found,))
    redacting = redactor(command, work)
    for snapshot in arguments.recorded_snapshots(folder, found):
        if exited():
            return
        if max_size is not None and snapshot.stat().st_size > max_size:
            continue
        copy = redacting.copy_ahead(snapshot, work / workdir.REDACTED)
        hash_ahead(copy)
        if copy.stat().st_size >= packing.DENSE_FROM:
            packing.weigh_ahead(copy)


def redactor(command: Sequence[str], work: Path) -> Redactor:
    """The redactor ``write_bundle`` builds (while the program runs, its host name lookups
    and regular expressions, for text and for binary protos, are made once, off the user's
    wait)."""
    from xla_bugkit.redact import Redactor

    redactor = Redactor.for_this_machine(command, private=(work,))
    redactor.binary_rules()
    return redactor
