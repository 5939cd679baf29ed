"""A run that left no XLA dumps: how collect ends, and what it says.

The hint to fix ``XLA_FLAGS`` is given only where the evidence points at flags: a process
whose XLA started without collect's ``--xla_dump_to``, or a failure inside XLA that left no
dumps. A run stopped before XLA compiled anything is interrupted (130); one that failed
outside XLA before it compiled anything is not reproduced (3): there is nothing of XLA's to
bundle, and the program failed for a reason of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from xla_bugkit.choose.selection import Selection
from xla_bugkit.collecting.options import CollectResult
from xla_bugkit.errors import ExitCode, RerunNeeded
from xla_bugkit.failure.kinds import KINDS, Kind
from xla_bugkit.run.evidence import ProcessEvidence
from xla_bugkit.run.record import RunRecord

_AGAIN = "then run collect again"
_KEEPS_OURS = "(os.environ['XLA_FLAGS'] += ' --flag' keeps ours)"


def without_dumps(run: RunRecord, saved: Sequence[ProcessEvidence], fmt: str) -> CollectResult:
    """The end of a run that left no dumps; raises ``RerunNeeded`` when another run, with
    the program's flags fixed, is the way on. ``saved``: what its processes recorded."""
    ended = f"the program wrote no XLA dumps ({run.failure.describe})"
    replaced = next((p for p in saved if _replaced_flags(p)), None)
    why = _replaced(replaced) if replaced is not None else None
    # A stop is the user's: interrupted, whatever else the records say.
    if run.failure.kind is Kind.INTERRUPTED:
        said = why or f"stopped {_before_xla(saved)}"
        return _ended(ExitCode.INTERRUPTED, run, fmt, f"{ended}: {said}")
    if why is not None:
        raise RerunNeeded(f"{ended}: {why}, {_AGAIN}")
    if KINDS[run.failure.kind].shows_xla and not saved:
        raise RerunNeeded(
            f"{ended}: XLA failed but dumped nothing: the program may replace XLA_FLAGS "
            f"instead of appending to it {_KEEPS_OURS}; once that is fixed, {_AGAIN}"
        )
    return _ended(
        ExitCode.NOT_REPRODUCED,
        run,
        fmt,
        f"{ended}: it failed {_before_xla(saved)}, so the failure is not XLA's and there is "
        "nothing to bundle",
    )


def _replaced(p: ProcessEvidence) -> str:
    value = p.env.get("XLA_FLAGS", "")
    return (
        f"it replaced XLA_FLAGS (its XLA started with XLA_FLAGS={value!r}, without the "
        f"--xla_dump_to collect adds); append to it instead {_KEEPS_OURS}"
    )


def _replaced_flags(p: ProcessEvidence) -> bool:
    return p.started_backend and "--xla_dump_to" not in p.env.get("XLA_FLAGS", "")


def _before_xla(saved: Sequence[ProcessEvidence]) -> str:
    """When the run stopped, as far as its processes' records tell."""
    if not saved:
        return "with no sign of XLA (no process of it loaded jax, TensorFlow or PyTorch/XLA)"
    if not any(p.started_backend for p in saved):
        n = len(saved)
        return f"before it started XLA ({n} Python process{'es' * (n != 1)}, none started it)"
    return "before XLA compiled anything (its XLA started, with collect's dump flags)"


def _ended(code: ExitCode, run: RunRecord, fmt: str, said: str) -> CollectResult:
    return CollectResult(code, run, Selection(chosen=(), guess=False), notes=(said,), fmt=fmt)
