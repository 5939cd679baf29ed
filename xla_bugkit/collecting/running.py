"""The program's run under collect: with dumps on, its output live and in the work dir,
the run's record saved there, and the part of its job it turned out to be."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from xla_bugkit.collecting import ahead, job, warm, workdir
from xla_bugkit.collecting.job import JobPart
from xla_bugkit.collecting.options import CollectOptions
from xla_bugkit.run.at_main_end import AtMainEnd
from xla_bugkit.run.job_end import JOB
from xla_bugkit.run.record import RunRecord
from xla_bugkit.run.rerun import Ending, rerun
from xla_bugkit.ui import Ui


def run_program(
    command: Sequence[str], work: Path, options: CollectOptions, *, echo: bool = False
) -> RunRecord:
    """Rerun ``command`` with dumps into ``work/dump`` and its output into ``work/run.log``;
    ``echo`` streams the output to the terminal as it arrives. Where asked (``ahead``), the
    program makes the replay stage's replays at its main module's end."""
    held, asks = ahead.held(work)
    base = {**os.environ, **asks} if held is not None else None

    def while_held(pid: int, so_far: Callable[[], RunRecord], deadline: float | None) -> bool:
        assert held is not None
        return ahead.replay_ahead(work, held, pid, so_far, options, deadline)

    try:
        return rerun(
            command,
            dump_dir=work / workdir.DUMP,
            log_path=work / workdir.LOG,
            ending=Ending(
                options.timeout, options.job_grace if options.job_part is not None else None
            ),
            echo=echo,
            base_env=base,
            capture=options.capture,
            pass_re=options.dump_passes,
            at_main_end=AtMainEnd(
                lambda pid, exited: warm.at_main_end(
                    command, work, pid, exited, max_size=options.max_size
                ),
                while_held if held is not None else None,
            ),
        )
    finally:
        if held is not None:
            held.close()


def run_stage(
    work: Path, command: Sequence[str], options: CollectOptions, ui: Ui
) -> tuple[CollectOptions, RunRecord]:
    """The program's run, and the options with the part of its job it turned out to be."""
    ui.say(f"running {' '.join(command)} with XLA dumps on")
    ui.say(options.capture.describe())
    with ui.timed("run"):
        run = run_program(command, work, options, echo=ui.verbosity >= 0)
    ended = time.time()
    if options.job_part is not None and options.snapshots is None:
        notes = (*run.xla_flags.notes, job.every_snapshot_note(options.job_part))
        run = replace(run, xla_flags=replace(run.xla_flags, notes=notes))
    options = _as_part_of_its_job(options, run, ui)
    if options.job_part is not None:
        run = replace(run, job=options.job_part.to_json(ended=ended))
    try:
        workdir.save_run(work, run)
    except OSError as e:
        # Only a later `xla-bugkit bundle` needs the record: this run can still be bundled.
        ui.warn(f"cannot save the run record in {work}: {e.strerror or e}")
    for note in run.xla_flags.notes:
        ui.warn(note)
    ui.say(f"the program ended: {_how_it_ended(run)}")
    return options, run


def _as_part_of_its_job(options: CollectOptions, run: RunRecord, ui: Ui) -> CollectOptions:
    """``options``, for a run of one process of a ``jax.distributed`` job that no launcher's
    environment or ``--job-part`` named, with the part the process id the hook saw gives it,
    so that the job's other collects, started the same way, write beside it and not over it."""
    culprit = run.culprit
    if options.job_part is not None or culprit is None or culprit.others:
        return options
    process = culprit.process
    if process.rank is None or (process.processes or 0) < 2:
        return options
    from xla_bugkit.bundle.output import check_output

    part = JobPart(process.rank, process.processes, "jax.distributed")
    output = job.part_output(options.output, part)
    check_output(output, options.fmt, force=options.force)
    ui.say(f"this run was {part.describe()}: the bundle is named for its part")
    return replace(options, job_part=part, output=output)


def _how_it_ended(run: RunRecord) -> str:
    """The run's failure in a few words; the summary, printed once the bundle is written,
    gives its headline (printing it here too would say it twice)."""
    f = run.failure
    if f.signal and f.stopped_by is None:
        # A process it started may have died on the signal, the program itself exited.
        return f"{f.kind.value} ({run.signal_elsewhere or f.signal})"
    if (thrown_in := run.went_on_from) is not None:
        return f"{f.kind.value} (uncaught in {thrown_in}; Python went on, and it exited with 0)"
    if f.stopped_by == JOB:
        return f"{f.kind.value} (its job ended it; collect then stopped it)"
    if f.stopped_by is not None or run.exit_status in (None, 0):
        return f.kind.value
    if run.culprit is not None and run.culprit.process.ppid != os.getpid():
        # A process the program started failed; the program exited on its own terms.
        exited = f"the program exited with status {run.exit_status}"
        return f"{f.kind.value} (in {run.culprit.label}; {exited})"
    return f"{f.kind.value} (exit status {run.exit_status})"
