"""What xla-bugkit says while it works: progress on a terminal, quiet in logs and CI."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO

# Control characters but the newline and the tab: what a terminal would act on (an escape
# sequence clears the screen or sets the title) in text from a bundle or a program's output.
_CONTROL = dict.fromkeys([*range(0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)])


def shown(text: str) -> str:
    """``text`` as a terminal may print it: each control character but the newline and the
    tab spelled out (``\\x1b``), so that a stranger's bundle cannot drive the terminal."""
    if not any(ord(c) in _CONTROL for c in text):
        return text
    return "".join(f"\\x{ord(c):02x}" if ord(c) in _CONTROL else c for c in text)


@dataclass
class Ui:
    """Messages go to stderr (stdout belongs to the user's program and to ``--json``).

    ``verbosity``: -1 quiet (errors and the final summary only), 0 normal, 1 verbose.
    Progress lines appear only on a terminal, or with -v.
    """

    verbosity: int = 0
    stream: TextIO = field(default_factory=lambda: sys.stderr)

    @property
    def tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def say(self, message: str) -> None:
        if self.verbosity >= 0:
            print(f"xla-bugkit: {shown(message)}", file=self.stream, flush=True)

    def warn(self, message: str) -> None:
        print(f"xla-bugkit: warning: {shown(message)}", file=self.stream, flush=True)

    def detail(self, message: str) -> None:
        if self.verbosity > 0:
            print(f"xla-bugkit:   {shown(message)}", file=self.stream, flush=True)

    def summary(self, text: str) -> None:
        print(shown(text), file=self.stream, flush=True)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Announce a long phase and how long it took (terminal or -v only)."""
        show = self.verbosity > 0 or (self.verbosity == 0 and self.tty)
        if show:
            print(f"xla-bugkit: {name} ...", file=self.stream, flush=True)
        started = time.monotonic()
        yield
        if show:
            took = time.monotonic() - started
            print(f"xla-bugkit: {name}: done in {took:.1f} s", file=self.stream, flush=True)

    def progress(self, name: str) -> ProgressLine:
        return ProgressLine(self, name)

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Time a stage for benchmarks, silently: with ``XLA_BUGKIT_TIMINGS=FILE`` set, one
        JSON line per stage (wall and CPU seconds, children included) is appended to FILE;
        without it this costs one environment lookup."""
        path = os.environ.get(TIMINGS_ENV)
        if not path:
            yield
            return
        wall, cpu = time.perf_counter(), _cpu_seconds()
        try:
            yield
        finally:
            note_timing(stage, time.perf_counter() - wall, _cpu_seconds() - cpu)


TIMINGS_ENV = "XLA_BUGKIT_TIMINGS"


def note_timing(stage: str, wall: float, cpu: float | None = None) -> None:
    """Append one stage's seconds to the ``XLA_BUGKIT_TIMINGS`` file, where it is set (for
    benchmarks; a replay's own phases come here from the process that runs it)."""
    path = os.environ.get(TIMINGS_ENV)
    if not path:
        return
    line: dict[str, object] = {"stage": stage, "wall": wall}
    if cpu is not None:
        line["cpu"] = cpu
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _cpu_seconds() -> float:
    """User + system CPU of this process and its waited-for children."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class ProgressLine:
    """A "name: done/total" line rewritten in place on a terminal; silent elsewhere."""

    ui: Ui
    name: str
    _last: float = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.ui.tty or self.ui.verbosity < 0:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.2:
            return
        self._last = now
        pct = 100 * done // total if total else 100
        end = "\n" if done >= total else ""
        print(f"\rxla-bugkit: {self.name}: {pct}%", end=end, file=self.ui.stream, flush=True)
