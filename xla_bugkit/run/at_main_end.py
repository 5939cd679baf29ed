"""What a rerun does once its program's main module has finished (heard by ``main_end``),
while the program still tears itself down: the caller's work (``AtMainEnd``), and where the
program is held there to serve replays (``held``), the run's record as it stands then.

A held program may never reach its own end: a replay it serves can crash it, or hang and be
killed. The record so far is its output up to its main module's end, with the exit status
its hook foresaw then (``Said.held``); where serving ended the program, that record is the
run's, and says why (``as_at_main_end``). ``Said`` keeps what a run's record says besides
how it ended, and makes the record at the run's own end too (``Said.record``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from xla_bugkit import proc
from xla_bugkit.hlo import flags
from xla_bugkit.run import evidence_files
from xla_bugkit.run import main_end as ends
from xla_bugkit.run.record import RunRecord
from xla_bugkit.run.stops import TimedLog

if TYPE_CHECKING:
    from xla_bugkit.failure.classify import Failure
    from xla_bugkit.run.processes import Culprit

# What reads the run once it has ended (classify, processes, weigh) is imported then: the
# program starts without waiting for it (``rerun``).


class AtMainEnd(NamedTuple):
    """What runs once the program's main module has finished: ``then`` (``main_end``), and
    after it ``while_held``, given the program's pid and the run's record so far
    (``Said.held``): a program whose environment asked it to serve replays there
    (``held``) waits for them, and goes on when they are done."""

    then: ends.Then | None = None
    while_held: WhileHeld | None = None


# Given the held program's pid, the run's record so far (made when first asked) and the
# moment the run's timeout ends it (monotonic; None: never); True where serving ended the
# program (a served replay crashed it, or hung and it was killed): the run's record is then
# the one so far.
WhileHeld = Callable[[int, Callable[[], RunRecord], float | None], bool]


class Said(NamedTuple):
    """What a run's record says besides how it ended."""

    command: Sequence[str]
    log_path: Path
    processes: Path
    hide: re.Pattern[bytes] | None
    base: Mapping[str, str]

    def record(
        self,
        done: proc.Completed,
        failure: Failure,
        merged: flags.MergedFlags,
        ended_at: float,
        culprit: Culprit | None,
    ) -> RunRecord:
        from xla_bugkit.run.weigh import weigh

        return RunRecord(
            command=tuple(self.command),
            exit_status=done.returncode,
            timed_out=done.timed_out,
            interrupted=done.interrupted,
            duration=done.duration,
            log=self.log_path,
            output=done.output,
            xla_flags=merged,
            failure=weigh(failure, culprit, ended_at=ended_at),
            culprit=culprit,
            hidden=self.hide.pattern.decode("latin-1") if self.hide is not None else None,
            tpu_args=flags.tpu_args(self.base.get(flags.TPU_ENV)),
        )

    def held(self, status: int | None, started: float, merged: flags.MergedFlags) -> RunRecord:
        """The record of a run whose program is held at its main module's end: its output
        so far, and the status its hook foresees; what its teardown adds is not in it."""
        from xla_bugkit.failure.classify import classify
        from xla_bugkit.run.processes import failing

        output = self.log_path.read_bytes().decode("utf-8", "replace")
        done = proc.Completed(status, output, False, time.monotonic() - started)
        failure = classify(output, exit_status=status)
        # What the failing process recorded of itself outweighs what its output let through.
        culprit = failing(evidence_files.read(self.processes))
        return self.record(done, failure, merged, time.time(), culprit)


class AtEnd:
    """What runs at the program's main module's end (``AtMainEnd``), for one run: the
    record so far is made when first asked; ``ended_serving`` keeps it where serving ended
    the program."""

    def __init__(
        self,
        work: ends.Then | AtMainEnd | None,
        said: Said,
        log: TimedLog,
        started: float,
        deadline: float | None,
        merged: flags.MergedFlags,
    ) -> None:
        self.work = work if isinstance(work, AtMainEnd) else AtMainEnd(work)
        self.said, self.log, self.merged = said, log, merged
        self.started, self.deadline = started, deadline
        self.main_end: ends.MainEnd | None = None
        self.ended_serving: RunRecord | None = None
        self._so_far: RunRecord | None = None

    @property
    def wanted(self) -> bool:
        return self.work.then is not None or self.work.while_held is not None

    def __call__(self, pid: int, exited: Callable[[], bool]) -> None:
        if self.work.then is not None:
            self.work.then(pid, exited)
        if self.work.while_held is not None and self.main_end is not None:
            self.log.flush()
            if self.work.while_held(pid, self.so_far, self.deadline):
                self.ended_serving = self.so_far()

    def so_far(self) -> RunRecord:
        if self._so_far is None:
            status = self.main_end.status if self.main_end is not None else None
            self._so_far = self.said.held(status, self.started, self.merged)
        return self._so_far


def as_at_main_end(run: RunRecord) -> RunRecord:
    """The record of a program that a replay served in its process ended: its own end is
    lost, the record at its main module's end stands, and says so."""
    note = (
        "the program's process ended while it served a replay at its main module's end: "
        "its record is as it was then (its own teardown never ran)"
    )
    return replace(run, xla_flags=replace(run.xla_flags, notes=(*run.xla_flags.notes, note)))
