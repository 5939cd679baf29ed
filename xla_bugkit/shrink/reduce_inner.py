"""The reducer's steps inside called computations (``inner`` makes the edits).

Inlining a ``call`` keeps every value, so wrong results take it too; the entry's op-by-op
values are then computed again, since the cuts of the entry now reach instructions the
original entry did not have. Crashes also take the value-changing edits: an instruction
replaced by a same-shaped value at hand or by zeros, a ``while`` or ``call`` bypassed.
"""

from __future__ import annotations

from xla_bugkit.shrink import hlo_text, inner
from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.step import Step

# Stand-ins tried per instruction: the operands come first, and past a few the rest seldom
# keep a bug that the first ones lost.
STAND_INS = 3
# Instructions that, bypassed in the entry, drop whole computations.
_BYPASSED_IN_ENTRY = frozenset({"while", "call", "conditional"})


def _try(step: Step, key: tuple[str, ...], candidate: Candidate | None, *, shrinks: bool) -> bool:
    """Probe ``candidate`` unless it was tried (or grows the module): True if accepted."""
    if candidate is None or key in step.failed:
        return False
    if shrinks and candidate.instruction_count() >= step.best.instruction_count():
        return False
    if step.accept(candidate):
        return True
    step.failed.add(key)
    return False


def inline_calls(step: Step) -> bool:
    """Inline every call at once, else each call site alone; True if any was accepted."""
    if not inner.call_sites(step.best):
        return False
    accepted = _try(step, ("inline-all",), inner.inline_all(step.best), shrinks=False)
    if not accepted:
        for computation, name in inner.call_sites(step.best):
            present = (computation, name) in inner.call_sites(step.best)
            edit = inner.inline(step.best, computation, name) if present else None
            accepted = _try(step, ("inline", computation, name), edit, shrinks=False) or accepted
    if accepted:
        step.session.add_values(step.best)
    return accepted


def forward_tuples(step: Step) -> bool:
    """Elements taken from a tuple read its operands directly (what inlining leaves)."""
    return _try(step, ("forward",), inner.forward_tuples(step.best), shrinks=True)


def inside(step: Step) -> bool:
    """Dead code, then (crashes) replacements, in every computation, largest first."""
    accepted = False
    names = step.best.reached()
    sizes = {n: len(step.best.computations[n]) for n in names}
    for computation in [step.best.entry_name, *sorted(names, key=lambda n: -sizes[n])]:
        if computation != step.best.entry_name and computation not in step.best.reached():
            continue
        if computation != step.best.entry_name:
            edit = inner.dead_code(step.best, computation)
            accepted = _try(step, ("dead", computation), edit, shrinks=True) or accepted
        if not step.session.oracle.wrong_result:
            accepted = _replacements(step, computation) or accepted
    return accepted


def _replacements(step: Step, computation: str) -> bool:
    accepted = False
    entry = computation == step.best.entry_name
    for target in inner.targets(step.best, computation):
        if computation not in inner.computations(step.best):
            break
        if target.name in inner.loop_control(step.best).get(computation, ()):
            continue  # an endless loop would hang, which says nothing about the bug
        current = {i.name: i for i in inner.instructions(step.best, computation)}
        if target.name not in current:
            continue  # gone with an earlier edit
        target = current[target.name]
        if entry and (hlo_text.is_array(target) or target.opcode not in _BYPASSED_IN_ENTRY):
            continue  # the entry's arrays are the cuts' business
        for by in inner.stand_ins(step.best, computation, target)[:STAND_INS]:
            edit = inner.replace_uses(step.best, computation, target.name, by)
            if _try(step, ("use", computation, target.name, by), edit, shrinks=True):
                accepted = True
                break
        else:
            if not entry:
                key = ("zeros", computation, target.name)
                zeros = inner.zeros(step.best, computation, target.name)
                accepted = _try(step, key, zeros, shrinks=True) or accepted
    return accepted
