"""The program's own process, held at its main module's end to serve collect's replays
(``replay.child.in_program``, started by the hook's ``ending``): collect's side.

Two FIFOs in a folder of the run: collect writes one spec a line into ``requests`` and
reads each replay's output, up to its ``ENDED`` line, from ``answers`` (the kept worker's
lines: ``replay.protocol``). The answers' reading end is opened before the program starts,
so the program's hook finds a reader; the requests' writing end once the program has said
its main module finished (``main_end``): a program that is not serving has no reader
there, and ``open`` says so. Closing the requests (``let_go``) lets the program go on to
its own exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from pathlib import Path

from xla_bugkit.proc.serving import Reply

# JSON, [requests FIFO, answers FIFO, bound in seconds], and the folder the program imports the
# server from: read by the hook (``hook.ending``, which spells them itself).
SERVE_HERE = "XLA_BUGKIT_SERVE_HERE"
SERVE_PATH = "XLA_BUGKIT_SERVE_PATH"
NOT_HERE = "XLA_BUGKIT_NOT_HERE: "  # the hook could not load the server: nothing is served
REQUESTS, ANSWERS = "serve-requests.fifo", "serve-answers.fifo"
# How long the program waits for collect's next request before it goes on to its exit.
BOUND = 120.0


class Held:
    """The FIFOs for one run (``env`` for the program), and once ``open``, the held
    program's process ``pid``, asked one request at a time (``ask``) until ``let_go``."""

    def __init__(self, folder: Path, answer: str, bound: float = BOUND) -> None:
        self.requests, self.answers = folder / REQUESTS, folder / ANSWERS
        self._answer = answer.encode()
        self._bound = bound
        self._read: int | None = None
        self._write: int | None = None
        self._pending = b""
        self.pid: int | None = None
        self.ended_it = False  # a request ended the program: it crashed, or hung and was killed
        for fifo in (self.requests, self.answers):
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo, 0o600)
        self._read = os.open(self.answers, os.O_RDONLY | os.O_NONBLOCK)

    def env(self, package_parent: Path) -> dict[str, str]:
        """What the program's environment needs to serve here."""
        where = json.dumps([str(self.requests), str(self.answers), self._bound])
        return {SERVE_HERE: where, SERVE_PATH: str(package_parent)}

    @property
    def alive(self) -> bool:
        return self._write is not None

    def open(self, pid: int) -> bool:
        """Start asking the program ``pid``, which has said its main module finished:
        whether it serves (it reads the requests)."""
        try:
            self._write = os.open(self.requests, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody reads, the program does not serve
            return False
        os.set_blocking(self._write, True)
        self.pid = pid
        return True

    def ask(self, request: bytes, *, timeout: float | None = None) -> Reply:
        """As ``Serving.ask``: the replay's output and its ``ENDED`` line's rest; with no
        answer (None) when the program ended, could not serve, or passed ``timeout`` (then
        it is killed: a hung replay holds the device)."""
        started = time.monotonic()
        if self._write is None:
            return Reply("", None, None, False, 0.0)
        try:
            os.write(self._write, request.rstrip(b"\n") + b"\n")
        except OSError:
            self.let_go()
            return Reply("", None, None, False, time.monotonic() - started)
        kept: list[bytes] = []
        deadline = None if timeout is None else started + timeout
        while True:
            line = self._line(deadline)
            if line is not None and line.startswith(NOT_HERE.encode()):
                kept.append(line)  # why nothing is served here: it goes on to its exit
                self.let_go()
                return Reply(b"".join(kept).decode(), None, None, False, 0.0)
            if line is None:
                timed_out = deadline is not None and time.monotonic() >= deadline
                self._end(kill=timed_out)
                output = b"".join(kept).decode("utf-8", "replace")
                return Reply(output, None, None, timed_out, time.monotonic() - started)
            if line.startswith(self._answer):
                answer = line[len(self._answer) :].decode("utf-8", "replace").strip()
                output = b"".join(kept).decode("utf-8", "replace")
                return Reply(output, answer, None, False, time.monotonic() - started)
            kept.append(line)

    def _line(self, deadline: float | None) -> bytes | None:
        """The next whole line of the answers; None at their end or the deadline."""
        assert self._read is not None
        while b"\n" not in self._pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            ready, _, _ = select.select([self._read], [], [], left)
            if not ready:
                return None
            try:
                chunk = os.read(self._read, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:  # the program closed its end: it ended
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line + b"\n"

    def _end(self, *, kill: bool) -> None:
        self.ended_it = True
        if kill and self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)
        self.let_go()

    def let_go(self, *, wait: bool = False) -> None:
        """No more requests: the program goes on to its own exit; with ``wait``, this
        returns once it has exited (its device is free), or after ``bound`` seconds."""
        if self._write is not None:
            with contextlib.suppress(OSError):
                os.close(self._write)
            self._write = None
        if wait and self.pid is not None:
            _wait_for_exit(self.pid, self._bound)

    def close(self) -> None:
        """Let go, and remove the FIFOs."""
        self.let_go()
        if self._read is not None:
            os.close(self._read)
            self._read = None
        for fifo in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                fifo.unlink()


def _wait_for_exit(pid: int, bound: float) -> None:
    """Until ``pid`` has exited, at most ``bound`` seconds. It is the run's own child, whose
    status the run's wait collects: this one only watches (a pidfd, or ``waitid`` that
    leaves the status unreaped)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # already gone, or no pidfd here
        fd = None
    if fd is not None:
        try:
            select.select([fd], [], [], bound)  # readable once it has exited
        finally:
            os.close(fd)
        return
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already
            return
        if found is not None:
            return
        time.sleep(0.05)
