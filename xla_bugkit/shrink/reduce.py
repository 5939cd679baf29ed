"""Delta debugging of the entry computation: the smallest module that fails the same way.

1. Root search: the earliest instruction (in post order) that, made the root, still fails;
   a tuple root first gives way to the one output that fails (hlo_bisect's two trims).
2. Cuts, nearest the root first: an instruction becomes a new parameter that holds its own
   value from the original run, so its whole operand cone dies and no surviving value
   changes. For crashes (where values do not matter) an instruction may also be bypassed
   to a same-shaped operand. Wrong results take value-preserving edits only: any other edit
   makes a reference that the candidate legitimately differs from.
3. Dead code and unused parameters go after every edit (``hlo_text``).
4. For crashes, a called computation may become the entry (hlo_bisect's
   ``--all_computations``): a crash inside a while body or a call is out of reach of cuts
   in the entry. Steps 1 to 3 then start again on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xla_bugkit.shrink import hlo_text
from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.oracle import Answer
from xla_bugkit.shrink.session import Exhausted, Session

# Opcodes that are leaves already, or whose value is no plain array to cut.
_UNCUTTABLE = frozenset({"parameter", "constant", "iota", "get-tuple-element", "tuple"})


@dataclass(frozen=True)
class Reduction:
    best: Candidate
    before: int  # instructions of the starting module (all computations)
    exhausted: bool  # the budget ran out first: ``best`` is the last checkpoint


@dataclass
class _Step:
    session: Session
    best: Candidate
    before: int
    checkpoint: Callable[[Candidate], None]

    def accept(self, candidate: Candidate) -> bool:
        if candidate.text() == self.best.text():
            return False
        if self.session.check(candidate).answer is not Answer.SAME:
            return False
        self.best = candidate
        self.session.accepted += 1
        self.checkpoint(candidate)
        self.session.progress(self.before, candidate.instruction_count())
        return True


def reduce_module(
    session: Session, start: Candidate, checkpoint: Callable[[Candidate], None]
) -> Reduction:
    """Shrink ``start`` (which fails as ``session.oracle`` says) until no edit keeps the bug
    or the budget is spent; ``checkpoint`` gets each accepted candidate."""
    step = _Step(session, start, start.instruction_count(), checkpoint)
    try:
        _root_search(step)
        _cuts(step)
        while not session.oracle.wrong_result and _descend(step):
            _root_search(step)
            _cuts(step)
    except Exhausted:
        return Reduction(step.best, step.before, exhausted=True)
    return Reduction(step.best, step.before, exhausted=False)


def _root_search(step: _Step) -> None:
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


def _cuts(step: _Step) -> None:
    # Each instruction is tried once: a cut that lost the bug seldom keeps it after another
    # cut, and retrying every one after each success would square the probes.
    tried: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name in _nearest_root_first(step.best):
            current = {i.name: i for i in step.best.entry}
            if name not in current or not hlo_text.is_array(current[name]):
                continue
            if name in tried:
                continue
            tried.add(name)
            if step.accept(hlo_text.cut(step.best, name)):
                changed = True
                continue
            if step.session.oracle.wrong_result:
                continue
            for operand in hlo_text.same_shape_operands(step.best, current[name]):
                if step.accept(hlo_text.bypass(step.best, name, operand)):
                    changed = True
                    break


# How many called computations, largest first, may be tried as the entry at each level.
DESCEND_TRIES = 6


def _descend(step: _Step) -> bool:
    """Make the first called computation that fails alone the entry; False when none does."""
    c = step.best
    sizes = {n: len(c.computations[n]) for n in c.reached()}
    for name in sorted(sizes, key=lambda n: -sizes[n])[:DESCEND_TRIES]:
        promoted = hlo_text.as_entry(c, name)
        if hlo_text.array_parameters_only(promoted) and step.accept(promoted):
            return True
    return False
