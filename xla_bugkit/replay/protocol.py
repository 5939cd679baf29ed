"""What the replay parent (``judge``) and its child (``worker``) say to each other.

The child prints marker lines on stdout, flushed at once, so the parent reads how far it
got even when XLA aborts right after; it leaves its arrays as ``.npz`` files in the spec's
``out`` folder, and the reason a reference failed as ``<stem>.error`` beside them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

from xla_bugkit.ui import note_timing

MARKER = "XLA_BUGKIT"
# The spec's key that lets a TPU module's references start beside its test (``child.early``):
# set where the run compiled and ran the module, so no crash is expected of the replay.
EARLY_REFERENCES = "early_references"
PHASE = f"{MARKER}_PHASE: "  # compile | run | reference | done
NOT_REPLAYABLE = f"{MARKER}_NOT_REPLAYABLE: "
NEEDS_DEVICES = f"{MARKER}_NEEDS_DEVICES: "
REJECTED_FLAG = f"{MARKER}_REJECTED_FLAG: "
INPUTS = f"{MARKER}_INPUTS: "
UNDER = f"{MARKER}_UNDER: "  # the XLA the child compiles with: "jaxlib 0.10.2"
# One recorded option (or compile-options field) the child left out (``flags.refusal``).
WITHHELD = f"{MARKER}_WITHHELD: "
# A sum whose order decides whether it overflows: the op-by-op reference is NaN there.
UNORDERED = f"{MARKER}_UNORDERED: "
# The module's inputs hold a NaN (the number of inputs that do): a NaN in a reference is
# then what IEEE arithmetic propagates, to be judged like any value, not a reference whose
# own arithmetic broke down.
NAN_INPUTS = f"{MARKER}_NAN_INPUTS: "

# The child's exit status when it stops on purpose (anything else is XLA's doing).
EXIT_NOT_REPLAYABLE = 3
EXIT_NEEDS_DEVICES = 4
EXIT_REJECTED_FLAG = 5

# The arrays' file stems in ``out``: the module under test, the snapshot's recorded result,
# the two references, and a TPU module run with its float dots at HIGHEST precision.
TEST = "test"
RECORDED = "recorded"
OPBYOP = "opbyop"
CONSERVATIVE = "conservative"
HIGHEST = "highest"
# A Pallas kernel's outputs under the interpret mode, recorded by the program at collect
# (``inputs.Interpreted``): kept beside the others as the reference the verdict judged by.
INTERPRETED = "interpreted"
# Why a TPU module with a Pallas kernel has no reference: both would run the kernel again.
KERNEL_ONLY = (
    "the module's Pallas kernel (tpu_custom_call) runs only on the TPU, and a reference "
    "that runs it again shares whatever it computes"
)
SPEC = "spec.json"
# The worker's argument when it is started ahead of its module (``children.Spares``): it imports
# jax, then reads its spec from stdin, with the memory limit to set on itself.
SPEC_ON_STDIN = "-"
# The worker's argument when it is kept for the modules after its first (``children.Spares``
# on a platform whose opening is costly): it reads one spec a line from stdin, and replays
# each between a ``STARTS`` and an ``ENDED`` line, as ``batch`` runs its list.
SPECS_ON_STDIN = "+"

# A child that replays several modules (``batch``, a kept worker) marks each one's part of
# its output: the module's number as it starts, "NUMBER STATUS" as it ends (its status as a
# one-module child would have exited with it).
STARTS = f"{MARKER}_MODULE: "
ENDED = f"{MARKER}_ENDED: "
# The process that replays a module, said as it starts.
PID = f"{MARKER}_PID: "


def arrays_path(out: Path, stem: str) -> Path:
    return out / f"{stem}.npz"


def error_path(out: Path, stem: str) -> Path:
    return out / f"{stem}.error"


def say(marker: str, value: object) -> None:
    # Flushed at once: the parent reads the markers even when XLA aborts right after.
    print(f"{marker}{value}", flush=True)
    if marker in (PID, PHASE):
        _phase_timed(str(value) if marker == PHASE else "")


_PHASE: list[tuple[str, float]] = []  # the replay's phase under way, and when it began


def _phase_timed(phase: str) -> None:
    """Note how long the replay's previous phase took (``ui.note_timing``, for benchmarks:
    "replay compile", "replay reference", ...); a replay's first marker (its pid) starts
    the "replay inputs" one, which lasts to its compile."""
    now = time.perf_counter()
    if _PHASE and phase:
        name, began = _PHASE.pop()
        note_timing(f"replay {name}", now - began)
    _PHASE[:] = [] if phase == "done" else [(phase or "inputs", now)]


def phase_ended() -> None:
    """The replay ended, whether or not it said so: its phase under way is timed (a compile
    that raised times as "replay compile")."""
    _phase_timed("done")


def run_and_exit(main: Callable[[], int]) -> NoReturn:
    """A child's entry point: run ``main`` and end the process with its status, skipping
    the interpreter's teardown, where jax's at-exit work (its backends and their thread
    pools) takes ~0.2 s. By then the child has written all it will: its arrays are closed
    files, its markers flushed. An exception is printed as the interpreter prints it, with
    the status it gives (1): the parent reads XLA's errors from that traceback."""
    try:
        status = main()
    except Exception:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def marker(output: str, prefix: str) -> str | None:
    """The value of the last ``prefix`` line in the child's ``output``, if any."""
    found = None
    for line in output.splitlines():
        if line.startswith(prefix):
            found = line[len(prefix) :].strip()
    return found


def markers(output: str, prefix: str) -> list[str]:
    """The values of every ``prefix`` line in the child's ``output``, in order."""
    return [line[len(prefix) :].strip() for line in output.splitlines() if line.startswith(prefix)]


def save_arrays(path: Path, arrays: Sequence[np.ndarray]) -> None:
    """Save arrays to ``.npz``; ml_dtypes types travel as raw bits plus their names."""
    stored: dict[str, np.ndarray] = {}
    names: list[str] = []
    for i, array in enumerate(arrays):
        array = np.asarray(array)
        names.append(array.dtype.name)
        plain = array.dtype.kind != "V"
        stored[f"a{i}"] = array if plain else array.view(f"u{array.dtype.itemsize}")
    stored["dtypes"] = np.array(names, dtype=str)
    np.savez(path, **stored)  # type: ignore[arg-type]


def load_arrays(path: Path) -> list[np.ndarray]:
    """Arrays saved by ``save_arrays``, with their ml_dtypes types restored."""
    with np.load(path, allow_pickle=False) as data:
        names = [str(n) for n in data["dtypes"]]
        arrays = [data[f"a{i}"] for i in range(len(names))]
    if all(a.dtype.name == n for a, n in zip(arrays, names, strict=True)):
        return arrays
    # Imported only when needed: it takes most of a second, and the replay's parent (which
    # reads these files) otherwise never loads it.
    import ml_dtypes

    return [
        a if a.dtype.name == n else a.view(getattr(ml_dtypes, n))
        for a, n in zip(arrays, names, strict=True)
    ]
