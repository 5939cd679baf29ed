"""Hearing when the program's main module has finished, while it still tears itself down.

After its last line a Python program waits for its threads and runs its atexit functions
(jax's among them: a tenth of a second or more). The hook tells collect when that begins
(``hook.ending``) by opening a FIFO that a thread of collect's waits on, so the
bundle's first stages run in that time rather than after it. What they do there must be
what they would do after the exit, and harmless when it turns out unused: the stages after
the run find it done, or do it again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

ENV = "XLA_BUGKIT_MAIN_END"  # "<collect's pid>:<the FIFO>", read by the hook
FIFO = "main-end.fifo"


# What runs at the main module's end: given the pid that told, and whether the program has
# exited since (work that only saves time should stop there).
Then = Callable[[int, Callable[[], bool]], None]


class MainEnd:
    """A FIFO in ``folder`` and a thread that waits on it, then calls ``then(pid, exited)``
    with the pid the program's hook wrote. Leaving the block (the program has exited) stops
    the wait when nothing came, and returns once ``then`` has returned; the FIFO is removed."""

    def __init__(self, folder: Path, then: Then) -> None:
        self.path = (folder / FIFO).absolute()  # the program may change its folder
        self.then = then
        self.heard: int | None = None  # the pid that said its main module had finished
        self.status: int | None = None  # the exit status it foresaw then
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def env_value(self) -> str | None:
        """``ENV``'s value for the program, or None where no FIFO could be made."""
        return f"{os.getpid()}:{self.path}" if self._thread is not None else None

    def __enter__(self) -> MainEnd:
        try:
            os.mkfifo(self.path, 0o600)
        except OSError:  # a file system without FIFOs: the stages wait for the exit
            return self
        self._thread = threading.Thread(target=self._wait, name="xla-bugkit-main-end", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        if self._thread is not None:
            _knock(self.path)  # wakes a wait still blocked in open()
            self._thread.join()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _wait(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)  # returns when a writer opens it
        except OSError:
            return
        try:
            said = os.read(fd, 32)
        except OSError:
            said = b""
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        # "<pid>", or "<pid> <status>": the status it foresees (``hook.ending``).
        words = said.split()
        if self._closing.is_set() or not words or not words[0].isdigit():
            return
        self.heard = int(words[0])
        with contextlib.suppress(IndexError, ValueError):
            self.status = int(words[1])
        with contextlib.suppress(Exception):  # the stages after the run do it again, and say
            self.then(self.heard, self._closing.is_set)


def _knock(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: the thread is past open()
    except OSError:
        return
    os.close(fd)
