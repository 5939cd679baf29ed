"""collect's run of the program under Pallas's TPU interpret mode: the reference for a
Pallas kernel that returns wrong values on a TPU.

Nothing outside the kernel can check a ``tpu_custom_call``: a replay that runs it again
shares whatever it computes (``replay.KERNEL_ONLY``). Pallas's interpret mode runs the
kernel as written, simulated in the program's own Python, without Mosaic's compiler. So
where the run's failure is a wrong value and the module chosen holds a kernel compiled for
the TPU, the program runs once more with that mode forced on it by the start-up hook
(``run.hook.pallas_interpret``), which keeps the outputs of the module's first call. Those
outputs (``Interpreted``) are what the compiled kernel's replay on the recorded inputs is
judged against, and the bundle's expected.npz; the program's own check under that mode
tells whether the kernel's code gives the wrong values by itself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from xla_bugkit.choose import mosaic
from xla_bugkit.choose.dumps import DumpIndex, DumpModule
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.collecting import workdir
from xla_bugkit.collecting.options import CollectOptions
from xla_bugkit.failure.classify import Kind
from xla_bugkit.hlo.names import program_name
from xla_bugkit.replay import Interpreted
from xla_bugkit.run import evidence_files, hook
from xla_bugkit.run.evidence import ProcessEvidence
from xla_bugkit.run.record import RunRecord
from xla_bugkit.run.rerun import Ending, rerun
from xla_bugkit.ui import Ui

OUTPUTS = "interpreted.npz"  # the call's outputs, laid out as the replay's arrays are
# How long the run under the interpret mode may take without collect's --timeout: the mode
# simulates each kernel in Python, many times slower than the chip, and the outputs kept
# are those of the kernel's first call, often early in the program.
SLOWER = 20.0
MIN_SECONDS = 300.0
# The run on the CPU, tried first: at least CPU_SECONDS, or CPU_SLOWER times the first run.
CPU_SECONDS = 60.0
CPU_SLOWER = 5.0


def reference(
    work: Path,
    run: RunRecord,
    index: DumpIndex,
    chosen: Sequence[Chosen],
    options: CollectOptions,
    ui: Ui,
    *,
    may_run: bool,
) -> dict[str, Interpreted]:
    """The kernel's reference, by module label, where a chosen module needs one
    (``kernel_module``): the program run under the interpret mode (``may_run``), or what a
    kept work dir's run recorded (a bundle made again from it). The hook keeps the first
    call's outputs, so only a run whose replay inputs are each function's first (the
    hook's own capture, not XLA's snapshot of every execution) can be judged by them."""
    module = kernel_module(run, index, chosen)
    if module is None or options.capture.xla_snapshots:
        return {}
    found = interpreted(work, run, module, options, ui) if may_run else kept(work, run, module)
    return {} if found is None else {module.label: found}


def kernel_module(run: RunRecord, index: DumpIndex, chosen: Sequence[Chosen]) -> DumpModule | None:
    """The chosen module whose Pallas kernel the interpret mode can check: one compiled for
    the TPU, holding a kernel, where the run's failure is a wrong value; None where there
    is none (the run needs no second one)."""
    if run.failure.kind is not Kind.WRONG_RESULT:
        return None
    for c in chosen:
        if c.module.platform == "tpu" and mosaic.has_kernel(index, c.module):
            return c.module
    return None


def interpreted(
    work: Path, run: RunRecord, module: DumpModule, options: CollectOptions, ui: Ui
) -> Interpreted | None:
    """Run the program again, every Pallas kernel in TPU interpret mode, keeping the outputs
    of ``module``'s first call; in ``work/interpret``. None where that call took other
    inputs than in ``run``: its outputs are then no reference.

    The mode simulates the chip's memories and DMAs on the CPU, so the program runs there
    first (``JAX_PLATFORMS=cpu``): no chip to open or shut down, which on a TPU machine is
    most of a run's time. Where that run cannot stand for the program's (it ended before the
    call, or gave it other inputs: a program that asks for the TPU, or computes them with
    the chip's own arithmetic), it runs again on the program's own platform."""
    name = program_name(module.name)
    timeout = options.timeout or max(MIN_SECONDS, run.duration * SLOWER)
    ui.say(
        f"{module.label} holds a Pallas kernel that no reference outside it can check: "
        "running the program again with Pallas's TPU interpret mode forced on it, whose "
        f"outputs of {name} are the kernel's reference (at most {timeout:.0f} s)"
    )
    # The CPU's run is bounded by the program's own pace too: a program the chip runs in
    # seconds may take the CPU long, and its run on the chip is what is left then.
    on_cpu = min(timeout, max(CPU_SECONDS, run.duration * CPU_SLOWER))
    with ui.phase("running under Pallas's interpret mode"), ui.timed("interpret"):
        found, stopped, other = _interpret_run(work, run, module, options, on_cpu, cpu=True)
        where = "on the CPU"
        if other:
            ui.say(f"on the CPU, {other}: running it under the mode on its own platform")
            found, stopped, other = _interpret_run(work, run, module, options, timeout, cpu=False)
            where = f"on the {module.platform.upper()}" if module.platform else "on its platform"
    if other:
        # Its inputs came from elsewhere than the program's code (unseeded random numbers, a
        # file that changed): outputs of other inputs would make right values look wrong.
        ui.warn(
            f"not judged by Pallas's interpret mode: {name} took other inputs in the run under "
            "it than in the first run (the program does not give a function the same inputs "
            "from one run to the next)"
        )
        return None
    ui.say(_said(found, stopped, where))
    return found


def _interpret_run(
    work: Path,
    run: RunRecord,
    module: DumpModule,
    options: CollectOptions,
    timeout: float,
    *,
    cpu: bool,
) -> tuple[Interpreted, str, str]:
    """One run of the program under the interpret mode (on the CPU where ``cpu``): what it
    kept of ``module``'s first call, how it was stopped if it was, and why it cannot stand
    for the program's run where it cannot ("" where it can, or where no other platform
    would change that)."""
    folder = work / workdir.INTERPRET
    shutil.rmtree(folder, ignore_errors=True)
    name = program_name(module.name)
    env = {
        **os.environ,
        hook.ENV_PALLAS_INTERPRET: name,
        hook.ENV_PALLAS_SHAPES: _shapes(run, module),
    }
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    again = rerun(
        run.command,
        dump_dir=folder / workdir.DUMP,
        log_path=folder / workdir.LOG,
        ending=Ending(timeout),
        echo=False,
        base_env=env,
        processes=folder / workdir.PROCESSES,
        capture=options.capture,
    )
    # A program stopped before its end never ran its check: whether it passes is not known.
    stopped = _stopped(again, timeout)
    found = read(folder, name, passed=None if stopped else not again.failure.kind.is_failure)
    if not same_arguments(_arguments(run.culprit_evidence, module), _kept_arguments(folder)):
        return found, stopped, f"{name} took other inputs than in the first run"
    if found.outputs is None and not found.error:
        # The program ended before the call: its own failure is why (a kernel the mode
        # cannot run raises as the program traces it).
        why = again.failure.headline.strip() if again.failure.kind.is_failure else ""
        why = f"the program was {stopped}, before it called {name}" if stopped else why
        found = Interpreted(None, why or f"the program never called {name} under it")
        if cpu and not again.interrupted:
            ended = f"the program ended before it called {name} ({found.error[:200]})"
            return found, stopped, found.error if stopped else ended
    return found, stopped, ""


def _stopped(again: RunRecord, timeout: float) -> str:
    """How the run under the interpret mode was stopped ("stopped at its bound of 90 s"),
    or "" where the program ended by itself."""
    if again.timed_out:
        return f"stopped at its bound of {timeout:.0f} s"
    return "stopped by the user" if again.interrupted else ""


def _arguments(processes: Sequence[ProcessEvidence], module: DumpModule) -> Path | None:
    """The arguments the hook saved of ``module``'s first call in the run."""
    calls = (e for p in processes for e in p.events if e.kind == "execute" and e.id == module.id)
    return next((e.args for e in calls if e.args is not None), None)


def _kept_arguments(folder: Path) -> Path | None:
    """The arguments of the call whose outputs the run under the interpret mode kept."""
    events = (e for p in evidence_files.read(folder / workdir.PROCESSES) for e in p.events)
    return next((e.args for e in events if e.outputs is not None and e.args), None)


def same_arguments(first: Path | None, again: Path | None) -> bool:
    """Whether two saved sets of arguments hold the same bits (True where either is missing:
    nothing says they differ)."""
    if first is None or again is None or not (first.is_file() and again.is_file()):
        return True
    with np.load(first, allow_pickle=False) as a, np.load(again, allow_pickle=False) as b:
        if a.files != b.files:
            return False
        pairs = ((a[k], b[k]) for k in a.files)
        return all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in pairs)


def _shapes(run: RunRecord, module: DumpModule) -> str:
    """The parameter types ``module`` was compiled for, as the hook recorded its compile
    ("" where it did not): the call kept under the interpret mode is one of that compile."""
    events = (e for p in run.culprit_evidence for e in p.events)
    return next((e.shapes for e in events if e.kind == "compile" and e.id == module.id), "")


def read(folder: Path, name: str, *, passed: bool | None) -> Interpreted:
    """What the run in ``folder`` kept of ``name``'s first call (its outputs, rewritten as
    ``OUTPUTS``), or why the interpret mode could not be forced; ``passed``: the program's
    check under the mode passed."""
    processes = evidence_files.read(folder / workdir.PROCESSES)
    refused = next((p.pallas_interpret for p in processes if p.pallas_interpret), "")
    if refused:
        return Interpreted(None, refused, passed)
    kept = next(
        (e.outputs for p in processes for e in p.events if e.outputs and e.module == name), None
    )
    if kept is None or not kept.is_file():
        return Interpreted(None, "", passed)
    with np.load(kept, allow_pickle=False) as data:
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    # The hook saved the outputs, then their dtypes' names: the replay's own layout
    # (``replay.protocol.save_arrays``) under its own keys.
    *values, names = arrays
    stored = {f"a{i}": v for i, v in enumerate(values)}
    np.savez(folder / OUTPUTS, dtypes=names, **stored)
    return Interpreted(folder / OUTPUTS, "", passed)


def kept(work: Path, run: RunRecord, module: DumpModule) -> Interpreted | None:
    """What a kept work dir's run under the interpret mode recorded of ``module`` (for a
    bundle made again from it, where the program does not run); None where it holds none,
    or where the call took other inputs there than in ``run``. Whether the program's check
    passed there is not kept."""
    folder = work / workdir.INTERPRET
    if not folder.is_dir():
        return None
    if not same_arguments(_arguments(run.culprit_evidence, module), _kept_arguments(folder)):
        return None
    return read(folder, program_name(module.name), passed=None)


def _said(found: Interpreted, stopped: str, where: str) -> str:
    """What the run under the interpret mode showed (``where``: "on the CPU"); ``stopped``:
    how it was stopped, if it was (its check then never ran)."""
    if found.outputs is None:
        return f"Pallas's interpret mode cannot run the kernel: {found.error}"
    check = {True: "passes", False: "fails", None: f"was {stopped or 'stopped'}"}[found.passed]
    return (
        f"under Pallas's interpret mode, {where}, the program {check}; the call's outputs are kept"
    )
