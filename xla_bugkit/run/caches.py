"""What the run said of the caches it defeated: the program's own compilation cache and
XLA's cache flags, which the start-up hook kept from being read or written
(``hook/caches.py``), one note each for the summary and the manifest."""

from __future__ import annotations

from pathlib import Path

from xla_bugkit.hlo import flags
from xla_bugkit.run import evidence_files


def notes(processes: Path) -> tuple[str, ...]:
    """One line per cache folder or flag the run's processes had their caches defeated for
    (``cache_defeated`` records), in the order first seen."""
    said: dict[str, None] = {}
    for r in evidence_files.records_of(processes, "cache_defeated"):
        if r.get("cache") == "jax" and isinstance(r.get("folder"), str):
            said[compilation_cache_note(r["folder"])] = None
        elif r.get("cache") == "xla" and isinstance(r.get("flag"), str):
            said[flags.cache_flag_note(r["flag"])] = None
    return tuple(said)


def compilation_cache_note(folder: str) -> str:
    return (
        f"the program's JAX compilation cache ({folder}) was neither read nor written for "
        "this run: a cached executable compiles nothing and so dumps nothing (your files are "
        "as they were)"
    )
