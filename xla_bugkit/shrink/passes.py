"""Which HLO pass is behind the failure, worded as honestly as the evidence allows.

One compile in a fresh process logs every pass (``TF_CPP_VMODULE=hlo_pass_pipeline=2``,
read only at start-up): which started, which finished, and the module hash before each.
Then: a crash inside a pass that never finished is confirmed by disabling it ("crash
inside"); a failure that survives with every pass disabled is "not a pass"; otherwise the
passes that changed the module are bisected for a set whose disabling gives a clean run
("disabling hides it", which is not proof that the pass is at fault), or, when disabling
them all breaks the compile otherwise, tried one at a time.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from xla_bugkit.shrink.flagmin import DISABLED_PASSES, ddmin, with_flag
from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.oracle import Answer
from xla_bugkit.shrink.session import Session

_EVENT = re.compile(
    r"hlo_pass_pipeline\.cc:\d+\]\s+(?:HLO pass (?P<start>[\w\-.]+)\s*$|Module hash (?P<hash>\d+)"
    r"|HLO pass: (?P<end>[\w\-.]+) time:)",
    re.M,
)
TRACE_ENV = {"TF_CPP_VMODULE": "hlo_pass_pipeline=2", "TF_CPP_MIN_LOG_LEVEL": "0"}


@dataclass(frozen=True)
class Trace:
    passes: tuple[str, ...]  # every distinct pass that ran, in order of first run
    changed: tuple[str, ...]  # those that changed the module at least once
    unfinished: str | None  # the last pass started, when it never finished


def read_trace(log: str) -> Trace:
    runs: list[list[str | None]] = []  # [name, hash before, finished]
    for m in _EVENT.finditer(log):
        if m.group("start"):
            runs.append([m.group("start"), None, None])
        elif m.group("hash") and runs:
            runs[-1][1] = m.group("hash")
        elif m.group("end") and runs and runs[-1][0] == m.group("end"):
            runs[-1][2] = "yes"
    changed: dict[str, None] = {}
    for run, following in itertools.pairwise(runs):
        if run[1] and following[1] and run[1] != following[1]:
            changed[str(run[0])] = None
    unfinished = str(runs[-1][0]) if runs and runs[-1][2] is None else None
    passes = tuple(dict.fromkeys(str(r[0]) for r in runs))
    return Trace(passes, tuple(changed), unfinished)


@dataclass(frozen=True)
class Culprit:
    pass_name: str | None
    how: str  # "crash-inside" | "disabling-hides" | "not-a-pass" | "needs-disabled"

    def to_json(self) -> dict[str, str | None]:
        return {"pass": self.pass_name, "how": self.how}

    def sentence(self) -> str:
        if self.how == "crash-inside":
            return f"crash inside HLO pass {self.pass_name} (disabling it gives a clean run)"
        if self.how == "disabling-hides":
            return (
                f"disabling HLO pass {self.pass_name} hides the failure "
                f"(not proof that {self.pass_name} is at fault)"
            )
        if self.how == "needs-disabled":
            return (
                f"it fails only with HLO pass {self.pass_name} disabled "
                f"({DISABLED_PASSES}={self.pass_name}): XLA compiles the module with the "
                "pass on"
            )
        return "not an HLO pass: it fails with every HLO pass disabled (backend or codegen)"


def _disabling(s: Session, module: Candidate, names: list[str]) -> Answer:
    flag = f"{DISABLED_PASSES}={','.join(names)}"
    return s.check(module, xla_flags=with_flag(s.xla_flags, flag)).answer


def find_culprit(
    s: Session, module: Candidate, needs_disabled: Sequence[str] = ()
) -> tuple[Culprit | None, str, str]:
    """(the culprit or None, a note when inconclusive, the trace's log). ``needs_disabled``:
    the passes the flags stage showed the failure needs disabled; disabling every pass
    disables them too, so that probe would say nothing of the rest."""
    run = s.run(module, fresh_env=TRACE_ENV)
    log, trace = run.output, read_trace(run.output)
    if needs_disabled:
        return Culprit(",".join(needs_disabled), "needs-disabled"), "", log
    if not trace.passes:
        if s.check_run(module, run).answer is Answer.SAME:
            # No pass ran (the flags disable them all), and it failed all the same.
            return Culprit(None, "not-a-pass"), "", log
        return None, "the pass trace logged no HLO pass", log
    crashed_inside = not s.oracle.wrong_result and trace.unfinished is not None
    if crashed_inside and _disabling(s, module, [str(trace.unfinished)]) is Answer.CLEAN:
        return Culprit(trace.unfinished, "crash-inside"), "", log
    everything = with_flag(s.xla_flags, "--xla_disable_all_hlo_passes=true")
    if s.check(module, xla_flags=everything).answer is Answer.SAME:
        return Culprit(None, "not-a-pass"), "", log
    suspects = list(trace.changed) or list(trace.passes)
    if _disabling(s, module, suspects) is Answer.CLEAN:
        found = ddmin(suspects, lambda names: _disabling(s, module, names) is Answer.CLEAN)
        return Culprit(",".join(found), "disabling-hides"), "", log
    # In a big module some of them are load-bearing: disabled together they can leave an
    # opcode the backend cannot emit (jax-ml/jax#38609's expm module keeps a scatter).
    # One at a time, in pipeline order, each keeps the rest of the pipeline whole.
    for name in suspects:
        if _disabling(s, module, [name]) is Answer.CLEAN:
            return Culprit(name, "disabling-hides"), "", log
    return None, "inconclusive: disabling the passes only produced other failures", log
