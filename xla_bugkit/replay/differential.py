"""Find the module that computed a wrong value: replay the candidates against the op-by-op
reference, newest execution first, within a time budget.

A wrong result leaves no trace in the output: the program's own check notices it later,
often many modules later, so the newest snapshot is rarely the culprit. Each module with a
snapshot is replayed on its real arguments; the one whose output differs from the op-by-op
reference on the same arguments is the one XLA got wrong. Modules that ran after it were
given wrong inputs but compute the right function of them, so they agree with theirs.

This lives in ``replay`` rather than ``capture``: it is replays (``judge.replay``, one child
per module) put to the service of selection, and replay already depends on capture, not
the other way round.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role, is_helper
from xla_bugkit.choose.selection import Chosen, Selection
from xla_bugkit.failure.classify import Failure
from xla_bugkit.replay import protocol
from xla_bugkit.replay.batch import env_flags, replay_batch
from xla_bugkit.replay.children import Spares, any_made_ahead, keeps
from xla_bugkit.replay.context import UNRECORDED, RunContext
from xla_bugkit.replay.inputs import ReplayInput, module_files, replay_input
from xla_bugkit.replay.judge import replay
from xla_bugkit.replay.options import ReplayOptions
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import INTERPRET_MODE, Outcome, Verdict

# Above every heuristic of capture.selection (a crash site, "named in the output", the newest
# snapshot) and below an explicit --module/--symbol: a replay that shows the wrong value is
# proof, the rest is circumstance.
DIFFERS_SCORE = 90
# A check started with less time than this left could not even import jax in its child.
MIN_CHECK_SECONDS = 5.0
# Modules per replay child: jax is imported once for them all, and the search learns what
# they showed when the child ends, so a culprit found early wastes at most this many.
BATCH = 8


@dataclass(frozen=True)
class Pace:
    """How the search spends its time: ``budget`` seconds in all, up to ``batch`` modules
    in one child, timed by ``clock``."""

    budget: float
    batch: int = BATCH
    clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Differential:
    """What the search showed: the modules whose output differs (in the order found), the
    verdict of every module it checked, and, when it found none, what it did (``note``)."""

    found: tuple[Chosen, ...]
    verdicts: tuple[Verdict, ...]
    candidates: int
    note: str = ""
    stopped: str = ""  # why the search stopped before it checked every candidate

    @property
    def checked(self) -> int:
        return len(self.verdicts)

    def note_after(self, verdicts: Sequence[Verdict]) -> str:
        """``note`` as the replays after the search leave it (``verdicts``, the final ones):
        a module the search could not check for its Pallas kernel (``protocol.KERNEL_ONLY``)
        that a replay then judged by the kernel's outputs under the interpret mode was
        checked after all. Where every module the search checked was such a one, the note
        is withdrawn: the replay's verdict says what was found."""
        judged = {v.module for v in verdicts if INTERPRET_MODE in str(v.numbers.get("reference"))}
        kernels = [v.module for v in self.verdicts if protocol.KERNEL_ONLY in v.evidence]
        later = [m for m in kernels if m in judged]
        if not self.note or not later:
            return self.note
        if len(later) == self.checked == self.candidates:
            return ""
        unchecked = len(kernels) - len(later)
        return _fell_back(self.checked, self.candidates, self.stopped, unchecked, len(later))


def candidates(index: DumpIndex) -> list[DumpModule]:
    """The modules a replay can check: a snapshot (real inputs) and a module to compile.

    Newest execution first, since the check that failed ran after the culprit; helper
    modules (single jnp primitives) last, as they are almost never the bug.
    """
    replayable = [
        m
        for m in index.modules
        if m.newest_snapshot is not None
        and (m.first(Role.BEFORE_PROTO) or m.first(Role.BEFORE_TEXT))
    ]

    def newest_first(m: DumpModule) -> tuple[bool, float, int]:
        snap = m.newest_snapshot
        return (is_helper(m), -(snap.mtime if snap else 0.0), -m.id)

    return sorted(replayable, key=newest_first)


def reason(verdict: Verdict) -> str:
    """Why a module was chosen, from its verdict's numbers."""
    n = verdict.numbers
    ref = n.get("reference", "op-by-op")
    notes = n.get("notes")
    if isinstance(notes, list) and notes:
        return f"its output differs from the {ref} reference: {notes[0]}"
    max_abs = n.get("max_abs")
    diff = f"{max_abs:.3g}" if isinstance(max_abs, int | float) else "?"
    return (
        f"its output differs from the {ref} reference: max abs diff {diff}, "
        f"{n.get('mismatches', '?')} of {n.get('elements', '?')} elements"
    )


def _said(verdict: Verdict) -> str:
    if verdict.outcome is Outcome.REPRODUCED_WRONG:
        return reason(verdict)
    if verdict.outcome is Outcome.NOT_REPRODUCED and verdict.failure is None:
        if verdict.numbers.get("reference") == "no reference":
            return f"no reference to compare with: {verdict.evidence[:160]}"
        return "matches the reference"
    return f"{verdict.outcome.value}: {verdict.evidence[:160]}"


def search(
    root: Path,
    index: DumpIndex,
    expected: Failure,
    *,
    pace: Pace,
    timeout: float,
    ui: Ui,
    arrays: Path | None = None,
    limit: int = 3,
    context: RunContext = UNRECORDED,
    spares: Spares | None = None,
) -> Differential:
    """Replay the ``candidates`` of the dump folder ``root`` against the op-by-op reference
    until ``limit`` of them differ, all are checked, or the ``pace``'s budget is spent.

    Up to the ``pace``'s batch of modules share a child (``replay.batch``), so jax is imported
    once for them. A child gets ``timeout`` seconds, never more than the budget has left; a replay
    cut short by the budget says nothing and is not counted. ``arrays``: where each
    replay's arrays are kept (a subfolder per module), so its verdict can stand for
    collect's replay. ``context``: the run's flags and memory cap, applied as the replay
    stage applies them (``replay.context``), so a module replays here as it would there; the
    search replays under jaxlib, whose children it shares between modules. Ctrl-C stops the
    search, not collect: the heuristics choose then.

    Where a platform keeps its replay child (a TPU: ``children.keeps``), where ``spares``
    are given (the program held at its main module's end, ``Spares.hold``), or where
    replays were made ahead, each module is replayed alone, through them where given, the
    kept child serving the next: that way a replay made ahead by the program
    (``children.Ahead``) is taken, which a batch's child never asks.
    """
    pool = candidates(index)
    limits = _Limits(timeout, context)
    run = _Search(root, expected, ui, arrays, len(pool), limits, pace.budget, pace.clock)
    queue = list(pool)
    with contextlib.ExitStack() as stack:
        if spares is None and (any_made_ahead() or any(keeps(m.platform) for m in pool)):
            spares = stack.enter_context(Spares())
        run.spares = spares
        try:
            while queue and len(run.found) < limit and not run.stopped:
                group = _group(queue, 1 if spares is not None else pace.batch, run.input_of)
                if len(group) == 1:
                    run.solo(group[0], number=len(pool) - len(queue))
                    continue
                run.batch(group, number=len(pool) - len(queue) - len(group) + 1, limit=limit)
                # The modules the child did not reach go back to the front of the queue.
                queue[:0] = [m for m in group if m.label not in run.done]
        except KeyboardInterrupt:
            run.stopped = "it was interrupted"
    unchecked = sum(protocol.KERNEL_ONLY in v.evidence for v in run.verdicts)
    note = "" if run.found else _fell_back(len(run.verdicts), len(pool), run.stopped, unchecked)
    if note:
        ui.warn(note)
    return Differential(tuple(run.found), tuple(run.verdicts), len(pool), note, run.stopped)


def _group(
    queue: list[DumpModule], size: int, input_of: Callable[[DumpModule], ReplayInput | None]
) -> list[DumpModule]:
    """Take from the front of ``queue`` up to ``size`` modules that one child can replay:
    one platform, one set of start-up flags."""
    first = queue.pop(0)
    group = [first]
    head = input_of(first)
    while queue and len(group) < size and head is not None:
        inp = input_of(queue[0])
        if inp is None or (inp.platform, env_flags(inp)) != (head.platform, env_flags(head)):
            break
        group.append(queue.pop(0))
    return group


class _Search:
    """The search's state: what it checked, what it found, and why it stopped."""

    def __init__(
        self,
        root: Path,
        expected: Failure,
        ui: Ui,
        arrays: Path | None,
        total: int,
        limits: _Limits,
        budget: float,
        clock: Callable[[], float],
    ) -> None:
        self.root, self.expected, self.ui, self.arrays = root, expected, ui, arrays
        self.total, self.limits, self.budget, self.clock = total, limits, budget, clock
        self.started = clock()
        self.verdicts: list[Verdict] = []
        self.found: list[Chosen] = []
        self.done: set[str] = set()
        self.stopped = ""
        self._inputs: dict[str, ReplayInput | None] = {}
        self.spares: Spares | None = None  # the children (or the held program) replaying

    def input_of(self, module: DumpModule) -> ReplayInput | None:
        if module.label not in self._inputs:
            inp = replay_input(module.label, module_files(self.root, module), module.platform)
            if inp is not None:
                inp = self.limits.context.input(inp)
            self._inputs[module.label] = inp
        return self._inputs[module.label]

    def _time_left(self) -> float | None:
        """Seconds a child may take now; None (and ``stopped`` says so) when none are left."""
        left = self.budget - (self.clock() - self.started)
        if left < MIN_CHECK_SECONDS:
            self.stopped = f"the {self.budget:g} s budget (--budget) ran out"
            return None
        return min(self.limits.timeout, left)

    def _keep(self, module: DumpModule) -> Path | None:
        return self.arrays / module.label if self.arrays is not None else None

    def _memory(self, inp: ReplayInput) -> int | None:
        return self.limits.context.memory_limit(inp)

    def solo(self, module: DumpModule, *, number: int) -> None:
        """Replay ``module`` in a child of its own."""
        self.done.add(module.label)
        inp = self.input_of(module)
        timeout = self._time_left()
        if inp is None or timeout is None:
            return
        verdict = replay(
            inp,
            expected=self.expected,
            options=ReplayOptions(
                timeout=timeout,
                memory_limit=self._memory(inp),
                keep_arrays=self._keep(module),
                spares=self.spares,
            ),
        )
        if self.clock() - self.started >= self.budget and not verdict.reproduced:
            self.stopped = f"the {self.budget:g} s budget (--budget) ran out"
            return
        self.record(module, verdict, number=number)

    def batch(self, group: Sequence[DumpModule], *, number: int, limit: int) -> None:
        """Replay ``group`` in one child; those it did not finish, alone (the first) or
        later (the rest)."""
        timeout = self._time_left()
        if timeout is None:
            return
        inps = [inp for m in group if (inp := self.input_of(m)) is not None]
        verdicts = replay_batch(
            inps,
            self.expected,
            timeout=timeout,
            memory_limit=self._memory(inps[0]),
            keep_arrays=[self._keep(m) for m in group],
        )
        for offset, module in enumerate(group[: len(verdicts) + 1]):
            if len(self.found) >= limit or self.stopped:
                return
            verdict = verdicts[offset] if offset < len(verdicts) else None
            if verdict is None:
                self.solo(module, number=number + offset)
            else:
                self.done.add(module.label)
                self.record(module, verdict, number=number + offset)

    def record(self, module: DumpModule, verdict: Verdict, *, number: int) -> None:
        self.verdicts.append(verdict)
        self.ui.say(f"checking {number}/{self.total} {module.label}: {_said(verdict)}")
        if verdict.outcome is Outcome.REPRODUCED_WRONG:
            self.found.append(Chosen(module, (reason(verdict),), DIFFERS_SCORE))


def _fell_back(
    checked: int, candidates: int, stopped: str, unchecked: int = 0, interpreted: int = 0
) -> str:
    """What the bundle's notes say when the search found nothing; ``unchecked`` of the
    ``checked`` modules ran a Pallas kernel that no reference can check, ``interpreted``
    more one that the kernel's interpret mode judged after the search."""
    fallback = "so the choice falls back to the other evidence"
    if not candidates:
        return (
            "no module has real inputs (a snapshot) to replay against the op-by-op reference, "
            + fallback
        )
    if unchecked and unchecked == checked == candidates:
        return (
            f"the {_modules(candidates)} with real inputs {'holds' if candidates == 1 else 'hold'} "
            "a Pallas kernel that runs only on the TPU, which no reference can check, " + fallback
        )
    kernels = f" ({unchecked} of them could not be checked: a Pallas kernel)" if unchecked else ""
    if interpreted:
        kernels += (
            f" ({interpreted} of them a Pallas kernel, judged after the search by its "
            "interpret mode)"
        )
    if stopped:
        return (
            f"the search for the module that computes the wrong value stopped after "
            f"{checked} of {candidates} modules with real inputs ({stopped}){kernels}; "
            f"none differed from its reference, {fallback}"
        )
    return (
        f"none of the {candidates} modules with real inputs differs from its op-by-op "
        f"reference when replayed on them{kernels}, {fallback}"
    )


def _modules(n: int) -> str:
    return "1 module" if n == 1 else f"{n} modules"


@dataclass(frozen=True)
class _Limits:
    timeout: float
    context: RunContext


def merged(selection: Selection, diff: Differential, *, limit: int) -> Selection:
    """``selection`` with the modules the search found ahead, each with its reason first."""
    if not diff.found:
        return selection
    others = {c.module.label: c for c in selection.chosen}
    chosen: list[Chosen] = []
    for c in diff.found:
        before = others.pop(c.module.label, None)
        chosen.append(Chosen(c.module, (*c.reasons, *(before.reasons if before else ())), c.score))
    if not selection.guess:
        chosen.extend(others.values())
    chosen = chosen[:limit]
    labels = {c.module.label for c in chosen}
    rest = tuple(label for label in (*selection.others, *others) if label not in labels)
    return Selection(tuple(chosen), guess=False, others=rest)


def known_verdicts(diff: Differential | None, chosen: Sequence[Chosen]) -> dict[str, Verdict]:
    """The verdicts the search already has for ``chosen`` modules, by label."""
    if diff is None:
        return {}
    labels = {c.module.label for c in chosen}
    return {v.module: v for v in diff.verdicts if v.module in labels}
