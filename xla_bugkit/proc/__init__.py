"""The one way xla-bugkit runs a child process.

Every child gets its own process group, so a timeout, Ctrl-C, SIGTERM or SIGHUP stops
everything it started (a shell script's grandchildren included). No child outlives us, even
when we are SIGKILLed: each starts through ``launch.py``, which has the kernel kill it with
its parent (Linux) and leaves a guard in its group that kills the group once our end of a
pipe closes. ``run`` with ``echo`` tees the output live to the terminal and to a log file for
``collect``; ``run_captured`` keeps it in memory for replay children.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from xla_bugkit.errors import ProcessError
from xla_bugkit.proc import busy, starting, streams
from xla_bugkit.proc.starting import Limits as Limits  # callers name it proc.Limits
from xla_bugkit.proc.starting import Started

# Seconds a child gets to exit after SIGINT/SIGTERM before it is killed.
GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Completed:
    """How a child ended. ``returncode`` is negative for a signal, None if it never started."""

    returncode: int | None
    output: str
    timed_out: bool
    duration: float
    interrupted: bool = False
    ended_early: bool = False  # stopped because its output asked (``EndWhen``)
    # Cut short by its timeout: the CPU cores its process group kept busy on average in its
    # last seconds (``busy.window``), None where not measured.
    busy: float | None = None


# Reads a child's whole lines as they arrive; the seconds of grace after which the child's
# group is stopped once its output shows it should end, or None to read on.
EndWhen = Callable[[bytes], float | None]


@dataclass(frozen=True)
class Watch:
    """What the caller does while a child runs: ``on_output`` whenever output arrives;
    ``before_stop`` before the timeout or a signal stops it, while its group still runs;
    ``end_when`` reads its whole lines (``EndWhen``)."""

    on_output: Callable[[], None] | None = None
    before_stop: Callable[[], object] | None = None
    end_when: EndWhen | None = None


@dataclass(frozen=True)
class Bound:
    """A timeout counted from a line of the child's output, a readiness signal: once a line
    starts with ``marker`` (a replay child's "it runs the module now"), the child has
    ``seconds`` more, never past its whole timeout."""

    marker: bytes
    seconds: float


class _Deadline:
    """When a child's time is up: its timeout, brought forward by its ``Bound``; and the
    last seconds before it, over which how busy the child was is measured."""

    def __init__(self, started: float, timeout: float | None, bound: Bound | None) -> None:
        self.at = None if timeout is None else started + timeout
        self.span = 0.0 if timeout is None else busy.window(timeout)
        self._bound = bound

    @property
    def pending(self) -> bool:
        """A bound that the child's output has not set off yet."""
        return self._bound is not None

    def read(self, lines: bytes) -> None:
        bound = self._bound
        if bound is None or not any(line.startswith(bound.marker) for line in lines.splitlines()):
            return
        self._bound = None  # the first such line only
        at = time.monotonic() + bound.seconds
        if self.at is None or at < self.at:
            self.at, self.span = at, busy.window(bound.seconds)

    def left(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()


def stop_group(proc: subprocess.Popen[bytes], first: signal.Signals = signal.SIGTERM) -> None:
    """Stop the child's whole process group: ``first``, then SIGKILL after a grace period."""
    for sig in (first, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=GRACE_SECONDS)
            break
        except subprocess.TimeoutExpired:
            continue
    # Grandchildren may outlive the leader; the group must not linger.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait(
    proc: subprocess.Popen[bytes],
    deadline: _Deadline,
    before_stop: Callable[[], object] | None = None,
) -> tuple[bool, bool, float | None]:
    """Wait for the child; returns (timed_out, interrupted, busy): ``busy``, for a child its
    deadline stopped, is the CPU cores its group kept busy in the last seconds before it
    (``busy.window``). Ctrl-C stops the child too; ``before_stop`` runs first, while the
    child still runs (a second Ctrl-C cuts it short)."""
    first: tuple[float | None, busy.Sample | None] = (None, None)  # for which deadline
    try:
        while (left := deadline.left()) is None or left > 0:
            if left is not None and left <= deadline.span and first[0] != deadline.at:
                first = (deadline.at, busy.sample(proc.pid))  # its last seconds begin
            poll = left is not None or deadline.pending
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=min(left or _POLL_SECONDS, _POLL_SECONDS) if poll else None)
                return False, False, None
        cores = busy.cores_busy(first[1], proc.pid)
        if before_stop is not None:
            before_stop()
        stop_group(proc, signal.SIGTERM)
        return True, False, cores
    except KeyboardInterrupt:
        # The child runs in its own session, so the terminal's SIGINT reached only us.
        if before_stop is not None:
            before_stop()
        stop_group(proc, signal.SIGINT)
        return False, True, None


# How often a waiting parent looks at its child's deadline (which its output may move).
_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Echo:
    """A child's output shown live on our terminal as it arrives, less the whole lines
    ``hide`` matches (which still reach the log)."""

    hide: re.Pattern[bytes] | None = None


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    limits: Limits | None = None,
    echo: Echo | None = None,
    log: BinaryIO | None = None,
    stdin: int | None = subprocess.DEVNULL,
    watch: Watch | None = None,
    bound: Bound | None = None,
) -> Completed:
    """Run ``argv`` to completion in its own process group, keeping its combined output.

    With ``echo`` the output also goes live to our stdout (``Echo``); with ``log`` to that
    file as it arrives (whole lines, so its two streams never split each other's lines), and
    a crash of this process still leaves the log on disk. ``watch.on_output`` is called
    whenever output arrives. Ctrl-C, SIGTERM and SIGHUP stop the whole group and end the run
    as ``interrupted``; the timeout and these call ``watch.before_stop`` first, while the
    group still runs. ``watch.end_when`` reads the output's whole lines as they arrive: once
    it gives a grace, the group is killed that many seconds later (unless it ended by then),
    and the run is ``ended_early``. ``bound``: a line of the output after which the child
    has only so long (``Bound``). Whatever else ends this call (or this process) early
    stops the group too, and the group never outlives the run.
    """
    # From before the child starts: a signal at any point stops it as Ctrl-C does.
    with sigterm_as_interrupt():
        started = time.monotonic()
        child = starting.start(
            argv, env=env, cwd=cwd, limits=limits, stdin=stdin, echo=echo is not None
        )
        watch = watch or Watch()
        ending = _Ending(child.popen, watch.end_when) if watch.end_when is not None else None
        deadline = _Deadline(started, timeout, bound)
        merged = streams.Merged(log, watch.on_output, _readers(ending, deadline))
        try:
            done = _follow(child, argv, deadline, echo, merged, started, watch.before_stop)
        finally:
            if ending is not None:
                ending.cancel()
        return replace(done, ended_early=ending is not None and ending.ended)


def _readers(ending: _Ending | None, deadline: _Deadline) -> Callable[[bytes], None]:
    """What reads a child's whole lines as they arrive: its ``EndWhen``, its deadline."""

    def read(lines: bytes) -> None:
        if ending is not None:
            ending.read(lines)
        deadline.read(lines)

    return read


class _Ending:
    """A child's group killed a grace after its output asked (``EndWhen``): once."""

    def __init__(self, popen: subprocess.Popen[bytes], end_when: EndWhen) -> None:
        self._popen = popen
        self._end_when: EndWhen | None = end_when
        self._timer: threading.Timer | None = None
        self.ended = False

    def read(self, lines: bytes) -> None:
        if self._timer is not None or self._end_when is None:
            return
        try:
            grace = self._end_when(lines)
        except Exception:  # a reader's bug must not stop the pump: the child runs its course
            self._end_when = None
            return
        if grace is not None:
            self._timer = threading.Timer(grace, self._stop)
            self._timer.daemon = True
            self._timer.start()

    def _stop(self) -> None:
        if self._popen.poll() is None:  # it did not end by itself in its grace
            self.ended = True
            # Its grace was the time to end cleanly: a SIGTERM could start more (a
            # jax.distributed process takes it as the job's preemption, and tells its job).
            stop_group(self._popen, signal.SIGKILL)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _follow(
    child: Started,
    argv: Sequence[str],
    deadline: _Deadline,
    echo: Echo | None,
    merged: streams.Merged,
    started: float,
    before_stop: Callable[[], object] | None = None,
) -> Completed:
    """Run a started child to its end, gathering its output; its group ends with it."""
    popen = child.popen
    readers = []
    try:
        try:
            with os.fdopen(child.status, "rb", buffering=0) as status:
                starting.check_exec(status, argv, popen)
            for pipe, terminal in ((popen.stdout, sys.stdout), (popen.stderr, sys.stderr)):
                if pipe is None:  # stderr merged into stdout
                    continue
                args = (pipe, _shown(terminal.buffer, echo), merged)
                reader = threading.Thread(target=streams.pump, args=args, daemon=True)
                reader.start()
                readers.append((reader, pipe))
            timed_out, interrupted, cores = _wait(popen, deadline, before_stop)
        except KeyboardInterrupt:
            # Before the wait began (the exec, the readers' start: on a loaded machine, or
            # with another thread holding the GIL, that can take a while): the same stop.
            stop_group(popen, signal.SIGINT)
            timed_out, interrupted, cores = False, True, None
    finally:
        if popen.returncode is None:  # something cut the wait short
            stop_group(popen, signal.SIGKILL)
        # The group's guard kills what the child left behind (a script's background jobs);
        # their end of the output pipes then closes, and the readers finish.
        os.close(child.guard)
        for reader, pipe in readers:
            reader.join(timeout=GRACE_SECONDS)
            pipe.close()
    output = b"".join(merged.kept).decode("utf-8", errors="replace")
    duration = time.monotonic() - started
    return Completed(popen.returncode, output, timed_out, duration, interrupted, busy=cores)


def _shown(terminal: BinaryIO, echo: Echo | None) -> BinaryIO | streams.Hiding | None:
    """Where a child's stream is shown as it arrives: nowhere without ``echo``."""
    if echo is None:
        return None
    return terminal if echo.hide is None else streams.Hiding(terminal, echo.hide)


def run_captured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
    limits: Limits | None = None,
    bound: Bound | None = None,
) -> Completed:
    """Run a child quietly (a replay, a probe), returning its output and status; ``bound``:
    as ``run``'s.

    An interrupt (Ctrl-C, SIGTERM, SIGHUP) stops the child's group and is raised again as
    ``KeyboardInterrupt``: the command ends, instead of judging a child cut short.
    """
    done = run(argv, env=env, cwd=cwd, timeout=timeout, limits=limits, bound=bound)
    if done.interrupted:
        raise KeyboardInterrupt
    return done


class Waiting:
    """A quiet child started ahead of its input (``start_waiting``): it gets on with what it
    can do alone (a replay child imports jax) until ``finish`` gives it its stdin and waits
    for its end as ``run_captured`` does; ``stop`` ends it unused. Its group never outlives
    this process, as with ``run``."""

    def __init__(self, argv: Sequence[str], child: Started) -> None:
        self._argv, self._child, self._open = list(argv), child, True

    def finish(
        self, data: bytes, *, timeout: float | None = None, bound: Bound | None = None
    ) -> Completed:
        """Write ``data`` to the child's stdin, close it, and wait for the child's end (an
        interrupt stops its group and is raised again, as in ``run_captured``; ``bound``:
        as ``run``'s)."""
        if not self._open:
            raise ProcessError("this child has already been finished or stopped")
        self._open = False
        with sigterm_as_interrupt():
            stdin = self._child.popen.stdin
            assert stdin is not None  # started with a pipe
            with contextlib.suppress(OSError):  # a child already gone says why in its output
                stdin.write(data)
            with contextlib.suppress(OSError):
                stdin.close()
            started = time.monotonic()
            deadline = _Deadline(started, timeout, bound)
            done = _follow(
                self._child,
                self._argv,
                deadline,
                None,
                streams.Merged(None, None, deadline.read),
                started,
            )
        if done.interrupted:
            raise KeyboardInterrupt
        return done

    def stop(self) -> None:
        """End the child unused (nothing when ``finish`` has taken it)."""
        if not self._open:
            return
        self._open = False
        popen = self._child.popen
        stop_group(popen, signal.SIGKILL)
        os.close(self._child.guard)
        os.close(self._child.status)
        for pipe in (popen.stdin, popen.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def start_waiting(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
) -> Waiting:
    """Start ``argv`` quietly, its stdin a pipe it reads from once ``Waiting.finish`` writes
    to it; the caller must ``finish`` or ``stop`` it."""
    child = starting.start(
        argv, env=env, cwd=None, limits=limits, stdin=subprocess.PIPE, echo=False
    )
    return Waiting(argv, child)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where Linux has one): how many
    workers, threads or streams to run at once."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def memory_and_swap() -> int | None:
    """This machine's RAM and swap in bytes (Linux's ``/proc/meminfo``), the most any one
    allocation of a process here can get; None where it cannot be read."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        return sum(int(fields[k].split()[0]) * 1024 for k in ("MemTotal", "SwapTotal"))
    except (OSError, ValueError, KeyError, IndexError):
        return None


# Signals that stop a run the way Ctrl-C does. One that is ignored (``nohup`` ignores SIGHUP)
# or has a handler of someone else's is left as it is.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM and SIGHUP like Ctrl-C while the block runs: each raises
    ``KeyboardInterrupt``, so all of them stop a child and its group the same way.

    Only the main thread receives signals and may set handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    # Python's own Ctrl-C handler: code that notes a stop first (the rerun) recognises it
    # as one it may replace.
    previous = {}
    for sig in INTERRUPTS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            previous[sig] = signal.signal(sig, signal.default_int_handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
