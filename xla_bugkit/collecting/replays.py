"""collect's replay stage: each chosen module replayed in a child, judged against the run's
failure (the next module's child imports jax while one replays: ``Spares``); Ctrl-C
stops the stage, not the bundle that follows it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

from xla_bugkit import frameworks
from xla_bugkit.choose.selection import Chosen
from xla_bugkit.collecting.options import CollectOptions
from xla_bugkit.failure.classify import Failure
from xla_bugkit.replay import (
    Interpreted,
    ReplayInput,
    ReplayOptions,
    RunContext,
    Spares,
    module_files,
    replay_input,
    replay_module,
    split_flags,
)
from xla_bugkit.run.record import RunRecord
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Verdict


@dataclass(frozen=True)
class Replaying:
    """How collect replays the run's modules, worked out once per collect (``of_run``): each
    as the failing process ran it (``context``: its flags, memory cap, interpreter, and the
    tolerance asked for), under one ``options`` (the time a replay of this failure may take,
    the real inputs or generated ones), each Pallas kernel judged against its outputs under
    the interpret mode where the program ran under it (``interpreted``). The search, the
    replay stage, the replay without the run's own flags and the replay of what the bundle
    holds all take it whole."""

    context: RunContext
    options: ReplayOptions
    # A Pallas kernel's outputs under the interpret mode, by module label: its reference.
    interpreted: Mapping[str, Interpreted] = field(default_factory=dict)

    @classmethod
    def of_run(cls, run: RunRecord, options: CollectOptions) -> Replaying:
        context = RunContext(
            run.flags_in_force,
            run.memory_cap,
            python=run.program_python,
            tolerance=options.tolerance,
            tpu_args=run.tpu_args_in_force,
        )
        timeout = run.failure.replay_timeout(options.replay_timeout)
        return cls(context, ReplayOptions(timeout=timeout, use_data=options.data))

    def of_modules(self, run: RunRecord, names: Iterable[str]) -> Replaying:
        """With the framework that handed XLA the modules ``names`` (PyTorch/XLA's modules
        replay under torch_xla's own XLA first, where it is installed)."""
        found = frameworks.detect(run.command, run.output, names)
        framework = found.framework if found is not None else None
        return replace(self, context=replace(self.context, framework=framework))


@dataclass(frozen=True)
class Replays:
    """What the replay stage showed; ``note`` says so when Ctrl-C stopped it early."""

    verdicts: tuple[Verdict, ...]
    interrupted: bool = False
    note: str = ""


def replay_stage(
    root: Path,
    chosen: Sequence[Chosen],
    expected: Failure,
    replaying: Replaying,
    *,
    ui: Ui,
    arrays: Path | None = None,
    spares: Spares | None = None,
) -> Replays:
    """Replay each of ``chosen`` (modules of the dump folder ``root``) in a child process,
    each as ``replaying`` says (``replay_module``: the process that compiled them, its
    flags, its memory cap, its framework); ``arrays``: a folder to keep each replay's arrays
    in, one subfolder per module label; ``spares``: the children (and the program held at
    its main module's end, ``Spares.hold``) the caller keeps, left to it at the end.

    Ctrl-C (or SIGTERM) stops the stage: the replay child's process group is stopped and the
    verdicts so far are kept. A second one raises ``KeyboardInterrupt`` once the child is
    gone.
    """
    interrupts = _Interrupts(ui)
    verdicts: list[Verdict] = []
    inputs = [_input(root, c, replaying) for c in chosen]
    try:
        own = Spares() if spares is None else contextlib.nullcontext(spares)
        with interrupts.installed(), own as spares:
            for i, c in enumerate(chosen):
                # The next module's child imports jax while this one replays.
                following = inputs[i + 1] if i + 1 < len(inputs) else None
                if following is not None:
                    spares.start(following.platform, split_flags(following)[0])
                keep = arrays / c.module.label if arrays is not None else None
                one = replace(replaying.options, keep_arrays=keep, spares=spares)
                verdict = _replay_one(c, inputs[i], expected, replace(replaying, options=one), ui)
                if interrupts.count:
                    break  # the child was stopped part-way: its verdict says nothing
                if verdict is not None:
                    verdicts.append(verdict)
    except KeyboardInterrupt:
        interrupts.count = max(interrupts.count, 1)
    if interrupts.count > 1:
        raise KeyboardInterrupt
    if not interrupts.count:
        return Replays(tuple(verdicts))
    note = f"the replay was interrupted: {len(verdicts)} of {len(chosen)} chosen modules replayed"
    ui.warn(note)
    return Replays(tuple(verdicts), interrupted=True, note=note)


def _input(root: Path, chosen: Chosen, replaying: Replaying) -> ReplayInput | None:
    """What replaying ``chosen`` needs; None without a before-optimizations module. Each
    module replays with the flags XLA really used for it (its dumped debug options), which
    include what the program appended to XLA_FLAGS itself, and with its kernel's outputs
    under the interpret mode, where they were recorded."""
    m = chosen.module
    inp = replay_input(m.label, module_files(root, m), m.platform)
    if inp is None:
        return None
    inp = replace(inp, interpreted=replaying.interpreted.get(m.label))
    return replaying.context.input(inp)


def _replay_one(
    chosen: Chosen, inp: ReplayInput | None, expected: Failure, replaying: Replaying, ui: Ui
) -> Verdict | None:
    m = chosen.module
    if inp is None:
        ui.warn(f"{m.label} has no before-optimizations proto: it cannot be replayed")
        return None
    with ui.phase(f"replaying {m.label}"):
        verdict = replay_module(
            inp, expected=expected, context=replaying.context, options=replaying.options
        )
    for v in (verdict, verdict.second):
        if v is not None:
            under = f" (under {v.under})" if v.under else ""
            ui.detail(f"{m.label}: {v.outcome.value}{under}: {v.evidence}")
    return verdict


class _Interrupts:
    """Ctrl-C and SIGTERM while the replay stage runs: the first stops it, the next aborts.

    The first raises ``KeyboardInterrupt`` as Python's own handler does, and the wait for
    the replay child answers it by stopping the child's process group. Later ones raise
    nothing: raised while that stop is under way, they could leave the child running; the
    stage raises once the child is gone.
    """

    def __init__(self, ui: Ui) -> None:
        self.count = 0
        self._ui = ui

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1:
            self._tell("stopping the replay (Ctrl-C again to abort)")
            raise KeyboardInterrupt
        if self.count == 2:
            self._tell("aborting once the replay child has stopped")

    def _tell(self, message: str) -> None:
        # os.write, not print: the signal may have stopped a print to the same stream.
        try:
            fd = self._ui.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return
        with contextlib.suppress(OSError):
            os.write(fd, f"\nxla-bugkit: {message}\n".encode())

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread gets signals, and only it may set handlers
            return
        previous = {sig: signal.signal(sig, self) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
