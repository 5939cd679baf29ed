"""When a run was stopped before its own end (by its timeout, or by the user: Ctrl-C,
SIGTERM, SIGHUP), and how long it had gone without output by then: how a hang shows.

The run's log (``TimedLog``) notes when output last arrived; a signal notes the moment it
came (``stops_on_signals``), so what the stop itself makes the program print (a traceback)
does not count as output before it; ``stop`` says what both add up to, for the failure.
"""

from __future__ import annotations

import contextlib
import io
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from xla_bugkit import proc

if TYPE_CHECKING:
    from xla_bugkit.failure.classify import Stop


class TimedLog(io.BufferedWriter):
    """The run's log file, noting when output last arrived before the run was stopped: how
    long a program went without printing anything is how a hang shows."""

    def __init__(self, path: Path, deadline: float | None) -> None:
        super().__init__(io.FileIO(path, "w"))
        self.deadline = deadline  # when the timeout stops the run
        self.last: float | None = None  # when output last arrived
        self.stopped_at: float | None = None  # when a signal stopped the run
        self.last_at_stop: float | None = None  # ``last`` at the stop

    def stop_now(self) -> None:
        if self.stopped_at is None:
            self.stopped_at, self.last_at_stop = time.monotonic(), self.last

    def arrived(self) -> None:
        """Output arrived (the log itself gets it a whole line at a time)."""
        now = time.monotonic()
        stopped = self.stopped_at is not None
        if not stopped and (self.deadline is None or now <= self.deadline):
            self.last = now  # output after the stop is the stop's doing (a traceback, say)


def stop(log: TimedLog, by: str, started: float, deadline: float | None) -> Stop:
    """When the run was stopped (at its ``deadline``, or by a signal)."""
    from xla_bugkit.failure.classify import Stop

    # Without a moment noted (a signal handler of someone else's), the end has to do.
    at = deadline if deadline is not None else log.stopped_at or time.monotonic()
    last = log.last_at_stop if log.stopped_at is not None else log.last
    stalled = at - (last if last is not None else started)
    return Stop(by=by, ran=max(at - started, 0.0), stalled=max(stalled, 0.0))


@contextlib.contextmanager
def stops_on_signals(log: TimedLog) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP note the moment in ``log``, then interrupt as Ctrl-C does
    (proc stops the child on ``KeyboardInterrupt``)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        log.stop_now()
        raise KeyboardInterrupt

    # Only the main thread gets signals; a handler of someone else's is left alone.
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in proc.INTERRUPTS:
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
