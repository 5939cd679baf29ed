"""Reasons from what each process of the run recorded of itself (the start-up hook's records):
the compilation or execution under way when it stopped, the one that raised, or the last
execution that finished before a runtime failure."""

from __future__ import annotations

from xla_bugkit.choose.dumps import DumpIndex, DumpModule, is_helper, loose_name
from xla_bugkit.failure.classify import Failure, Phase
from xla_bugkit.run.evidence import Event, ProcessEvidence, debug_check


def reason(
    index: DumpIndex, failure: Failure, process: ProcessEvidence, *, several: bool
) -> tuple[DumpModule, bool, str] | None:
    """The module ``process``'s record points at, whether it was under way (in flight, or the one
    that raised) rather than the last to finish before the failure, and why."""
    who = _who(process) if several else "the process"
    busy = process.unfinished
    raised = process.raised
    for event in (busy, raised):
        if event is None:
            continue
        module = _event_module(index, process, event)
        doing = "compiling" if event.kind == "compile" else "executing"
        if module is None:
            return None
        if event is busy:
            seen = f": {event.seen}" if event.seen else ""
            return module, True, f"XLA was {doing} it{_call(event)} when {who} stopped{seen}"
        if (option := debug_check(event.error)) is not None:
            return module, True, _checked(process, event, option)
        error = event.error or ""
        same = _raised_before(index, process, event)
        error = f"{error[:120]}…" if len(error) > 120 else error
        # The program may have caught it and gone on: said as what happened, not as a stop.
        why = f"XLA raised {error} while {doing} it{_call(event)}" + _met(process, event)
        if same:
            more = f" and {len(same) - 3} more" if len(same) > 3 else ""
            why += f"; it raised the same before, in {', '.join(same[:3])}{more}"
        return module, True, why
    # A compile failure is not about executions; a rank that ended well is no evidence.
    if failure.phase is Phase.COMPILE or (several and process.exited and not process.exit_status):
        return None
    for event in reversed(process.events):
        if event.kind == "execute" and event.finished:
            module = _event_module(index, process, event)
            if module is not None and not is_helper(module):
                why = f"the last execution dispatched before {who} failed (it may still have run)"
                return module, False, why
    return None


def on_device(
    index: DumpIndex, process: ProcessEvidence, *, several: bool
) -> list[tuple[DumpModule, str]]:
    """The executions still computing on the device when ``process`` died while it compiled
    another function (jax dispatches asynchronously: a crash in the running computation
    comes while Python has moved on to compiling the next), each with why it is a suspect."""
    busy = process.unfinished
    if busy is None or busy.kind != "compile":
        return []
    who = _who(process) if several else "the process"
    found = []
    for event in process.events:
        if event.kind == "execute" and event.on_device:
            module = _event_module(index, process, event)
            if module is not None and not is_helper(module):
                why = f"XLA was still running it{_call(event)} on the device when {who} died"
                found.append((module, why))
    return found


def _who(process: ProcessEvidence) -> str:
    rank = f" (rank {process.rank})" if process.rank is not None else ""
    return f"process {process.pid}{rank}"


def _raised_before(index: DumpIndex, process: ProcessEvidence, event: Event) -> list[str]:
    """The modules whose earlier compile or execution raised the error ``event`` raised (a
    program that catches it and goes on, one metric after another): the last is chosen,
    and the report says it was not the only one."""
    labels = []
    for e in process.events:
        if e is event:
            break
        if e.error == event.error and e.kind == event.kind:
            m = _event_module(index, process, e)
            if m is not None and m.label not in labels:
                labels.append(m.label)
    return labels


def _checked(process: ProcessEvidence, event: Event, option: str) -> str:
    """Why the call whose outputs jax's own check rejected is chosen: what the check found,
    and where jax's de-optimized rerun of it stopped (the op that made the value)."""
    value = "a NaN" if option == "jax_debug_nans" else "an Inf"
    why = f"the program's {option} found {value} in the outputs of this call{_call(event)}"
    last = next((e for e in reversed(process.events) if e.error), None)
    if last is not None and last is not event:
        op = last.fun or last.module
        why += f"; jax then ran it again op by op (de-optimized), and the check stopped at {op}"
    return why


def _met(process: ProcessEvidence, event: Event) -> str:
    """Where the program met ``event``'s error, when a later call on its outputs raised it
    (jax dispatches asynchronously), as the hook saw that call take them."""
    last = next((e for e in reversed(process.events) if e.error), None)
    if last is None or last is event:
        return ""
    return f"; the program met it in a later call on its outputs{_call(last)}"


def _call(event: Event) -> str:
    """`` (jit(f) on f32[8], f32[8,4])``: a long list of argument types shortened."""
    what = event.fun or event.module
    types = event.shapes.split(", ") if event.shapes else []
    if len(types) > _TYPES_SHOWN:
        types = [*types[: _TYPES_SHOWN - 1], f"and {len(types) - _TYPES_SHOWN + 1} more"]
    return f" ({what}{' on ' + ', '.join(types) if types else ''})" if what else ""


_TYPES_SHOWN = 4  # argument types a reason names, the rest counted


def _event_module(index: DumpIndex, process: ProcessEvidence, event: Event) -> DumpModule | None:
    """The dumped module of ``event``: by number when the hook knew it (same-name siblings
    differ only there), else the newest module of that name, preferring one whose
    compilation did not finish."""
    named = [
        m
        for m in index.modules
        if not event.module or loose_name(m.name) == loose_name(event.module)
    ]
    if event.id is not None:
        same = [m for m in (named or index.modules) if m.id == event.id]
        mine = [m for m in same if _under(index, m, process)]
        found = mine or same
        return found[-1] if found else None
    if not event.module or not named:
        return None
    unfinished = [m for m in named if not m.compiled]
    return (unfinished or named)[-1]


def _under(index: DumpIndex, module: DumpModule, process: ProcessEvidence) -> bool:
    """Whether ``module``'s files are in ``process``'s own dump folder."""
    if process.dump_dir is None or not module.files:
        return False
    path = index.root / module.files[0].path
    return path.parent.resolve() == process.dump_dir.resolve()
