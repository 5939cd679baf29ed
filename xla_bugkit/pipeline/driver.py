"""collect and rebundle: the stages run in order, with the work dir kept or removed and
errors said as the user reads them."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from xla_bugkit import envinfo, frameworks
from xla_bugkit.capture import arguments, evidence, processes, workdir
from xla_bugkit.capture.rerun import RunRecord
from xla_bugkit.errors import DISK_FULL_ERRNOS, BugkitError, DiskFullError, ExitCode
from xla_bugkit.pipeline.options import (
    NO_SELECTION,
    CollectOptions,
    CollectResult,
    Dumps,
    check_options,
    rebundle_command,
)
from xla_bugkit.pipeline.stages import (
    choose,
    exit_code,
    index_dumps,
    replay_modules,
    run_program,
    search_wrong_value,
    write_bundle,
)
from xla_bugkit.replay import differential
from xla_bugkit.replay.stage import Replays
from xla_bugkit.ui import Ui


def collect(command: Sequence[str], options: CollectOptions, ui: Ui | None = None) -> CollectResult:
    """Rerun ``command`` with dumps on and write a bundle of the modules that matter.

    The options and the output are checked before the program starts. Once it has run, its
    work dir is kept when ``keep_workdir`` asks, when it holds the dumps of a
    ``--xla_dump_to`` of the user's that the run replaced, and when the bundle cannot be
    made (the error then says how to make it from there: ``rebundle``).
    """
    ui = ui or Ui()
    fmt = check_options(command, options)
    work = workdir.prepare(options.workdir)
    keep, run = options.keep_workdir, None
    # A JAX program's hook records its devices; for others the environment report's device
    # probe imports jax (seconds): on a CPU-only machine it runs alongside the program.
    if frameworks.from_command(command) is not frameworks.Framework.JAX:
        envinfo.start_device_probe()
    try:
        run = _run_stage(work, command, options, ui)
        user_dumps = work / workdir.DUMP if workdir.replaced_dump_dir(run) is not None else None
        keep = keep or user_dumps is not None
        result = _after_run(work, run, options, fmt, ui)
        return replace(result, workdir=work if keep else None, user_dumps=user_dumps)
    except KeyboardInterrupt:
        if keep:
            ui.say(f"work dir kept: {work}")
        raise
    except Exception as e:
        rebundlable = run is not None and _holds_dumps(work)
        keep = keep or rebundlable
        error = _explained(e, work, options, ui, kept=rebundlable)
        if error is e:
            raise
        raise error from None
    finally:
        if not keep:
            workdir.remove(work, made_here=options.workdir is None)


def rebundle(work: Path, options: CollectOptions, ui: Ui | None = None) -> CollectResult:
    """Make a bundle again from a work dir that ``collect`` kept, with ``options`` (another
    ``module_re``, say): the program does not run again, and the work dir stays as it was."""
    ui = ui or Ui()
    run = workdir.load_run(work)
    fmt = check_options(run.command, options)
    try:
        return replace(_bundle_from(work, run, options, fmt, ui), workdir=work)
    except OSError as e:
        error = _explained(e, work, options, ui)
        if error is e:
            raise
        raise error from None


def _run_stage(work: Path, command: Sequence[str], options: CollectOptions, ui: Ui) -> RunRecord:
    ui.say(f"running {' '.join(command)} with XLA dumps on")
    with ui.timed("run"):
        run = run_program(command, work, options, echo=ui.verbosity >= 0)
    try:
        workdir.save_run(work, run)
    except OSError as e:
        # Only a later `xla-bugkit bundle` needs the record: this run can still be bundled.
        ui.warn(f"cannot save the run record in {work}: {e.strerror or e}")
    for note in run.xla_flags.notes:
        ui.warn(note)
    ui.say(f"the program ended: {run.failure.describe}")
    return run


def _after_run(
    work: Path, run: RunRecord, options: CollectOptions, fmt: str, ui: Ui
) -> CollectResult:
    if not run.failure.kind.is_failure and not options.always:
        return CollectResult(ExitCode.NO_FAILURE, run, NO_SELECTION, fmt=fmt)
    return _bundle_from(work, run, options, fmt, ui)


def _bundle_from(
    work: Path, run: RunRecord, options: CollectOptions, fmt: str, ui: Ui
) -> CollectResult:
    """The stages after the run: index, choose (for a wrong result, by replaying candidates:
    ``search_wrong_value``), replay, write the bundle."""
    run = with_culprit(work, run, ui)
    # The failing process's own dumps (each process of a run dumps into its own folder).
    dump_dir = processes.dump_folder(work / workdir.DUMP, run.culprit)
    stage_dir = work / workdir.STAGE
    # XLA writes no snapshot of a multi-device execution, TensorFlow none on CPU: the
    # arguments the hook saved. A TensorFlow process starts no backend the hook sees, so
    # without a culprit every process's records are read.
    saved = run.culprit_evidence or evidence.load(work)
    for note in arguments.write_snapshots(dump_dir, saved):
        ui.warn(note)
    with ui.phase("indexing dumps"), ui.timed("index"):
        found = index_dumps(dump_dir, run)
    for problem in found.problems:
        ui.warn(f"{problem}: free disk space or raise the file-size limit, then run again")
    if not found.index.modules:
        raise BugkitError(_no_dumps_message(run))
    with ui.timed("select"):
        # Module ids are per process: only the failing process's records describe its dumps.
        selection = choose(found.index, run, options, run.culprit_evidence)
    # The replays' outputs and references: the bundle's expected.npz and wrong values.
    with tempfile.TemporaryDirectory(prefix="xla-bugkit-arrays-") as kept:
        arrays = Path(kept)
        search = search_wrong_value(dump_dir, found.index, run, options, ui, arrays)
        if search is not None:
            selection = differential.merged(selection, search, limit=options.limit)
            found = Dumps(found.index, (*found.problems, search.note) if search.note
                          else found.problems)  # fmt: skip
        # The search replayed on the real inputs; --no-data replays on generated ones.
        known = differential.known_verdicts(search if options.data else None, selection.chosen)
        replays = (replay_modules(dump_dir, selection, run, options, ui, arrays=arrays,
                                  known=known)
                   if options.replay else None) or Replays(())  # fmt: skip
        if replays.interrupted:
            found = Dumps(found.index, (*found.problems, replays.note))
        try:
            with ui.phase("writing the bundle"):
                manifest, size = write_bundle(
                    stage_dir, found, selection, run, replays.verdicts, options, ui, arrays
                )
        finally:
            shutil.rmtree(stage_dir, ignore_errors=True)  # a copy of what the archive holds
    return CollectResult(
        exit_code(run, replays.verdicts, replay_interrupted=replays.interrupted), run,
        selection, replays.verdicts, options.output, size, tuple(manifest["notes"]),
        manifest, fmt, replay_interrupted=replays.interrupted,
    )  # fmt: skip


def with_culprit(work: Path, run: RunRecord, ui: Ui) -> RunRecord:
    """``run`` with the process its failure belongs to, chosen from what each process of
    the run recorded (``processes.failing``); dumps it sent elsewhere are gathered first."""
    culprit = processes.failing(evidence.load(work))
    if culprit is None:
        return run
    if culprit.others:
        ui.say(f"the failure is in {culprit.label}: {culprit.why}")
    folder = processes.dump_folder(work / workdir.DUMP, culprit)
    for note in processes.gather_elsewhere(culprit.process, folder):
        ui.say(note)
    return replace(run, culprit=culprit)


def _holds_dumps(work: Path) -> bool:
    try:
        return next((work / workdir.DUMP).iterdir(), None) is not None
    except OSError:
        return False


def _explained(
    e: Exception, work: Path, options: CollectOptions, ui: Ui, *, kept: bool = False
) -> Exception:
    """``e`` as the user reads it; when the run is ``kept``, saying where and how to make the
    bundle from it."""
    if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
        e = DiskFullError(
            f"no space left on the disk of {work} ({e.filename or 'work dir'}): "
            "free some, or give --workdir on a disk with room"
        )
    if not kept:
        return e
    hint = (
        f"the run is kept in {work}: once that is fixed, make the bundle with: "
        f"{rebundle_command(work, options)}"
    )
    if isinstance(e, BugkitError):
        e.args = (f"{e}; {hint}",)
    else:
        ui.warn(hint)  # a bug of ours: its own report follows
    return e


def _no_dumps_message(run: RunRecord) -> str:
    return (
        f"the program wrote no XLA dumps ({run.failure.describe}): it may replace XLA_FLAGS "
        "instead of appending to it (os.environ['XLA_FLAGS'] += ' --flag' keeps ours), stop "
        "before JAX compiles anything, or not use XLA at all"
    )
