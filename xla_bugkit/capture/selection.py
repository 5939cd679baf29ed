"""Choose the modules that matter for a failure, and say why each was chosen."""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xla_bugkit.capture.dumps import DumpIndex, DumpModule, Role
from xla_bugkit.failure import COMPILING_RE, Failure, Kind, Phase

# Modules JAX compiles for single primitives (jnp helpers, dispatch of one op). They are in
# every dump and are almost never the bug, so they rank below the user's own functions.
HELPER_NAMES = frozenset(
    {
        "convert_element_type", "broadcast_in_dim", "reshape", "iota", "concatenate",
        "squeeze", "expand_dims", "transpose", "_where", "where", "clip", "_reduce_sum",
        "_reduce_max", "_reduce_min", "_multi_slice", "_unstack", "dynamic_slice",
        "dynamic_update_slice", "gather", "scatter", "select_n", "add", "mul", "sub",
        "div", "neg", "integer_pow", "pow", "exp", "log", "sqrt", "copy", "copy_p",
        "random_bits", "random_seed", "random_wrap", "random_unwrap", "threefry2x32",
        "_uniform", "_normal", "_split", "_fold_in", "eq", "ne", "lt", "gt", "le", "ge",
        "max", "min", "abs", "sign", "floor", "ceil", "round", "dot_general", "cumsum",
        "sort", "argmax", "argmin", "_identity_fn", "zeros_like", "full", "_full",
        "reduce_sum", "reduce_max", "reduce_min", "equal", "not_equal", "stage", "less",
        "greater", "multiply", "subtract", "true_divide", "divide", "square", "isnan",
    }
)  # fmt: skip

# Scores: explicit choice > named by the failure > crash evidence > the last-compiled guess.
_EXPLICIT, _COMPILING, _NAMED, _UNFINISHED, _LAST_RUN, _GUESS = 100, 80, 70, 60, 50, 10


@dataclass(frozen=True)
class Chosen:
    module: DumpModule
    reasons: tuple[str, ...]
    score: int


@dataclass(frozen=True)
class Selection:
    chosen: tuple[Chosen, ...]
    guess: bool  # nothing pointed at a module: the choice is the last one compiled
    others: tuple[str, ...] = field(default=())  # labels of every module not chosen


def is_helper(module: DumpModule) -> bool:
    bare = re.sub(r"^(?:jit|pmap|xla_pmap)_", "", module.name)
    return bare in HELPER_NAMES or bare.lstrip("_") in HELPER_NAMES


def _loose(name: str) -> str:
    """Compare JAX names and module names loosely: ``<lambda>`` is dumped as ``jit__lambda``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def search_symbol(index: DumpIndex, modules: Iterable[DumpModule], text: str) -> dict[str, str]:
    """Labels of modules whose text dumps contain ``text``, with the file it was found in.

    Files are memory-mapped and searched with ``find`` (a C loop), not read line by line.
    """
    needle = text.encode()
    found: dict[str, str] = {}
    for module in modules:
        for file in module.files:
            if file.role not in (Role.BEFORE_TEXT, Role.AFTER_TEXT) or file.size == 0:
                continue
            if _file_contains(index.root / file.path, needle):
                found[module.label] = file.path.name
                break
    return found


_MMAP_FROM = 1 << 20  # below this, one read() is cheaper than setting up a mapping


def _file_contains(path: Path, needle: bytes) -> bool:
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size < _MMAP_FROM:
            return needle in f.read()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(needle) >= 0


def select(
    index: DumpIndex,
    failure: Failure,
    output: str,
    *,
    module_re: str | None = None,
    symbol: str | None = None,
    limit: int = 3,
) -> Selection:
    """Rank the modules of ``index`` by the evidence for each; keep the best ``limit``."""
    reasons: dict[str, list[tuple[int, str]]] = {m.label: [] for m in index.modules}
    if module_re:
        pattern = re.compile(module_re)
        for m in index.modules:
            if pattern.search(m.label):
                reasons[m.label].append((_EXPLICIT, f"matches --module {module_re!r}"))
    if symbol:
        for label, file in search_symbol(index, index.modules, symbol).items():
            reasons[label].append((_EXPLICIT, f"{file} contains {symbol!r}"))
    if failure.kind.is_failure:
        _failure_evidence(index, failure, output, reasons)
    return _rank(index, failure, reasons, limit)


def _failure_evidence(
    index: DumpIndex, failure: Failure, output: str, reasons: dict[str, list[tuple[int, str]]]
) -> None:
    if failure.compiling is not None:
        wanted = _loose(f"jit{failure.compiling}")
        matches = [m for m in index.modules if _loose(m.name) == wanted]
        if matches:
            reasons[matches[-1].label].append(
                (_COMPILING, f"JAX was compiling jit({failure.compiling}) when the run stopped")
            )
    tail = _failure_text(output, failure)
    for m in index.modules:
        if re.search(rf"\b{re.escape(m.name)}\b", tail):
            reasons[m.label].append((_NAMED, "named in the failure's output"))
    in_compile = failure.phase is Phase.COMPILE or failure.kind in (Kind.COMPILE_CRASH, Kind.HANG)
    for m in index.modules:
        started = m.first(Role.BEFORE_TEXT) or m.first(Role.BEFORE_PROTO)
        if started and not m.compiled and (in_compile or failure.kind is Kind.CRASH):
            reasons[m.label].append(
                (_UNFINISHED, "before-optimizations files but no after-optimizations files: "
                 "its compilation did not finish")
            )  # fmt: skip
    if failure.phase is not Phase.COMPILE:
        last = _last_snapshot(index.modules)
        if last is not None:
            reasons[last.label].append(
                (_LAST_RUN, "the last execution to start before the failure (newest snapshot)")
            )


def _failure_text(output: str, failure: Failure) -> str:
    """The part of the output that describes the failure: from the last traceback or the
    fatal line on. Names earlier in the log are just what ran before."""
    starts = [output.rfind("Traceback (most recent call last)")]
    if failure.headline:
        starts.append(output.find(failure.headline.split("] ", 1)[-1][:80]))
    start = max(s for s in (*starts, 0) if s >= 0)
    # Compile-log lines name what was compiled, not what failed; keep them out.
    return COMPILING_RE.sub("", output[max(0, start - 2000) :][-200_000:])


def _last_snapshot(modules: Sequence[DumpModule]) -> DumpModule | None:
    # The program's own eager checks run helper modules after the real work; skip them.
    users = [m for m in modules if not is_helper(m)]
    ran = [(snap.mtime, m) for m in users or modules if (snap := m.newest_snapshot)]
    return max(ran, key=lambda t: t[0])[1] if ran else None


def _rank(
    index: DumpIndex, failure: Failure, reasons: dict[str, list[tuple[int, str]]], limit: int
) -> Selection:
    def score(m: DumpModule) -> int:
        best = max((s for s, _ in reasons[m.label]), default=0)
        # A helper keeps its place only when explicit or named evidence points at it.
        return best - 30 if is_helper(m) and best < _NAMED else best

    candidates = [m for m in index.modules if reasons[m.label]]
    # What the user chose (--module, --symbol) is what they get; other evidence only ranks.
    explicit = [m for m in candidates if score(m) >= _EXPLICIT]
    ranked = sorted(explicit or candidates, key=lambda m: (-score(m), -m.id))
    chosen = [Chosen(m, tuple(r for _, r in reasons[m.label]), score(m)) for m in ranked[:limit]]
    guess = not chosen
    if guess and index.modules:
        pool = [m for m in index.modules if not is_helper(m)] or list(index.modules)
        why = (
            "no failure seen: the last function compiled (choose with --module)"
            if not failure.kind.is_failure
            else "a guess: the last module compiled before the failure"
        )
        chosen = [Chosen(pool[-1], (why,), _GUESS)]
    labels = {c.module.label for c in chosen}
    others = tuple(m.label for m in index.modules if m.label not in labels)
    return Selection(tuple(chosen), guess, others)
