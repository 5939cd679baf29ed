"""The shrink of one module, stage by stage: confirm, flags, module, passes, workarounds.

The unmodified module is first replayed three times in fresh processes, the way ``verify``
replays it: a failure that does not show every time is no ground to shrink on. Every later
probe is a child of the probe server (``probe``); this process never loads XLA.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from xla_bugkit import config
from xla_bugkit.errors import BugkitError, ExitCode
from xla_bugkit.failure.classify import Failure, Kind
from xla_bugkit.hlo import flags, hlo_proto, literal
from xla_bugkit.replay import UNRECORDED, ReplayInput, ReplayOptions, RunContext, protocol, replay
from xla_bugkit.shrink import child, flagmin, hlo_text, passes
from xla_bugkit.shrink.around import around_pass
from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.oracle import Answer, Oracle, mismatch_class
from xla_bugkit.shrink.probe import ForkServer
from xla_bugkit.shrink.reduce import reduce_module
from xla_bugkit.shrink.result import STAGES, ShrinkResult
from xla_bugkit.shrink.session import Budget, Exhausted, Session, replay_inputs
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict

EXHAUSTED = "budget exhausted: the result is the best checkpoint so far"
MIN_PROBE_TIMEOUT = 10.0


class NotShrinkable(BugkitError):
    """The unmodified module does not fail (reliably) here: nothing to shrink against."""

    exit_code = ExitCode.NOT_REPRODUCED


@dataclass(frozen=True)
class ShrinkOptions:
    budget: float = 600.0  # seconds of wall time for the probes
    max_probes: int = 1000
    stages: tuple[str, ...] = STAGES
    timeout: float = config.REPLAY_TIMEOUT  # the confirming replays' limit
    confirmations: int = 3
    use_data: bool = True
    probe_timeout: float | None = None  # None: five times the unmodified module's probe
    # The run the module came from: its flags in force and memory cap (``replay.context``).
    context: RunContext = UNRECORDED


@dataclass
class Shrunk:
    """A shrink's result, with the inputs the shrunk module's parameters take."""

    result: ShrinkResult
    inputs: list[np.ndarray]
    verdict: Verdict  # the confirming replay of the unmodified module
    best: Candidate = field(repr=False)
    # ``inputs`` derive from recorded ones: they ship. Otherwise the shrunk module, like the
    # original, runs on the inputs the replay generates, and no inputs ship.
    recorded: bool = True
    proto: bytes = field(default=b"", repr=False)  # the shrunk module's HloProto


def confirm(inp: ReplayInput, expected: Failure | None, options: ShrinkOptions, ui: Ui) -> Verdict:
    """Replay the unmodified module ``options.confirmations`` times in fresh processes."""
    verdicts: list[Verdict] = []
    # A hang's replay waits as long as the run went without progress, as verify's does.
    timeout = expected.replay_timeout(options.timeout) if expected else options.timeout
    for n in range(options.confirmations):
        with ui.phase(f"replaying the unmodified module ({n + 1}/{options.confirmations})"):
            verdicts.append(
                replay(
                    inp,
                    expected=expected,
                    options=ReplayOptions(
                        timeout=timeout,
                        use_data=options.use_data,
                        memory_limit=options.context.memory_limit(inp),
                    ),
                )
            )
    failed = [v for v in verdicts if v.reproduced]
    if not failed:
        raise NotShrinkable(
            f"the unmodified module does not fail here: {verdicts[0].outcome.value}: "
            f"{verdicts[0].evidence}"
        )
    if len(failed) < len(verdicts):
        raise NotShrinkable(f"nondeterministic ({len(failed)}/{len(verdicts)}): not shrunk")
    return failed[0]


def _arguments(inp: ReplayInput, module: Candidate, use_data: bool) -> list[np.ndarray]:
    if inp.snapshot is not None and use_data:
        snapshot = hlo_proto.read_snapshot(inp.snapshot)
        values = [literal.literal_to_numpy(a) for a in snapshot.arguments]
        if all(isinstance(v, np.ndarray) for v in values):
            return [np.asarray(v) for v in values]
        raise BugkitError("the module takes a tuple argument: it cannot be shrunk")
    params = [i for i in module.entry if i.opcode == "parameter"]
    shapes = {hlo_text.parameter_number(i): i.shape for i in params}
    return replay_inputs([shapes[n] for n in range(len(shapes))])


def has_data(inp: ReplayInput, options: ShrinkOptions) -> bool:
    """Whether the module comes with recorded inputs that the shrink may use."""
    return inp.snapshot is not None and options.use_data


def _module_text(server: ForkServer, inp: ReplayInput, work: Path) -> str:
    if inp.hlo.name.endswith(".txt"):
        return inp.hlo.read_text("utf-8")
    spec = {"task": "text", "hlo": str(inp.hlo)}
    run = server.run(work / "text", spec, xla_flags="", timeout=MIN_PROBE_TIMEOUT * 30)
    path = work / "text" / child.TEXT
    if not path.exists():
        raise BugkitError(f"cannot read the module {inp.name}: {run.output.strip()[-300:]}")
    return path.read_text("utf-8")


def _baseline(s: Session, module: Candidate) -> Oracle:
    """The oracle, from one probe of the unmodified module; sets the probe timeout."""
    run = s.run(module)
    if s.oracle.wrong_result:
        reference = s.reference(module)
        outputs = protocol.arrays_path(run.folder, child.OUTPUTS)
        if reference is None or not outputs.exists():
            raise NotShrinkable("the op-by-op reference of the module could not be computed")
        found = mismatch_class(protocol.load_arrays(outputs), reference)
        if found is None:
            raise NotShrinkable("a probe of the unmodified module gives the reference result")
        oracle = Oracle(mismatch=found)
    else:
        oracle = s.oracle
        judged = oracle.judge(run, None)
        if judged.answer is not Answer.SAME:
            seen = judged.failure.describe if judged.failure else judged.answer.value
            raise NotShrinkable(f"a probe of the unmodified module fails otherwise: {seen}")
    if oracle.failure is None or oracle.failure.kind is not Kind.HANG:
        s.timeout = max(MIN_PROBE_TIMEOUT, 5 * run.seconds)
    return oracle


def _oracle_text(oracle: Oracle) -> str:
    if oracle.failure is not None:
        return oracle.failure.describe
    return f"wrong result: {oracle.mismatch} mismatch against the op-by-op reference"


def shrink(
    inp: ReplayInput,
    expected: Failure | None,
    work: Path,
    *,
    options: ShrinkOptions | None = None,
    ui: Ui | None = None,
    checkpoint: Callable[[Candidate], None] | None = None,
) -> Shrunk:
    """Shrink ``inp`` (failing as ``expected``; None: a wrong result), probing in ``work``."""
    options = options or ShrinkOptions()
    ui = ui or Ui()
    started = time.monotonic()
    inp = options.context.input(inp)  # probes and replays alike take the run's flags
    verdict = confirm(inp, expected, options, ui)
    wrong = verdict.outcome is Outcome.REPRODUCED_WRONG
    budget = Budget(options.budget, options.max_probes)
    # Probes run where the replay ran: the module's platform, not whatever is first found.
    with ForkServer({**os.environ, "JAX_PLATFORMS": inp.platform}) as server:
        original = hlo_text.parse(_module_text(server, inp, work))
        s = Session(
            work,
            Oracle(None if wrong else verdict.failure),
            budget,
            _arguments(inp, original, options.use_data),
            flags.admit(inp.xla_flags).flags,  # a stranger's bundle: the replay's rule
            ui,
            server,
            inp.platform,
            timeout=options.timeout,
        )
        # Without recorded inputs, a crash's candidates run on what the replay generates
        # for them, so the shrunk module needs (and ships) no inputs either.
        s.generated_only = not has_data(inp, options) and not wrong
        phase = verdict.failure.phase.value if verdict.failure else "run"
        if wrong or phase == "run":
            s.values = s.load_values(original)
        s.oracle = _baseline(s, original)
        if options.probe_timeout is not None:
            s.timeout = options.probe_timeout
        shrunk = _stages(s, inp, original, options, verdict, checkpoint or (lambda c: None))
        shrunk.proto = _proto(server, shrunk.best, work)
    shrunk.result = replace(shrunk.result, seconds=time.monotonic() - started)
    return shrunk


def _proto(server: ForkServer, module: Candidate, work: Path) -> bytes:
    """The HloProto of ``module`` (jaxlib parses the text, in a child)."""
    folder = work / "proto"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / child.TEXT).write_text(module.text(), "utf-8")
    spec = {"task": "proto", "hlo": str(folder / child.TEXT)}
    run = server.run(folder, spec, xla_flags="", timeout=MIN_PROBE_TIMEOUT * 30)
    path = folder / child.PROTO
    if not path.exists():
        raise BugkitError(f"cannot serialize the shrunk module: {run.output.strip()[-300:]}")
    return path.read_bytes()


def _stages(
    s: Session,
    inp: ReplayInput,
    original: Candidate,
    options: ShrinkOptions,
    verdict: Verdict,
    checkpoint: Callable[[Candidate], None],
) -> Shrunk:
    user_flags = s.xla_flags
    best, notes = original, []
    # needed: the flags the failure was shown to need; reported only when that was tested.
    needed, independent, culprit, found, trace = [], False, None, [], ""
    around: tuple[tuple[str, str], ...] = ()
    try:
        if "flags" in options.stages and user_flags:
            needed = flagmin.needed_flags(s, original, user_flags)
            s.xla_flags = tuple(needed)
            independent = flagmin.module_independent(s, needed)
        elif user_flags:
            notes.append(
                f"the run's {len(user_flags)} XLA flags were all kept, untested "
                "(the flags stage did not run)"
            )
        if "module" in options.stages:
            reduction = reduce_module(s, original, checkpoint)
            best = reduction.best
            if reduction.exhausted:
                raise Exhausted
        if "passes" in options.stages:
            culprit, note, trace = passes.find_culprit(s, best, flagmin.disabled_passes(needed))
            notes += [note] if note else []
        extra = []
        if culprit is not None and culprit.pass_name and culprit.how != "needs-disabled":
            extra.append(f"{flagmin.DISABLED_PASSES}={culprit.pass_name}")
            around = around_pass(s, best, culprit)
        found = flagmin.workarounds(s, best, extra)
    except Exhausted:
        notes.append(EXHAUSTED)
    result = ShrinkResult(
        module=inp.name,
        text=best.text(),
        oracle=_oracle_text(s.oracle),
        instructions_before=original.instruction_count(),
        instructions_after=best.instruction_count(),
        probes=s.probes,
        seconds=s.budget.elapsed(),  # the caller makes it the whole shrink's wall time
        probe_seconds=s.budget.elapsed(),
        culprit=culprit,
        needed_flags=tuple(needed),
        user_flags=len(user_flags),
        unneeded_flags=tuple(f for f in user_flags if f not in needed) if needed else (),
        module_independent=independent,
        workarounds=tuple(found),
        notes=tuple(notes),
        trace=trace,
        around=around,
        stages=options.stages,
        parameters=tuple(
            src.to_json() if has_data(inp, options) else {"generated": True} for src in best.sources
        ),
    )
    return Shrunk(result, s.inputs(best), verdict, best, recorded=has_data(inp, options))


__all__ = ["STAGES", "NotShrinkable", "ShrinkOptions", "Shrunk", "confirm", "shrink"]
