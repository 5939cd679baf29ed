"""Delta debugging of the entry computation: the smallest module that fails the same way.

1. Root search: the earliest instruction (in post order) that, made the root, still fails;
   a tuple root first gives way to the one output that fails (hlo_bisect's two trims).
2. Cuts, nearest the root first: an instruction becomes a new parameter that holds its own
   value from the original run, so its whole operand cone dies and no surviving value
   changes. For crashes (where values do not matter) an instruction may also be bypassed
   to a same-shaped operand. Wrong results take value-preserving edits only: any other edit
   makes a reference that the candidate legitimately differs from.
3. Dead code and unused parameters go after every edit (``hlo_text``).
4. Inside the computations the entry calls (``reduce_inner``): calls inlined, dead code
   dropped, and for crashes instructions replaced by same-shaped values at hand or zeros,
   whiles and calls bypassed. Steps 1 and 2 then run again on the new entry.
5. For crashes, a called computation may become the entry (hlo_bisect's
   ``--all_computations``) when nothing else helps. Steps 1 to 4 then start again on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xla_bugkit.shrink import hlo_text, reduce_inner
from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.session import Exhausted, Session
from xla_bugkit.shrink.step import Step

# Opcodes that are leaves already, or whose value is no plain array to cut.
_UNCUTTABLE = frozenset({"parameter", "constant", "iota", "get-tuple-element", "tuple"})


@dataclass(frozen=True)
class Reduction:
    best: Candidate
    before: int  # instructions of the starting module (all computations)
    exhausted: bool  # the budget ran out first: ``best`` is the last checkpoint


def reduce_module(
    session: Session, start: Candidate, checkpoint: Callable[[Candidate], None]
) -> Reduction:
    """Shrink ``start`` (which fails as ``session.oracle`` says) until no edit keeps the bug
    or the budget is spent; ``checkpoint`` gets each accepted candidate."""
    step = Step(session, start, start.instruction_count(), checkpoint)
    try:
        _root_search(step)
        _cuts(step)
        while _round(step):
            _root_search(step)
            _cuts(step)
    except Exhausted:
        return Reduction(step.best, step.before, exhausted=True)
    return Reduction(step.best, step.before, exhausted=False)


def _root_search(step: Step) -> None:
    base = step.best
    order = [i.name for i in base.entry if hlo_text.is_array(i)]
    root = base.root
    if root.opcode == "tuple":
        outputs = [o for o in dict.fromkeys(root.operands) if o in order]
        failing = next((o for o in outputs if step.accept(hlo_text.with_root(base, o))), None)
        if failing is None:
            return  # no single output fails alone: keep them all
        high = order.index(failing)
    elif root.name in order:
        high = order.index(root.name)
    else:
        return
    low = 0
    while low < high:
        middle = (low + high) // 2
        if step.accept(hlo_text.with_root(base, order[middle])):
            high = middle
        else:
            low = middle + 1


def _nearest_root_first(c: Candidate) -> list[str]:
    by_name = {i.name: i for i in c.entry}
    seen: dict[str, None] = {}
    layer = [c.root.name]
    while layer:
        following: list[str] = []
        for name in layer:
            if name in seen or name not in by_name:
                continue
            seen[name] = None
            following.extend(by_name[name].operands)
        layer = following
    return [n for n in seen if n != c.root.name and by_name[n].opcode not in _UNCUTTABLE]


def _cuts(step: Step) -> None:
    # Each instruction is tried once (in ``step.failed``, across rounds too): a cut that lost
    # the bug seldom keeps it after another cut, and retrying every one after each success
    # would square the probes.
    tried = step.failed
    changed = True
    while changed:
        changed = False
        for name in _nearest_root_first(step.best):
            current = {i.name: i for i in step.best.entry}
            if name not in current or not hlo_text.is_array(current[name]):
                continue
            if ("cut", name) in tried:
                continue
            tried.add(("cut", name))
            if step.accept(hlo_text.cut(step.best, name)):
                changed = True
                continue
            if step.session.oracle.wrong_result:
                continue
            for operand in hlo_text.same_shape_operands(step.best, current[name]):
                if step.accept(hlo_text.bypass(step.best, name, operand)):
                    changed = True
                    break


def _round(step: Step) -> bool:
    """Edits beyond the entry's cuts; True when one was accepted."""
    progressed = reduce_inner.inline_calls(step)
    progressed = reduce_inner.forward_tuples(step) or progressed
    progressed = reduce_inner.inside(step) or progressed
    if progressed or step.session.oracle.wrong_result:
        return progressed
    return _descend(step)


# How many called computations, largest first, may be tried as the entry at each level.
DESCEND_TRIES = 6


def _descend(step: Step) -> bool:
    """Make the first called computation that fails alone the entry; False when none does."""
    c = step.best
    sizes = {n: len(c.computations[n]) for n in c.reached()}
    for name in sorted(sizes, key=lambda n: -sizes[n])[:DESCEND_TRIES]:
        promoted = hlo_text.as_entry(c, name)
        if hlo_text.array_parameters_only(promoted) and step.accept(promoted):
            return True
    return False
