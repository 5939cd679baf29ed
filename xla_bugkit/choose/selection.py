"""Choose the modules that matter for a failure, and say why each was chosen."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xla_bugkit import frameworks
from xla_bugkit.choose import allocation, recorded
from xla_bugkit.choose.dumps import DumpIndex, DumpModule, Role, is_helper, loose_name
from xla_bugkit.choose.search import search_symbol
from xla_bugkit.errors import BugkitError
from xla_bugkit.failure import ptxla_log, xla_log
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.failure.compile_log import COMPILING_RE
from xla_bugkit.failure.kinds import KINDS
from xla_bugkit.run.evidence import ProcessEvidence

# Scores: explicit choice > what the process was doing when it died (by module number) >
# named by the failure > crash evidence > the last-compiled guess.
_EXPLICIT, _ALLOCATED, _IN_FLIGHT, _LOG_FATAL, _COMPILING, _LOG_ERROR = 100, 95, 90, 85, 80, 75
_NAMED = 70
_LOG_UNFINISHED, _UNFINISHED, _LOG_LAST, _LAST_EXECUTED, _LAST_RUN, _GUESS = 65, 60, 55, 55, 50, 10

Reasons = dict[str, list[tuple[int, str]]]


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


def select(
    index: DumpIndex,
    failure: Failure,
    output: str,
    *,
    module_re: str | None = None,
    symbol: str | None = None,
    limit: int = 3,
    evidence: Sequence[ProcessEvidence] = (),
) -> Selection:
    """Rank the modules of ``index`` by the evidence for each; keep the best ``limit``.

    ``output`` is the run's output (JAX's compile log and XLA's own log lines in it);
    ``evidence`` what each process of the run recorded about itself (``evidence_files.load``).
    """
    reasons: Reasons = {m.label: [] for m in index.modules}
    if module_re:
        pattern = re.compile(module_re)
        for m in index.modules:
            if pattern.search(m.label):
                reasons[m.label].append((_EXPLICIT, f"matches --module {module_re!r}"))
        _chose_something(index, reasons, f"--module {module_re!r} matches")
    if symbol:
        for label, file in search_symbol(index, index.modules, symbol).items():
            reasons[label].append((_EXPLICIT, f"{file} contains {symbol!r}"))
        _chose_something(index, reasons, f"--symbol {symbol!r} is in")
    if failure.kind.is_failure:
        _failure_evidence(index, failure, output, reasons)
        _graph_evidence(index, output, reasons)
        _log_evidence(index, failure, output, reasons)
        _process_evidence(index, failure, evidence, reasons)
        _allocation_evidence(index, failure, output, reasons)
    return _rank(index, failure, reasons, limit)


def _chose_something(index: DumpIndex, reasons: Reasons, what: str) -> None:
    """The user's choice must choose: one that matches nothing is said, not ignored."""
    if any(reasons.values()):
        return
    labels = [m.label for m in index.modules]
    shown = ", ".join(labels[-5:]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
    raise BugkitError(f"{what} none of the run's {len(labels)} modules ({shown})")


def _failure_evidence(index: DumpIndex, failure: Failure, output: str, reasons: Reasons) -> None:
    if failure.compiling is not None:
        wanted = loose_name(f"jit{failure.compiling}")
        matches = [m for m in index.modules if loose_name(m.name) == wanted]
        if matches:
            when = (
                "XLA raised the error" if failure.kind is Kind.COMPILE_ERROR else "the run stopped"
            )
            reasons[matches[-1].label].append(
                (_COMPILING, f"JAX was compiling jit({failure.compiling}) when {when}")
            )
    if failure.function is not None:
        # TensorFlow names the failing function in its error: "[Op:__inference_f_13]".
        runs = [m for m in index.modules if frameworks.runs_function(m.name, failure.function)]
        if runs:
            reasons[runs[-1].label].append(
                (_COMPILING, f"TensorFlow's error names its function {failure.function}")
            )
    tail = _failure_text(output, failure)
    for m in index.modules:
        if re.search(rf"\b{re.escape(m.name)}\b", tail) and not frameworks.name_is_shared(m.name):
            reasons[m.label].append((_NAMED, "named in the failure's output"))
    for m in index.modules:
        started = m.first(Role.BEFORE_TEXT) or m.first(Role.BEFORE_PROTO)
        if started and not m.compiled and _stopped_in_xla(failure):
            reasons[m.label].append(
                (
                    _UNFINISHED,
                    "before-optimizations files but no after-optimizations files: "
                    "its compilation did not finish",
                )
            )
    if failure.phase is not Phase.COMPILE:
        last = _last_snapshot(index.modules)
        if last is not None:
            reasons[last.label].append(
                (_LAST_RUN, "the last execution to start before the failure (newest snapshot)")
            )


def _allocation_evidence(index: DumpIndex, failure: Failure, output: str, reasons: Reasons) -> None:
    """Out of memory: the module that plans an allocation of exactly the size that failed,
    wherever the error surfaced (an asynchronous one, at a later computation's read)."""
    if not KINDS[failure.kind].out_of_memory_running:
        return
    size = allocation.failed_allocation(_failure_text(output, failure))
    if size is None:
        return
    for module, line in allocation.modules_allocating(index, size):
        reasons[module.label].append(
            (
                _ALLOCATED,
                f"its buffer assignment holds the {size:,} bytes XLA could not allocate ({line})",
            )
        )


def _graph_evidence(index: DumpIndex, output: str, reasons: Reasons) -> None:
    """PyTorch/XLA's log: the graph it was compiling or executing when the run failed, by
    the number XLA dumped it under (its graphs share names)."""
    graph = ptxla_log.unfinished(output)
    line = ptxla_log.dumped_as(graph, output) if graph is not None else None
    if graph is None or line is None or (module := _by_log_line(index, line)) is None:
        return
    reasons[module.label].append(
        (
            _COMPILING,
            f"PyTorch/XLA was {graph.doing} {graph.describe} when the run failed, "
            f"and XLA dumped that graph as {line.file}",
        )
    )


def _failure_text(output: str, failure: Failure) -> str:
    """The part of the output that describes the failure: from the last traceback or the
    fatal line on. Names earlier in the log are just what ran before."""
    starts = [output.rfind("Traceback (most recent call last)")]
    if failure.headline:
        starts.append(output.find(failure.headline.split("] ", 1)[-1][:80]))
    start = max(s for s in (*starts, 0) if s >= 0)
    # Whole lines only: the filters below know a dump line by its start, and a cut one
    # ("..._0032.jit_kick.fusion.ll to ...") would name a module that did nothing wrong.
    begin = max(0, start - 2000, len(output) - 200_000)
    if begin:
        begin = output.find("\n", begin) + 1 or len(output)
    # Compile-log lines name what was compiled, not what failed; keep them out.
    return COMPILING_RE.sub("", xla_log.without_dump_lines(output[begin:]))


def _last_snapshot(modules: Sequence[DumpModule]) -> DumpModule | None:
    # The program's own eager checks run helper modules after the real work; skip them.
    users = [m for m in modules if not is_helper(m)]
    ran = [(snap.mtime, m) for m in users or modules if (snap := m.newest_snapshot)]
    return max(ran, key=lambda t: t[0])[1] if ran else None


def _stopped_in_xla(failure: Failure) -> bool:
    """The process died or was stopped (not an error it raised), or failed compiling."""
    return failure.phase is Phase.COMPILE or KINDS[failure.kind].ended_inside


def _log_evidence(index: DumpIndex, failure: Failure, output: str, reasons: Reasons) -> None:
    """XLA's ``Dumping module_NNNN...`` lines: the last before its first error line, or
    before the end of a run that crashed or was stopped, names the module by number."""
    lines = xla_log.dump_lines(output)
    if not lines:
        return
    error = xla_log.first_error(output, after=lines[0].offset)
    if error is not None:
        last = xla_log.last_before(lines, error.offset)
        if last is not None and (module := _by_log_line(index, last)) is not None:
            what = "fatal" if error.fatal else "error"
            reasons[module.label].append(
                (
                    _LOG_FATAL if error.fatal else _LOG_ERROR,
                    f"XLA's log: {last.file} was the last file dumped before its first "
                    f"{what} line ({error.site})",
                )
            )
        return
    last = xla_log.last_before(lines)
    if last is None or not _stopped_in_xla(failure):
        return
    module = _by_log_line(index, last)
    if module is None:
        return
    if last.stage != "snapshot" and not xla_log.compile_finished(lines, last.id):
        reasons[module.label].append(
            (
                _LOG_UNFINISHED,
                f"XLA's log: {last.file} was the last file dumped before the run "
                "stopped, and no optimised module of it was dumped: its compilation did not finish",
            )
        )
    else:
        reasons[module.label].append(
            (_LOG_LAST, f"XLA's log: {last.file} was the last file dumped before the run stopped")
        )


def _by_log_line(index: DumpIndex, line: xla_log.DumpLine) -> DumpModule | None:
    """The module a log line names: by number and name. Each process of a run numbers its
    modules from 0 and the index holds the failing process's alone, while the run's output
    carries the log of another (a parent whose worker failed): a number whose name differs
    is that other process's module."""
    named = [m for m in index.modules if m.id == line.id and line.rest.startswith(f"{m.name}.")]
    return named[-1] if named else None


def _process_evidence(
    index: DumpIndex, failure: Failure, processes: Sequence[ProcessEvidence], reasons: Reasons
) -> None:
    """What each process recorded: the compilation or execution under way when it stopped,
    or the one that raised, wins; without either, the last execution that finished before a
    runtime failure."""
    several = len(processes) > 1
    for process in processes:
        found = recorded.reason(index, failure, process, several=several)
        if found is not None:
            module, under_way, why = found
            reasons[module.label].append((_IN_FLIGHT if under_way else _LAST_EXECUTED, why))
        if KINDS[failure.kind].dies:
            for module, why in recorded.on_device(index, process, several=several):
                reasons[module.label].append((_UNFINISHED, why))


def _rank(index: DumpIndex, failure: Failure, reasons: Reasons, limit: int) -> Selection:
    def score(m: DumpModule) -> int:
        best = max((s for s, _ in reasons[m.label]), default=0)
        # A helper keeps its place only when explicit or named evidence points at it.
        return best - 30 if is_helper(m) and best < _NAMED else best

    candidates = [m for m in index.modules if reasons[m.label]]
    # What the user chose (--module, --symbol) is what they get; other evidence only ranks.
    explicit = [m for m in candidates if score(m) >= _EXPLICIT]
    # Equal strongest evidence: the module more pieces of evidence point at, then the newest.
    ranked = sorted(
        explicit or candidates, key=lambda m: (-score(m), -len(reasons[m.label]), -m.id)
    )
    chosen = [Chosen(m, _strongest_first(reasons[m.label]), score(m)) for m in ranked[:limit]]
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


def _strongest_first(reasons: list[tuple[int, str]]) -> tuple[str, ...]:
    return tuple(r for _, r in sorted(reasons, key=lambda sr: -sr[0]))
