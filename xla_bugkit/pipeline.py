"""collect's pipeline as library stages: run -> dumps -> select -> replay -> bundle.

``collect`` runs them all; ``rebundle`` runs the stages after the run again on a work dir
that ``collect`` kept. Each stage is also a function of its own, for benchmarks and for
programs that want one step. Stages report progress on the ``Ui`` they are given and print
no summary: that is the commands'.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from xla_bugkit import archive, config, envinfo, github
from xla_bugkit.archive.read import suffix_format
from xla_bugkit.bundle import build, layout
from xla_bugkit.bundle.manifest import Manifest
from xla_bugkit.bundle.output import check_output
from xla_bugkit.capture import arguments, dumps, evidence, processes, workdir
from xla_bugkit.capture.rerun import RunRecord, rerun
from xla_bugkit.capture.selection import Selection, select
from xla_bugkit.errors import DISK_FULL_ERRNOS, BugkitError, DiskFullError, ExitCode
from xla_bugkit.failure import Kind
from xla_bugkit.redact import Redactor, command_note
from xla_bugkit.replay import differential, stage
from xla_bugkit.replay.judge import Verdict
from xla_bugkit.replay.stage import Replays
from xla_bugkit.ui import Ui


@dataclass(frozen=True)
class CollectOptions:
    """How ``collect`` runs; the defaults are the CLI's."""

    output: Path = Path(f"bundle.{config.DEFAULT_FORMAT}")
    fmt: str | None = None  # from the output's suffix when None
    timeout: float | None = None
    replay_timeout: float = config.REPLAY_TIMEOUT
    # Seconds to spend finding the module that computes a wrong value (differential replay).
    budget: float = config.SEARCH_BUDGET
    module_re: str | None = None
    symbol: str | None = None
    workdir: Path | None = None
    keep_workdir: bool = False
    always: bool = False  # bundle even when the program succeeds
    replay: bool = True
    data: bool = True  # ship snapshots (real inputs)
    limit: int = 3
    # Where the summary's new-issue link points; None: the framework's tracker (or openxla/xla).
    repo: str | None = None
    max_size: int | None = config.MAX_SIZE
    force: bool = False  # replace an existing output that is not an xla-bugkit bundle
    include_source: bool = False  # ship the command's main script, redacted
    shrink: str | None = None  # --shrink: the shrink's budget ("10m"); None: no shrink


@dataclass(frozen=True)
class CollectResult:
    """What ``collect`` did. ``exit_code`` is what the CLI returns."""

    exit_code: int
    run: RunRecord
    selection: Selection  # empty when nothing was bundled
    verdicts: tuple[Verdict, ...] = ()
    bundle: Path | None = None
    size: int = 0
    notes: tuple[str, ...] = field(default=())
    manifest: Manifest | None = None
    fmt: str = config.DEFAULT_FORMAT
    workdir: Path | None = None  # the work dir, when it was kept (``rebundle`` reads it)
    user_dumps: Path | None = None  # the dumps of the user's own --xla_dump_to, moved here
    replay_interrupted: bool = False  # Ctrl-C stopped the replay stage


@dataclass(frozen=True)
class Dumps:
    """The run's dump index, without the files XLA failed to write (``problems`` says so)."""

    index: dumps.DumpIndex
    problems: tuple[str, ...] = ()


NO_SELECTION = Selection(chosen=(), guess=False)


def check_options(command: Sequence[str], options: CollectOptions) -> str:
    """Everything that can be checked before the program runs; returns the archive format.

    A run may take hours: a bad option found after it would waste it.
    """
    if not command:
        raise BugkitError("nothing to run: give the command after --, e.g. collect -- python x.py")
    if options.repo is not None:
        github.check_repo(options.repo)
    if not math.isfinite(options.budget) or options.budget <= 0:
        raise BugkitError(f"--budget must be a positive number of seconds, not {options.budget:g}")
    if options.module_re is not None:
        try:
            re.compile(options.module_re)
        except re.error as e:
            raise BugkitError(
                f"--module {options.module_re!r} is not a regular expression ({e})"
            ) from None
    return check_output(options.output, options.fmt, force=options.force)


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
    # The environment report's device probe imports jax (seconds): on a CPU-only machine it
    # runs alongside the program instead of after it.
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


def rebundle_command(work: Path, options: CollectOptions) -> str:
    """The ``xla-bugkit bundle`` command line that makes the bundle ``options`` describe."""
    argv = ["xla-bugkit", "bundle", str(work), "-o", str(options.output)]
    if options.fmt is not None and suffix_format(options.output) is None:
        argv += ["--format", options.fmt]
    if options.module_re is not None:
        argv += ["--module", options.module_re]
    if options.symbol is not None:
        argv += ["--symbol", options.symbol]
    if options.budget != config.SEARCH_BUDGET:
        argv += ["--budget", f"{options.budget:g}"]
    if options.max_size is not None and options.max_size != config.MAX_SIZE:
        argv += ["--max-size", str(options.max_size)]
    argv += [] if options.replay else ["--no-replay"]
    argv += [] if options.data else ["--no-data"]
    return shlex.join(argv)


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
    # XLA writes no snapshot of a multi-device execution: the arguments the hook saved.
    for note in arguments.write_snapshots(dump_dir, run.culprit_evidence):
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


def run_program(
    command: Sequence[str], work: Path, options: CollectOptions, *, echo: bool = False
) -> RunRecord:
    """Rerun ``command`` with dumps into ``work/dump`` and its output into ``work/run.log``;
    ``echo`` streams the output to the terminal as it arrives."""
    return rerun(
        command, dump_dir=work / "dump", log_path=work / "run.log",
        timeout=options.timeout, echo=echo,
    )  # fmt: skip


def index_dumps(dump_dir: Path, run: RunRecord) -> Dumps:
    """Index the run's dumps, leaving out the files XLA said it could not write (the index
    may hold no module at all: the program may never have compiled anything)."""
    index = dumps.index(dump_dir)
    broken = dumps.failed_writes(run.output)
    problems: tuple[str, ...] = ()
    if broken:
        index = dumps.without(index, broken)
        why = ", ".join(sorted(set(broken.values())))
        problems = (f"XLA could not write {len(broken)} dump files ({why}); they are left out",)
    return Dumps(index, problems)


def choose(
    index: dumps.DumpIndex,
    run: RunRecord,
    options: CollectOptions,
    processes: Sequence[evidence.ProcessEvidence] = (),
) -> Selection:
    """The modules that matter, each with the reasons it was chosen; ``processes``: what the
    run's processes recorded about themselves (``evidence.load``)."""
    return select(
        index, run.failure, run.output,
        module_re=options.module_re, symbol=options.symbol, limit=options.limit,
        evidence=processes,
    )  # fmt: skip


def replay_chosen(
    root: Path, selection: Selection, run: RunRecord, options: CollectOptions, ui: Ui
) -> tuple[Verdict, ...]:
    """Replay each chosen module in a child process, judged against the run's failure."""
    return replay_modules(root, selection, run, options, ui).verdicts


def replay_modules(
    root: Path,
    selection: Selection,
    run: RunRecord,
    options: CollectOptions,
    ui: Ui,
    arrays: Path | None = None,
    known: Mapping[str, Verdict] | None = None,
) -> Replays:
    """``replay_chosen``, which Ctrl-C stops without stopping the bundle (``Replays``);
    ``arrays``: where each replay's arrays are kept (a subfolder per module); ``known``:
    verdicts by module label that need no replay again (the search's, already in ``arrays``)."""
    known = known or {}
    replays = stage.replay_stage(
        root, tuple(c for c in selection.chosen if c.module.label not in known), run.failure,
        timeout=run.failure.replay_timeout(options.replay_timeout), use_data=options.data,
        ui=ui, arrays=arrays, process_flags=run.flags_in_force, memory_cap=run.memory_cap,
    )  # fmt: skip
    if not known:
        return replays
    by_label = {**known, **{v.module: v for v in replays.verdicts}}
    in_order = (by_label.get(c.module.label) for c in selection.chosen)
    return replace(replays, verdicts=tuple(v for v in in_order if v is not None))


def search_wrong_value(
    root: Path,
    index: dumps.DumpIndex,
    run: RunRecord,
    options: CollectOptions,
    ui: Ui,
    arrays: Path | None = None,
) -> differential.Differential | None:
    """For a wrong result, the modules whose replay differs from the op-by-op reference
    (``differential.search``); None when the run failed otherwise, when the replay is off,
    or when the user chose the modules (--module, --symbol)."""
    if run.failure.kind is not Kind.WRONG_RESULT or not options.replay:
        return None
    if options.module_re is not None or options.symbol is not None:
        return None
    with ui.phase("looking for the module that computes the wrong value"):
        return differential.search(
            root, index, run.failure, budget=options.budget, timeout=options.replay_timeout,
            # The first module that differs ends it: the modules that ran after it were
            # given its wrong value and compute the right function of it.
            ui=ui, arrays=arrays if options.data else None, limit=1,
            process_flags=run.flags_in_force, memory_cap=run.memory_cap,
        )  # fmt: skip


def write_bundle(
    stage_dir: Path,
    found: Dumps,
    selection: Selection,
    run: RunRecord,
    verdicts: Sequence[Verdict],
    options: CollectOptions,
    ui: Ui,
    arrays: Path | None = None,
) -> tuple[Manifest, int]:
    """Write the bundle; while it is over ``max_size``, leave out the next least useful file.

    The compressed size is only known after compressing, so each drop rewrites the archive;
    bundles are small and drops are rare, which keeps this simpler than estimating.
    """
    redactor = Redactor.for_this_machine(run.command, private=(run.log.parent,))
    if note := command_note(run.command):
        found = Dumps(found.index, (*found.problems, note))
    # The device list belongs in a bug report (jax.print_environment_info has it): one probe.
    with ui.timed("environment"):
        env = envinfo.collect_env(redactor, probe_devices=True)
    order = layout.drop_order(layout.plan(found.index, selection.chosen, data=options.data))
    dropped: list[str] = []
    while True:
        with ui.timed("stage"):
            manifest = stage_bundle(stage_dir, found, selection, run, verdicts, options,
                                    redactor=redactor, env=env, dropped=dropped,
                                    arrays=arrays)  # fmt: skip
        with ui.timed("archive"):
            size = archive_bundle(stage_dir, options, ui)
        if options.max_size is None or size <= options.max_size:
            return manifest, size
        if len(dropped) == len(order):
            ui.warn(f"the bundle is {size:,} bytes: over --max-size with nothing left to drop")
            return manifest, size
        dropped.append(order[len(dropped)].arcname)
        ui.say(f"over the size budget: leaving out {dropped[-1]}")


def stage_bundle(
    stage_dir: Path,
    found: Dumps,
    selection: Selection,
    run: RunRecord,
    verdicts: Sequence[Verdict],
    options: CollectOptions,
    *,
    redactor: Redactor,
    env: envinfo.EnvReport,
    dropped: Sequence[str] = (),
    arrays: Path | None = None,
) -> Manifest:
    """Fill ``stage_dir`` afresh with what goes into the archive, less ``dropped``;
    ``arrays`` holds the replays' arrays (``replay_modules``)."""
    shutil.rmtree(stage_dir, ignore_errors=True)
    return build.build(
        stage_dir, index=found.index, selection=selection, run=run, verdicts=verdicts,
        redactor=redactor, env=env, data=options.data, bundle_name=options.output.name,
        dropped=dropped, problems=found.problems, arrays=arrays,
        include_source=options.include_source, replayed=options.replay,
    )  # fmt: skip


def archive_bundle(stage_dir: Path, options: CollectOptions, ui: Ui) -> int:
    """Write everything under ``stage_dir`` to ``options.output``; return the archive's size."""
    fmt = archive.output_format(options.output, options.fmt)
    files = {p.relative_to(stage_dir).as_posix(): p for p in _files(stage_dir)}
    return archive.write_archive(files, options.output, fmt, progress=ui.progress("compressing"))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def exit_code(
    run: RunRecord, verdicts: Sequence[Verdict], *, replay_interrupted: bool = False
) -> ExitCode:
    if run.failure.kind is Kind.INTERRUPTED or replay_interrupted:
        return ExitCode.INTERRUPTED
    if not run.failure.kind.is_failure:
        return ExitCode.NO_FAILURE
    if any(v.reproduced for v in verdicts):
        return ExitCode.OK
    return ExitCode.NOT_REPRODUCED


def _no_dumps_message(run: RunRecord) -> str:
    return (
        f"the program wrote no XLA dumps ({run.failure.describe}): it may replace XLA_FLAGS "
        "instead of appending to it (os.environ['XLA_FLAGS'] += ' --flag' keeps ours), stop "
        "before JAX compiles anything, or not use XLA at all"
    )


def shrink_written(bundle: Path, options: CollectOptions, ui: Ui) -> ExitCode | None:
    """``collect --shrink``: the written bundle, shrunk in place (its modules all stay, the
    shrunk one is added); None when it was not shrunk, the bundle then left as it was."""
    from xla_bugkit.shrink.run import parse_budget, shrink_in_place
    from xla_bugkit.shrink.shrinker import ShrinkOptions

    assert options.shrink is not None
    shrink_options = ShrinkOptions(budget=parse_budget(options.shrink),
                                   timeout=options.replay_timeout)  # fmt: skip
    try:
        written = shrink_in_place(bundle, options=shrink_options, ui=ui)
    except BugkitError as e:
        ui.warn(f"not shrunk: {e}")
        return None
    for line in written.result.findings():
        ui.say(line)
    return ExitCode(written.exit_code)
