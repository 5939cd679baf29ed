"""A quiet child kept for several requests: each written to its stdin as one line, each
answered on its output up to a line of its own (``Serving.ask``), until it ends.

Where a child is costly to start (a replay child that opens a TPU), one can serve the
requests one after another. It starts and ends as every child does (``proc``: its own
process group, the launcher's guard, death with us), and each request is waited on as
``run_captured`` waits on a child: under its own timeout, which stops the group, and
Ctrl-C, SIGTERM or SIGHUP, which stop it and are raised again as ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from xla_bugkit import proc
from xla_bugkit.errors import ProcessError
from xla_bugkit.proc import starting


@dataclass(frozen=True)
class Reply:
    """What a served child did with one request: ``answer``, the rest of the line that
    ended its answer (None: the child ended first, with ``returncode``, or was stopped at
    the timeout); ``output``, all it wrote since the request before, that line left out."""

    output: str
    answer: str | None
    returncode: int | None
    timed_out: bool
    duration: float


class Serving:
    """A child started by ``start_serving``: ``ask`` it, one request at a time, until it
    ends (a crash, a timeout) or ``stop`` ends it."""

    def __init__(self, argv: Sequence[str], child: starting.Started, answer: str) -> None:
        self._argv, self._child, self._answer = list(argv), child, answer.encode()
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._checked = False
        self._reader: threading.Thread | None = None
        self.alive = True

    @property
    def pid(self) -> int:
        return self._child.popen.pid

    def ask(self, request: bytes, *, timeout: float | None = None) -> Reply:
        """Write ``request`` (one line) to the child and wait for the line that starts with
        its ``answer`` prefix, the child's end, or ``timeout`` seconds (which stop it)."""
        if not self.alive:
            raise ProcessError("this child has already ended")
        started = time.monotonic()
        with proc.sigterm_as_interrupt():
            try:
                self._begin()
                stdin = self._child.popen.stdin
                assert stdin is not None  # started with a pipe
                with contextlib.suppress(OSError):  # a child already gone says why
                    stdin.write(request.rstrip(b"\n") + b"\n")
                    stdin.flush()
                return self._wait(started, timeout)
            except KeyboardInterrupt:
                self._end(signal.SIGINT, wait=0.0)
                raise

    def _begin(self) -> None:
        """Once: wait for the exec, and start reading the child's output."""
        if self._checked:
            return
        self._checked = True
        try:
            with os.fdopen(self._child.status, "rb", buffering=0) as status:
                starting.check_exec(status, self._argv, self._child.popen)
        except ProcessError:
            self.alive = False
            self._close()
            raise
        stdout = self._child.popen.stdout
        assert stdout is not None
        self._reader = threading.Thread(target=_read, args=(stdout, self._lines), daemon=True)
        self._reader.start()

    def _wait(self, started: float, timeout: float | None) -> Reply:
        kept: list[bytes] = []
        while True:
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                self._end(signal.SIGTERM, wait=0.0)
                return self._reply(kept, None, timed_out=True, started=started)
            if line is None:  # its output ended: so does the child, with its own status
                left = None if timeout is None else timeout - (time.monotonic() - started)
                stopped = self._end(signal.SIGTERM, wait=None if left is None else max(0.0, left))
                return self._reply(kept, None, timed_out=stopped, started=started)
            if line.startswith(self._answer):
                answer = line[len(self._answer) :].decode("utf-8", "replace").strip()
                return self._reply(kept, answer, timed_out=False, started=started)
            kept.append(line)

    def _reply(
        self, kept: list[bytes], answer: str | None, *, timed_out: bool, started: float
    ) -> Reply:
        if answer is None:  # what the child wrote as it was stopped belongs to this request
            kept.extend(self._rest())
        output = b"".join(kept).decode("utf-8", errors="replace")
        returncode = None if answer is not None else self._child.popen.returncode
        return Reply(output, answer, returncode, timed_out, time.monotonic() - started)

    def _rest(self) -> list[bytes]:
        """The output the child wrote before it ended (``_end`` let the reader read it all)."""
        rest: list[bytes] = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return rest
            if line is not None:
                rest.append(line)

    def _end(self, first: signal.Signals, *, wait: float | None) -> bool:
        """The child ends: by itself within ``wait`` seconds (None: however long), or
        ``first`` stops its group (then True); the guard ends whatever it left behind."""
        if not self.alive:
            return False
        self.alive = False
        popen = self._child.popen
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=wait)
        stopped = popen.returncode is None
        if stopped:
            proc.stop_group(popen, first)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        self._close()
        return stopped

    def _close(self) -> None:
        os.close(self._child.guard)
        if not self._checked:
            self._checked = True
            os.close(self._child.status)
        popen = self._child.popen
        if popen.stdin is not None:
            with contextlib.suppress(OSError):
                popen.stdin.close()
        if self._reader is not None:  # its group is gone: the output ends
            self._reader.join(timeout=proc.GRACE_SECONDS)
        if popen.stdout is not None:
            with contextlib.suppress(OSError):
                popen.stdout.close()

    def stop(self) -> None:
        """End the child between requests: its stdin closes, which ends a child that
        serves until then; one that goes on past ``proc.GRACE_SECONDS`` is killed."""
        if self.alive and self._child.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self._child.popen.stdin.close()
        self._end(signal.SIGKILL, wait=proc.GRACE_SECONDS)


def _read(stdout: BinaryIO, lines: queue.Queue[bytes | None]) -> None:
    """Pass the child's output on line by line, and None once it ends."""
    try:
        for line in iter(stdout.readline, b""):
            lines.put(line)
    except (OSError, ValueError):  # closed under us: the child was stopped
        pass
    lines.put(None)


def start_serving(
    argv: Sequence[str],
    *,
    answer: str,
    env: Mapping[str, str] | None = None,
    limits: proc.Limits | None = None,
) -> Serving:
    """Start ``argv`` quietly, its stdin a pipe of requests, its stdout and stderr one pipe
    in which a line that starts with ``answer`` ends each request's answer; the caller must
    ``stop`` it unless it has ended."""
    child = starting.start(
        argv, env=env, cwd=None, limits=limits, stdin=subprocess.PIPE, echo=False
    )
    return Serving(argv, child, answer)
