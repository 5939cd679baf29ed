"""Does a probe show the same bug? The shrink oracle.

A crash, error or hang matches by kind family and normalised signature (``Failure.same_bug``,
the rule replay itself uses). A wrong result matches when the candidate's outputs differ from
the reference value of its root (computed once, op by op, for every entry instruction) in
the same way: NaN, infinity, or plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from xla_bugkit.failure.classify import Failure, Kind, Phase, classify
from xla_bugkit.replay import compare_outputs, protocol
from xla_bugkit.shrink import child
from xla_bugkit.shrink.probe import ProbeRun


class Answer(StrEnum):
    SAME = "same failure"
    CLEAN = "clean"  # ran and (for wrong results) matched the reference
    OTHER = "other failure"
    INVALID = "invalid"  # the candidate does not parse or convert: says nothing


@dataclass(frozen=True)
class Judged:
    answer: Answer
    failure: Failure | None = None  # how the probe failed, when it did
    mismatch: str | None = None  # the wrong result's class, when it had one


def _floats(a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind in "fc" or a.dtype.kind == "V":
        return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    return None


def mismatch_class(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> str | None:
    """None when close; else "nan" (NaNs differ), "inf" (infinities differ) or "values"."""
    if compare_outputs(actual, expected, every_element=True).close:
        return None
    found = "values"
    for a, e in zip(actual, expected, strict=False):
        fa, fe = _floats(np.asarray(a)), _floats(np.asarray(e))
        if fa is None or fe is None or fa.shape != fe.shape:
            continue
        if (np.isnan(fa) != np.isnan(fe)).any():
            return "nan"
        if (np.isinf(fa) != np.isinf(fe)).any():
            found = "inf"
    return found


def probe_failure(run: ProbeRun) -> Failure:
    phase = protocol.marker(run.output, protocol.PHASE)
    return classify(
        run.output,
        exit_status=run.returncode,
        timed_out=run.timed_out,
        phase={"compile": Phase.COMPILE, None: None}.get(phase, Phase.RUN),
    )


@dataclass(frozen=True)
class Oracle:
    """What "the same bug" means for one shrink: ``failure`` for a crash, error or hang;
    ``mismatch`` (a ``mismatch_class``) for a wrong result."""

    failure: Failure | None = None
    mismatch: str | None = None

    @property
    def wrong_result(self) -> bool:
        return self.failure is None

    def judge(self, run: ProbeRun, reference: Sequence[np.ndarray] | None) -> Judged:
        if protocol.marker(run.output, child.INVALID) is not None:
            return Judged(Answer.INVALID)
        failure = probe_failure(run)
        if run.timed_out and self.failure is not None and self.failure.kind is Kind.HANG:
            return Judged(Answer.SAME, failure)
        if failure.kind.is_failure or run.timed_out:
            same = self.failure is not None and self.failure.same_bug(failure)
            return Judged(Answer.SAME if same else Answer.OTHER, failure)
        if not self.wrong_result:
            return Judged(Answer.CLEAN)
        outputs = protocol.arrays_path(run.folder, child.OUTPUTS)
        if reference is None or not outputs.exists():
            return Judged(Answer.OTHER)
        found = mismatch_class(protocol.load_arrays(outputs), reference)
        if found is None:
            return Judged(Answer.CLEAN)
        return Judged(Answer.SAME if found == self.mismatch else Answer.OTHER, mismatch=found)
