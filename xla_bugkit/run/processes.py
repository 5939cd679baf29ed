"""Which process of a run failed, and what of its evidence a bundle and a replay need.

A run may hold many Python processes (a launcher, ranks, workers); the hook recorded each
(``evidence``) and gave each one that started a backend a dump folder of its own. The
failing process is the one whose dumps are indexed and bundled; the others are listed.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from xla_bugkit import proc
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.names import program_name
from xla_bugkit.run.evidence import ProcessEvidence

_LIMIT_NAMES = ("RLIMIT_AS", "RLIMIT_DATA")  # the caps a replay shares (memory)
_FATAL = "Fatal Python error"  # how faulthandler starts the stack of a crash


@dataclass(frozen=True)
class Culprit:
    """The process the bundle is about, why it was chosen, and the others of the run."""

    process: ProcessEvidence
    why: str
    others: tuple[ProcessEvidence, ...] = ()  # the run's other processes with an XLA backend
    recorded: frozenset[int] = frozenset()  # the pid of every process the hook recorded

    @property
    def label(self) -> str:
        p = self.process
        rank = f"rank {p.rank} of {p.processes}, " if (p.processes or 0) > 1 else ""
        return f"{rank}pid {p.pid}"


def ending(p: ProcessEvidence) -> tuple[int, str]:
    """How strongly ``p``'s own record says it failed (higher: stronger), and why.

    A process that crashed on its own (faulthandler's "Fatal Python error") beats one that
    raised an XLA error, which beats one stopped part-way by someone else (the launcher's
    SIGTERM to the other ranks once one has failed; collect's timeout on a hang).
    """
    unfinished = p.unfinished
    doing = ""
    if unfinished is not None:
        verb = "compiling" if unfinished.kind == "compile" else "running"
        doing = f" while {verb} {unfinished.module or 'a module'}"
    raised = p.raised
    if p.stack is not None and _FATAL in p.stack:
        return (6 if unfinished else 5), f"it crashed{doing}"
    if raised is not None and (not p.exited or p.exit_status):
        verb = "compiling" if raised.kind == "compile" else "running"
        return 4, f"XLA raised while {verb} {raised.module}: {raised.error}"
    thrown = next((u for u in reversed(p.uncaught) if u.from_jax), None)
    if thrown is not None:
        return 4, f"an uncaught {thrown.error[:160]} in {thrown.where}"
    if unfinished is not None:
        return 3, f"it stopped{doing}"
    if not p.exited:
        return 2, "it did not exit normally"
    if p.exit_status and p.exit_how == "sys.exit":
        return 1, f"it exited with status {p.exit_status} (sys.exit)"
    if p.exit_status and p.exit_how == "SystemExit":
        return 1, f"it exited with status {p.exit_status} (SystemExit with a message)"
    if p.exit_status:
        return 1, "it exited with an uncaught exception"
    return 0, "it exited normally"


def asked_exit(p: ProcessEvidence) -> int | None:
    """The nonzero status ``p``'s program asked sys.exit for, where it then never exited
    normally (its exit was cut short: a job's coordination service aborted it at the
    shutdown barrier, say); None otherwise."""
    return p.asked_exit if p.asked_exit and not p.exited else None


def failing(
    processes: Sequence[ProcessEvidence],
    named: Callable[[ProcessEvidence], str | None] | None = None,
) -> Culprit | None:
    """The process the failure belongs to, among those that started an XLA backend; None
    when none recorded one (the program never reached XLA, or ran outside the hook).
    Where none recorded a failure, ``named`` says of a process why the failure is its (its
    dumps plan the allocation XLA could not make): the one process it names is chosen."""
    xla = [p for p in processes if p.started_backend]
    if not xla:
        return None
    if named is not None and len(xla) > 1 and max(ending(p)[0] for p in xla) == 0:
        reasons = {id(p): why for p in xla if (why := named(p)) is not None}
        if len(reasons) == 1:
            (best,) = [p for p in xla if id(p) in reasons]
            why = f"no process recorded a failure, but {reasons[id(best)]}"
            others = tuple(p for p in xla if p is not best)
            return Culprit(best, why, others, frozenset(p.pid for p in processes))
    # The strongest sign of failure wins; among equals, the one that stopped first (a rank
    # that died takes the others down after it), unless they ran one after another.
    in_sequence = _in_sequence(xla)
    strongest = max(ending(p)[0] for p in xla)
    tied = [p for p in xla if ending(p)[0] == strongest]
    # In sequence, the last run's status became the command's.
    best = tied[-1] if in_sequence else min(tied, key=_last_moment)
    strength, why = ending(best)
    if strength == 0:
        why = (
            "the only process that started XLA"
            if len(xla) == 1
            else f"no process recorded a failure; the last of {len(xla)} that ran one after another"
            if in_sequence
            else "no process recorded a failure; the first to start XLA"
        )
        best = best if in_sequence else xla[0] if len(xla) > 1 else best
    elif in_sequence and len(tied) > 1:
        why += f" (the last of {len(tied)} that ran one after another and did so)"
    others = tuple(p for p in xla if p is not best)
    return Culprit(best, why, others, frozenset(p.pid for p in processes))


def _in_sequence(xla: Sequence[ProcessEvidence]) -> bool:
    """Whether the processes ran one after another (a script that runs the program twice),
    each exiting before the next started: then the last one's end is the command's."""
    return len(xla) > 1 and all(
        before.exited_at is not None and before.exited_at <= _started(after)
        for before, after in itertools.pairwise(xla)
    )


def _started(p: ProcessEvidence) -> float:
    return min((e.started for e in p.events), default=float("inf"))


def _last_moment(p: ProcessEvidence) -> float:
    return max((e.started for e in p.events), default=0.0)


def flags_in_force(p: ProcessEvidence) -> tuple[str, ...]:
    """The XLA flags in force when ``p``'s backend started (what it set itself included,
    empty values kept), less the dump flags."""
    return flags.without_dump_flags(flags.split(p.env.get("XLA_FLAGS")))


def compile_options(
    p: ProcessEvidence, module: str, module_id: int | None = None
) -> tuple[str, ...]:
    """The XLA options ``p`` passed to its compiles of ``module`` (``jit_f``), as flags, in
    the order first passed; a later value of a name replaces an earlier one. With
    ``module_id``, only the compile of that dumped module: functions of one name compiled
    for other shapes, or with other options, are modules of their own."""
    found: dict[str, str] = {}
    for e in p.events:
        if e.kind != "compile" or e.module != program_name(module):
            continue
        if module_id is not None and e.id is not None and e.id != module_id:
            continue
        found.update((flags.name_of(o), o) for o in e.options)
    return tuple(found.values())


def program_python(p: ProcessEvidence) -> str | None:
    """The interpreter ``p`` ran under, when its jaxlib is not the one xla-bugkit runs with
    (xla-bugkit installed with pipx, or in a venv of its own): replays of its modules run
    under it, so they compile with the XLA that failed. None when the two are the same."""
    python, theirs = p.versions.get("python_executable"), p.versions.get("jaxlib")
    if not python or not theirs or not os.access(python, os.X_OK):
        return None
    try:
        ours: str | None = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        ours = None
    return python if theirs != ours else None


# The modules whose recorded version names a framework (``hook.recorder.versions``).
_FRAMEWORK_MODULES = ("jaxlib", "tensorflow", "torch_xla")


def program_versions(
    culprit: Culprit | None, recorded: Sequence[ProcessEvidence] = ()
) -> dict[str, str]:
    """The interpreter and the versions the program's own process recorded: the failing
    process's; where none is known (TensorFlow and PyTorch/XLA start no backend the hook
    sees), the first process of ``recorded`` that imported a framework. Empty without the
    hook's records: what xla-bugkit's own environment holds is then all there is."""
    if culprit is not None and culprit.process.versions:
        return dict(culprit.process.versions)
    for p in recorded:  # oldest first: the program, before the workers it starts
        if any(name in p.versions for name in _FRAMEWORK_MODULES):
            return dict(p.versions)
    return {}


def memory_cap(p: ProcessEvidence) -> int | None:
    """The address-space cap the process ran under, when it had one (it set it itself)."""
    caps = [soft for name in _LIMIT_NAMES if (soft := p.rlimits.get(name, (-1, -1))[0]) >= 0]
    return min(caps) if caps else None


def host_memory(p: ProcessEvidence) -> int | None:
    """The memory (RAM and swap) any one allocation of ``p`` could have had, where it ran
    XLA on this machine's CPU; None for an accelerator, whose memory is its own."""
    return proc.memory_and_swap() if p.platform == "cpu" else None


def dump_folder(dump_dir: Path, culprit: Culprit | None) -> Path:
    """Where the failing process's dumps are: its own folder, else collect's."""
    if culprit is None or culprit.process.dump_dir is None:
        return dump_dir
    folder = culprit.process.dump_dir
    return folder if folder.is_dir() else dump_dir


def gather_elsewhere(p: ProcessEvidence, folder: Path) -> list[str]:
    """Copy into ``folder`` the dumps of the modules that ``p`` compiled with a dump folder
    of its own choosing (``compile({'xla_dump_to': ...})``); returns one note per folder."""
    notes = []
    by_folder: dict[Path, set[int]] = {}
    for e in p.events:
        if e.kind == "compile" and e.dump_to is not None and e.id is not None:
            by_folder.setdefault(e.dump_to, set()).add(e.id)
    for source, ids in by_folder.items():
        copied = 0
        for path in _module_files(source, ids):
            target = folder / path.relative_to(source)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                _copy(path, target)
                copied += 1
        if copied:
            notes.append(f"{len(ids)} modules dumped by the program to {source} were gathered")
    return notes


def _module_files(source: Path, ids: set[int]) -> list[Path]:
    prefixes = tuple(f"module_{i:04d}." for i in ids)
    try:
        entries = list(source.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        name = entry.name.split(".", 1)[1] if entry.name[:1].isdigit() else entry.name
        if not name.startswith(prefixes):
            continue
        found += [f for f in entry.rglob("*") if f.is_file()] if entry.is_dir() else [entry]
    return found


def _copy(source: Path, target: Path) -> None:
    try:
        shutil.copy2(source, target)
    except OSError:
        target.unlink(missing_ok=True)  # a partial copy would be indexed as a dump
