"""A reference result by op-by-op execution, the way JAX's eager mode runs ops.

Each instruction of the entry computation is compiled and run on its own, as a tiny module
whose parameters are the instruction's operands (the computations it calls, such as a
reduce's ``to_apply`` or a while's body, are copied in). Whole-module optimizations (fusion,
algebraic simplification across ops, layout changes) therefore never touch the reference.

A sum (a ``reduce`` or ``reduce-window`` whose computation adds) has no order: XLA may add
its terms in any, and where its finite terms of one sign add up past the type's largest
value and those of the other sign pull back, the order decides whether a partial sum
overflows (+max, -max, +max, ... is 0 added in turn, and NaN when the +max are added first:
inf - inf). There the reference has no value: it is NaN, which
proves nothing of the output (``compare``'s unreferenced elements), and ``run_op_by_op``
names the sums (``protocol.UNORDERED``).

The module is read through ``hlo.parser``. Runs inside the replay child: it compiles with
jaxlib.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from xla_bugkit import jaxlib_adapter
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo.parser import (
    Instruction,
    Module,
    ShapeTree,
    Value,
    called_computations,
    closing_bracket,
    parse_module,
    parse_shape,
)
from xla_bugkit.proc import usable_cores
from xla_bugkit.replay import protocol

_INDEX = re.compile(r"\bindex=(\d+)")
# Partitioning annotations: meaningless on one device, and Shardy's frontend attributes
# name a mesh that only the whole module declares (XLA aborts on "Mesh not found").
_PARTITIONING = re.compile(r", (?:sharding|frontend_attributes)=\{")
# Custom calls that only annotate a value for the partitioners: op by op, the value passes.
_ANNOTATION = re.compile(r'custom_call_target="(?:Sharding|xla\.sdy\.FuncResultSharding)"')
# Ops that sum their terms in an order XLA leaves open, when their computation adds.
_SUMS = ("reduce", "reduce-window")
_PRODUCTS = ("dot", "convolution")  # each element a sum of products of its two operands
_TO_APPLY = re.compile(r"\bto_apply=%?([\w.\-]+)")
_ADDS = re.compile(r"^\s*ROOT \S+ = \S+ add\(")


class OpByOpError(BugkitError):
    """One instruction could not be run on its own; the message names it."""


def _callees(module: Module, instruction: Instruction) -> list[str]:
    """The computations ``instruction`` needs, transitively, in the module's order."""
    needed: set[str] = set()
    todo = called_computations([instruction.line])
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(called_computations(module.computations.get(name, [])))
    return [name for name in module.computations if name in needed]


def _parameter_lines(name: str, tree: ShapeTree, counter: list[int]) -> list[str]:
    """Lines declaring operand ``name``: leaf parameters, rebuilt into tuples as needed."""
    if isinstance(tree, str):
        counter[0] += 1
        return [f"  {name} = {tree} parameter({counter[0] - 1})"]
    lines: list[str] = []
    parts = [f"{name}.bk{i}" for i in range(len(tree))]
    for part, sub in zip(parts, tree, strict=True):
        lines.extend(_parameter_lines(part, sub, counter))
    lines.append(f"  {name} = {_shape_text(tree)} tuple({', '.join(parts)})")
    return lines


def _shape_text(tree: ShapeTree) -> str:
    return tree if isinstance(tree, str) else f"({', '.join(_shape_text(t) for t in tree)})"


def _unpartitioned(line: str) -> str:
    while (m := _PARTITIONING.search(line)) is not None:
        line = line[: m.start()] + line[closing_bracket(line, m.end() - 1) + 1 :]
    return line


def tiny_module(module: Module, instruction: Instruction, shapes: dict[str, str]) -> str:
    """HLO text of a module that runs ``instruction`` alone on its operands as parameters."""
    lines = ["HloModule bugkit_op", ""]
    for name in _callees(module, instruction):
        lines.extend([*map(_unpartitioned, module.computations[name]), ""])
    lines.append("ENTRY bugkit_entry {")
    counter = [0]
    for operand in dict.fromkeys(instruction.operands):
        lines.extend(_parameter_lines(operand, parse_shape(shapes[operand]), counter))
    lines.extend([f"  ROOT {_unpartitioned(instruction.line)}", "}", ""])
    return "\n".join(lines)


def leaves(value: Value) -> list[np.ndarray]:
    """The arrays of a value, depth first (the order XLA flattens tuples in)."""
    if isinstance(value, tuple):
        return [leaf for part in value for leaf in leaves(part)]
    return [value]


def _rebuild(tree: ShapeTree, flat: list[np.ndarray]) -> Value:
    if isinstance(tree, str):
        return flat.pop(0)
    return tuple(_rebuild(sub, flat) for sub in tree)


Runner = Callable[[str, list[np.ndarray]], list[np.ndarray]]


def compile_and_run(platform: str, overrides: Sequence[jaxlib_adapter.Override] = ()) -> Runner:
    """A runner that compiles HLO text with jaxlib (cached by text) and executes it.

    ``overrides`` are per-compile DebugOptions settings (see ``jaxlib_adapter.compile``).
    """
    return CompilingRunner(platform, tuple(overrides))


class CompilingRunner:
    """Compiles HLO text with jaxlib, once per text, and executes it. ``ahead`` starts
    compiling the texts a caller will run next on the machine's other cores (XLA compiles
    without holding the GIL): op by op, the ops compile while earlier ones run."""

    def __init__(self, platform: str, overrides: tuple[jaxlib_adapter.Override, ...]) -> None:
        self.platform, self.overrides = platform, overrides
        self._compiled: dict[str, Future[jaxlib_adapter.Executable]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, text: str, args: list[np.ndarray]) -> list[np.ndarray]:
        if text not in self._compiled:
            self._compiled[text] = _done(lambda: self._compile(text))
        return jaxlib_adapter.execute(self._compiled[text].result(), args)

    def ahead(self, texts: Sequence[str]) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_AHEAD, thread_name_prefix="xla-bugkit-compile")
        for text in texts:
            if text not in self._compiled:
                self._compiled[text] = self._pool.submit(self._compile, text)

    def close(self) -> None:
        """Stop compiling ahead: what has not started is dropped, and no thread outlives the
        call (a process that forks later must not inherit one inside XLA)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._compiled = {t: f for t, f in self._compiled.items() if not f.cancelled()}

    def _compile(self, text: str) -> jaxlib_adapter.Executable:
        mlir = jaxlib_adapter.hlo_proto_to_stablehlo(jaxlib_adapter.hlo_text_to_module_bytes(text))
        return jaxlib_adapter.compile(mlir, platform=self.platform, overrides=self.overrides)


def _done(
    compile_now: Callable[[], jaxlib_adapter.Executable],
) -> Future[jaxlib_adapter.Executable]:
    """A compile made here, as a finished future (its error raised where it is waited on)."""
    future: Future[jaxlib_adapter.Executable] = Future()
    try:
        future.set_result(compile_now())
    except Exception as e:
        future.set_exception(e)
    return future


# Compiles under way at once, ahead of the op being run (which mostly waits for them).
_AHEAD = max(1, min(4, usable_cores()))


def run_op_by_op(text: str, args: Sequence[Value], run: Runner) -> list[np.ndarray]:
    """Evaluate the entry computation of HLO ``text`` one instruction at a time.

    Returns the root's arrays, flattened. Raises ``OpByOpError`` naming the first
    instruction that cannot run alone. A sum whose finite terms can overflow in some order is
    NaN where they can, and named in a ``protocol.UNORDERED`` line (see the module's
    docstring).
    """
    module = parse_module(text)
    unordered: list[str] = []
    values = entry_values(text, args, run, unordered=unordered)
    for said in unordered:
        protocol.say(protocol.UNORDERED, said)
    root = next((i for i in module.entry if i.is_root), module.entry[-1])
    return leaves(values[root.name])


def entry_values(
    text: str, args: Sequence[Value], run: Runner, *, unordered: list[str] | None = None
) -> dict[str, Value]:
    """The value of every entry instruction of HLO ``text``, each computed on its own.
    ``unordered``: where given, a sum's elements whose finite terms can overflow in some
    order are NaN, and each such sum is said there (``_unordered``)."""
    module = parse_module(text)
    values: dict[str, Value] = {}
    shapes = {i.name: i.shape for i in module.entry}
    if isinstance(run, CompilingRunner):
        run.ahead([tiny_module(module, i, shapes) for i in module.entry if _compiled_alone(i)])
    try:
        for instruction in module.entry:
            value = _evaluate(module, instruction, values, shapes, args, run)
            summed = _is_sum(module, instruction) or _is_products(instruction)
            if unordered is not None and summed:
                value = _settle(module, instruction, value, values, shapes, run, unordered)
            values[instruction.name] = value
    finally:
        if isinstance(run, CompilingRunner):
            run.close()
    return values


def _compiled_alone(instruction: Instruction) -> bool:
    """Whether ``_evaluate`` compiles ``instruction`` (the rest is plumbing it does itself)."""
    if instruction.opcode in ("parameter", "tuple", "get-tuple-element"):
        return False
    return not (instruction.opcode == "custom-call" and _ANNOTATION.search(instruction.line))


def _evaluate(
    module: Module,
    instruction: Instruction,
    values: dict[str, Value],
    shapes: dict[str, str],
    args: Sequence[Value],
    run: Runner,
) -> Value:
    # Parameters and tuple plumbing need no compiler; everything else runs as a tiny module.
    if instruction.opcode == "parameter":
        number = int(instruction.line.split("parameter(", 1)[1].split(")", 1)[0])
        return args[number]
    if instruction.opcode == "tuple":
        return tuple(values[o] for o in instruction.operands)
    if instruction.opcode == "custom-call" and _ANNOTATION.search(instruction.line):
        return values[instruction.operands[0]]
    if instruction.opcode == "get-tuple-element":
        index = _INDEX.search(instruction.line)
        tup = values[instruction.operands[0]]
        if index is not None and isinstance(tup, tuple):
            return tup[int(index.group(1))]
    text = tiny_module(module, instruction, shapes)
    flat = [leaf for o in dict.fromkeys(instruction.operands) for leaf in leaves(values[o])]
    try:
        outputs = run(text, flat)
    except Exception as e:  # jaxlib's status exceptions and our own BugkitErrors alike
        raise OpByOpError(f"{instruction.name} ({instruction.opcode}) fails alone: {e}") from e
    return _rebuild(parse_shape(instruction.shape), list(outputs))


def _is_sum(module: Module, instruction: Instruction) -> bool:
    """A one-result ``reduce`` or ``reduce-window`` whose computation adds its two terms."""
    if instruction.opcode not in _SUMS or instruction.shape.startswith("("):
        return False
    applied = _TO_APPLY.search(instruction.line)
    lines = module.computations.get(applied.group(1), []) if applied else []
    return any(_ADDS.match(line) for line in lines)


def _settle(
    module: Module,
    instruction: Instruction,
    value: Value,
    values: dict[str, Value],
    shapes: dict[str, str],
    run: Runner,
    unordered: list[str],
) -> Value:
    """``value``, a sum's or a dot's (or a convolution's, a sum of products), NaN where the
    order XLA adds its terms in decides whether it overflows; said in ``unordered``."""
    if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        return value
    text = tiny_module(module, instruction, shapes)
    if instruction.opcode in _PRODUCTS:
        found = _open_products(instruction, values, value.dtype, lambda args: run(text, args))
        what = "products"
    else:
        found = _open_sum(instruction, values, value.dtype, lambda args: run(text, args))
        what = "finite terms"
    if found is None or not found.any():
        return value
    unordered.append(
        f"{instruction.name} ({instruction.opcode}): at {int(found.sum())} of "
        f"{found.size} elements its {what} of one sign add past {value.dtype}'s "
        "largest value and those of the other pull back, so the order XLA adds them in "
        "decides whether it overflows"
    )
    return np.where(found, np.nan, value).astype(value.dtype)


# The instruction alone, run on arguments of its operands' shapes.
RunAlone = Callable[[list[np.ndarray]], list[np.ndarray]]


def _open_sum(
    instruction: Instruction, values: dict[str, Value], dtype: np.dtype, run: RunAlone
) -> np.ndarray | None:
    """Where a sum has terms of both signs and those of one sign add past ``dtype``'s
    largest value: there adding that sign's first overflows and adding them in turn need
    not, and XLA may take either order. (Terms of one sign that overflow do in any order;
    infinite terms are what they are in any order.) None: it cannot."""
    terms = [leaf for o in dict.fromkeys(instruction.operands) for leaf in leaves(values[o])]
    if any(t.dtype.kind != "f" for t in terms) or _bounded(terms, dtype):
        return None
    (up,) = run([_sign(t, 1) for t in terms])
    (down,) = run([_sign(t, -1) for t in terms])
    return np.asarray((np.isinf(up) | np.isinf(down)) & (up > 0) & (down > 0))


def _is_products(instruction: Instruction) -> bool:
    """A one-result ``dot`` or ``convolution`` of two different operands (one operand
    twice is one parameter of its tiny module: its products cannot be split by sign)."""
    operands = instruction.operands[:2]
    return (
        instruction.opcode in _PRODUCTS
        and not instruction.shape.startswith("(")
        and len(set(operands)) == 2
    )


def _open_products(
    instruction: Instruction, values: dict[str, Value], dtype: np.dtype, run: RunAlone
) -> np.ndarray | None:
    """Where a dot's or a convolution's finite products of one sign add past ``dtype``'s
    largest value while there are products of the other: as for a sum, the order XLA adds
    them in (its tiling, a fusion's) decides whether a partial sum overflows. The products
    of each sign are the op run on the operands split by sign (a+ b+ and a- b- are the
    positive ones). A product that overflows alone counts as such a sum too: the reference
    then proves nothing there. None: it cannot."""
    a, b = (values[o] for o in instruction.operands[:2])
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return None
    if a.dtype.kind != "f" or b.dtype.kind != "f" or _products_bounded(a, b, dtype):
        return None

    def part(sign_a: int, sign_b: int) -> np.ndarray:
        (out,) = run([_sign(a, sign_a), _sign(b, sign_b)])
        return np.asarray(out).astype(np.float64)

    top = float(np.finfo(dtype).max)
    with np.errstate(over="ignore", invalid="ignore"):
        up, down = part(1, 1) + part(-1, -1), part(1, -1) + part(-1, 1)
        return np.asarray(((up > top) | (down > top)) & (up > 0) & (down > 0))


def _products_bounded(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> bool:
    """Whether no element of a dot or convolution of ``a`` and ``b`` can have finite
    products of one sign that add past ``dtype``'s largest value: each pairs an element of
    one operand with at most one of the other, so |sum| <= sum|a| * max|b|."""
    with np.errstate(over="ignore", invalid="ignore"):
        fa, fb = (np.abs(np.where(np.isfinite(t), t, 0)).astype(np.float64) for t in (a, b))
        bound = min(fa.sum() * fb.max(initial=0.0), fa.max(initial=0.0) * fb.sum())
    return bool(bound < float(np.finfo(dtype).max) / 2)


def _sign(terms: np.ndarray, sign: int) -> np.ndarray:
    """The magnitudes of the finite ``terms`` of that sign; 0 for the others."""
    with np.errstate(invalid="ignore"):
        chosen = np.isfinite(terms) & (np.sign(terms) == sign)
    return np.where(chosen, np.abs(terms), 0).astype(terms.dtype)


def _bounded(terms: Sequence[np.ndarray], dtype: np.dtype) -> bool:
    """Whether the finite terms of each sign cannot add past ``dtype``'s largest value, in
    any order or grouping (a check in numpy that spares most sums a run of their own)."""
    with np.errstate(over="ignore"):
        sums = [sum(float(np.sum(_sign(t, s), dtype=np.float64)) for t in terms) for s in (1, -1)]
    return max(sums) < float(np.finfo(dtype).max) / 2
