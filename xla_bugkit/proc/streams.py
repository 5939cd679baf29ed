"""A child's output as it arrives: both pipes pumped into one record of whole lines (and a
log file), and shown live on the terminal, less the lines it is told to hide. ``proc`` runs
the child; this is what it does with what the child writes."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable
from typing import BinaryIO

# A line held back this long is let through unfinished (a progress bar's \r never ends one).
HOLD_AT_MOST = 1 << 16

# How glog/absl lines ("I1202 23:03:16.2 ...") and TensorFlow's ("2026-12-02 17:51:18...")
# begin, as far as an unfinished line shows: "I", "I12", "2026-1" all may be one.
LOG_LINE_START = re.compile(rb"(?:I\d{0,4}|\d{1,4}(?:-\d{0,2}){0,2})(?: |$)")


def pump(
    source: BinaryIO,
    terminal: BinaryIO | None,
    merged: Merged,
) -> None:
    """Copy ``source`` to ``terminal`` (live) and ``merged`` (whole lines) until it ends."""
    # os.read returns as soon as anything is there: output reaches the terminal live.
    fd = source.fileno()
    held = b""  # this stream's unfinished last line
    while chunk := os.read(fd, 65536):
        merged.arrived()
        if terminal is not None:
            with contextlib.suppress(OSError, ValueError):
                terminal.write(chunk)
                terminal.flush()
        *lines, held = (held + chunk).split(b"\n")
        if len(held) >= HOLD_AT_MOST:  # a line that never ends (a progress bar's \r)
            lines, held = [*lines, held], b""
            merged.add(b"\n".join(lines))
        elif lines:
            merged.add(b"\n".join(lines) + b"\n")
    merged.add(held)
    if isinstance(terminal, Hiding):
        with contextlib.suppress(OSError, ValueError):
            terminal.finish()


class Merged:
    """The child's two streams as one record (and log), whole lines at a time: a line of
    stderr never lands inside a line of stdout, however the two pipes' reads interleave.
    ``on_lines`` reads each batch of whole lines as it is kept."""

    def __init__(
        self,
        log: BinaryIO | None,
        on_output: Callable[[], None] | None,
        on_lines: Callable[[bytes], None] | None = None,
    ) -> None:
        self._log, self._on_output, self._on_lines = log, on_output, on_lines
        self._lock = threading.Lock()
        self.kept: list[bytes] = []

    def arrived(self) -> None:
        """Output arrived, whole lines or not: the clock a stall is measured by."""
        if self._on_output is not None:
            self._on_output()

    def add(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            self.kept.append(data)
            if self._log is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._log.write(data)
                    self._log.flush()
            if self._on_lines is not None:
                self._on_lines(data)  # under the lock: in the order they were kept


class Hiding:
    """A terminal that leaves out whole lines ``hide`` matches. Other output passes at once;
    an unfinished line that looks like the start of a log line waits for its end."""

    def __init__(self, sink: BinaryIO, hide: re.Pattern[bytes]) -> None:
        self._sink, self._hide, self._held = sink, hide, b""

    def write(self, data: bytes) -> None:
        *lines, rest = (self._held + data).split(b"\n")
        shown = [line + b"\n" for line in lines if not self._hide.match(line)]
        self._held = rest if len(rest) < HOLD_AT_MOST and LOG_LINE_START.match(rest) else b""
        if not self._held:
            shown.append(rest)
        self._sink.write(b"".join(shown))

    def flush(self) -> None:
        self._sink.flush()

    def finish(self) -> None:
        """The output ended: a last unfinished line is shown, unless it is hidden."""
        if self._held and not self._hide.match(self._held):
            self._sink.write(self._held)
            self._sink.flush()
