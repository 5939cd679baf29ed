"""What each Python process of a run recorded about itself: its compilations and executions
(``Event``), the inputs it saved, the exceptions it printed and went on from, and what they
show (the call under way when it stopped, the call whose error it met). ``records`` reads
them from the files the start-up hook writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_CALL = re.compile(r"^(?:jit|pmap|xla_pmap)\((?P<name>.*)\)$")


@dataclass(frozen=True)
class Event:
    """One compilation or execution, from its start record (and its end, if it ended)."""

    kind: str  # "compile" or "execute"
    n: int
    module: str
    id: int | None
    fun: str = ""
    shapes: str = ""
    started: float = 0.0
    ended: float | None = None  # None: still running when the process died or was stopped
    args: Path | None = None  # saved arguments (executions only)
    outputs: Path | None = None  # saved outputs: a Pallas kernel's reference run only
    # This process's shards of a call over several processes' devices (``hook.shards``).
    shards: Path | None = None
    error: str | None = None  # the exception it raised, when it ended by raising one
    dump_to: Path | None = None  # where its dumps went, when not the process's dump folder
    seen: str = ""  # what showed it, for an execution the hook did not see start
    options: tuple[str, ...] = ()  # a compile's own XLA options (``compiler_options``), as flags
    # An execution whose dispatch had returned while the device still computed its outputs,
    # which were not ready when the process ended (``ended`` is then None): it was running.
    on_device: bool = False
    fed_by: tuple[int, ...] = ()  # the earlier executions whose outputs it took (``fed``)

    @property
    def finished(self) -> bool:
        return self.ended is not None

    @property
    def name(self) -> str:
        """The function's name as JAX's log gives it ("train_step" of "jit(train_step)")."""
        call = _CALL.match(self.fun)
        if call is not None:
            return call.group("name")
        return self.module.removeprefix("jit_") if self.module else self.fun

    @property
    def call(self) -> str:
        """The call as JAX's log shows it: "jit(train_step)"."""
        if self.fun or not self.module.startswith("jit_"):
            return self.fun or self.module
        return f"jit({self.name})"


@dataclass(frozen=True)
class SavedInputs:
    """The inputs the hook saved of another framework's call (an ``inputs`` record)."""

    n: int
    function: str  # TensorFlow's concrete function, "__inference_f_46"
    file: Path
    framework: str = ""


@dataclass(frozen=True)
class Uncaught:
    """An exception Python printed and went on from (an ``uncaught`` record)."""

    where: str  # "thread 'evaluator'", "an atexit function"
    type: str  # "jax.errors.JaxRuntimeError"
    error: str  # "JaxRuntimeError: INTERNAL: ..."

    @property
    def from_jax(self) -> bool:
        """Whether jax or jaxlib raised it: XLA's errors reach Python as theirs."""
        return self.type.split(".", 1)[0] in ("jax", "jaxlib")


@dataclass(frozen=True)
class ProcessEvidence:
    pid: int
    ppid: int
    argv: tuple[str, ...]
    events: tuple[Event, ...]  # in start order
    rank: int | None = None
    processes: int | None = None
    devices: int | None = None
    platform: str = ""
    env: dict[str, str] = field(default_factory=dict)  # flags in force at backend start
    jax_config: dict[str, str] = field(default_factory=dict)
    dump_dir: Path | None = None
    rlimits: dict[str, tuple[int, int]] = field(default_factory=dict)  # the last value seen
    stack: str | None = None  # faulthandler's Python stack at a fatal signal or Ctrl-C
    exited: bool = False  # the interpreter reached a normal exit
    exit_status: int | None = None  # 1: it exited with an uncaught exception; None: unknown
    exit_how: str = ""  # "exception", "sys.exit", "SystemExit" (a message), or "" (not known)
    exited_at: float | None = None  # when it began its normal exit
    # The status the program's main thread last asked sys.exit for, written as it asked
    # (``exiting``), with no call of XLA begun after it; None where it never asked.
    asked_exit: int | None = None
    local_devices: int | None = None
    device_kind: str = ""  # of the first device ("cpu", "NVIDIA H100 80GB HBM3")
    device_list: tuple[str, ...] = ()  # "CpuDevice(id=0) TFRT_CPU_0 kind='cpu'", ...
    platform_version: str = ""  # the runtime's build: "PJRT C API TFRT TPU v5 lite Built on ..."
    inputs: tuple[SavedInputs, ...] = ()  # oldest first
    # The program's interpreter's (``versions`` records, then its main backend's).
    versions: dict[str, str] = field(default_factory=dict)
    answered: bool = False  # it answered collect's question before the stop (``state``)
    uncaught: tuple[Uncaught, ...] = ()  # exceptions printed and gone on from, oldest first
    user_dump_dir: str | None = None  # the program's own --xla_dump_to, replaced by collect's
    # Pallas's interpret mode, forced by collect: None not asked, "" on, else why it could not be
    pallas_interpret: str | None = None

    @property
    def unfinished(self) -> Event | None:
        """The compilation or execution under way when the process stopped."""
        return next((e for e in reversed(self.events) if not e.finished), None)

    @property
    def started_backend(self) -> bool:
        return bool(self.platform)

    @property
    def raised(self) -> Event | None:
        """The compilation or execution whose error the process met last: the call that
        raised it, or, where that call only met the error of an earlier execution whose
        outputs it took (jax dispatches asynchronously), the first such execution; where it
        is jax's own NaN (or Inf) check's, the call whose outputs the check first rejected,
        not the calls of jax's de-optimized rerun of it (``checked_call``)."""
        last = next((e for e in reversed(self.events) if e.error), None)
        return None if last is None else self.made_error(self.checked_call(last))

    def checked_call(self, event: Event) -> Event:
        """Under ``jax_debug_nans`` (``jax_debug_infs``), a jitted call whose outputs hold a
        NaN raises jax's check's error, and jax runs the function again de-optimized, op by
        op, each op a call of its own (``jit(sqrt)``) that the check rejects in turn: the
        first of the calls the check rejected, with no other error after it, up to
        ``event``; ``event`` itself where its error is not the check's."""
        if debug_check(event.error) is None:
            return event
        first = event
        for e in reversed(self.events[: self.events.index(event)]):
            if e.error is None:
                continue
            if debug_check(e.error) is None:
                break
            first = e
        return first

    def made_error(self, event: Event) -> Event:
        """The first execution, among those whose outputs ``event`` took (directly or
        through other calls, as the hook saw them: ``fed``), that raised; else ``event``."""
        executions = {e.n: e for e in self.events if e.kind == "execute"}
        seen: set[int] = set()
        todo, failed = list(event.fed_by), []
        while todo:
            n = todo.pop()
            if n in seen or (maker := executions.get(n)) is None:
                continue
            seen.add(n)
            failed += [maker] if maker.error else []
            todo += maker.fed_by
        return min(failed, key=lambda e: e.n, default=event)


# jax's check of a jitted call's outputs (``jax_debug_nans``, ``jax_debug_infs``): its error
# as a record says it, "InternalFloatingPointError: ('jit(f)', 'nan')" (jax 0.4.36 and later),
# or "FloatingPointError: invalid value (nan) encountered in jit(f)" (earlier releases).
_DEBUG_CHECK = re.compile(
    r"^(?:InternalFloatingPointError: \('[^']*', '(?P<new>nan|inf)'\)"
    r"|FloatingPointError: invalid value \((?P<old>nan|inf)\) encountered in )"
)


def debug_check(error: str | None) -> str | None:
    """The jax option whose check raised ``error`` (``jax_debug_nans``, ``jax_debug_infs``);
    None where ``error`` is not that check's."""
    found = _DEBUG_CHECK.match(error or "")
    if found is None:
        return None
    return f"jax_debug_{found['new'] or found['old']}s"
