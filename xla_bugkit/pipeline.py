"""collect's pipeline as library stages: run -> dumps -> select -> replay -> bundle.

``collect`` runs them all; each stage is also a function of its own, for benchmarks and for
programs that want one step. Stages report progress on the ``Ui`` they are given and print
no summary: that is the ``collect`` command's.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from xla_bugkit import archive, config, envinfo, github
from xla_bugkit.bundle import build, layout
from xla_bugkit.bundle.manifest import Manifest
from xla_bugkit.capture import dumps
from xla_bugkit.capture.rerun import RunRecord, rerun
from xla_bugkit.capture.selection import Selection, select
from xla_bugkit.errors import DISK_FULL_ERRNOS, BugkitError, DiskFullError, ExitCode
from xla_bugkit.redact import Redactor
from xla_bugkit.replay.inputs import module_files, replay_input
from xla_bugkit.replay.judge import Verdict, replay
from xla_bugkit.ui import Ui


@dataclass(frozen=True)
class CollectOptions:
    """How ``collect`` runs; the defaults are the CLI's."""

    output: Path = Path(f"bundle.{config.DEFAULT_FORMAT}")
    fmt: str | None = None  # from the output's suffix when None
    timeout: float | None = None
    replay_timeout: float = config.REPLAY_TIMEOUT
    module_re: str | None = None
    symbol: str | None = None
    workdir: Path | None = None
    keep_workdir: bool = False
    always: bool = False  # bundle even when the program succeeds
    replay: bool = True
    data: bool = True  # ship snapshots (real inputs)
    limit: int = 3
    repo: str = "jax-ml/jax"  # where the summary's new-issue link points
    max_size: int | None = config.MAX_SIZE


@dataclass(frozen=True)
class CollectResult:
    """What ``collect`` did. ``exit_code`` is what the CLI returns."""

    exit_code: int
    run: RunRecord
    selection: Selection | None = None
    verdicts: tuple[Verdict, ...] = ()
    bundle: Path | None = None
    size: int = 0
    notes: tuple[str, ...] = field(default=())
    manifest: Manifest | None = None
    fmt: str = config.DEFAULT_FORMAT


@dataclass(frozen=True)
class Dumps:
    """The run's dump index, without the files XLA failed to write (``problems`` says so)."""

    index: dumps.DumpIndex
    problems: tuple[str, ...] = ()


def default_workdir() -> Path:
    base = Path(platformdirs.user_cache_dir("xla-bugkit")) / "runs"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=base))


def collect(command: Sequence[str], options: CollectOptions, ui: Ui | None = None) -> CollectResult:
    """Rerun ``command`` with dumps on and write a bundle of the modules that matter."""
    ui = ui or Ui()
    if not command:
        raise BugkitError("nothing to run: give the command after --, e.g. collect -- python x.py")
    fmt = archive.output_format(options.output, options.fmt)
    github.check_repo(options.repo)
    work = options.workdir or default_workdir()
    ours = [work / "dump", work / "bundle", work / "run.log"]
    if options.workdir is not None and any(p.exists() for p in ours):
        raise BugkitError(f"{work} already holds a collect run: give an empty or new --workdir")
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _collect_in(work, command, options, fmt, ui)
    except OSError as e:
        if e.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(
                f"no space left on the disk of {work} ({e.filename or 'work dir'}): "
                "free some, or give --workdir on a disk with room"
            ) from None
        raise
    finally:
        if options.keep_workdir:
            ui.say(f"work dir kept: {work}")
        elif options.workdir is not None:
            # The folder is the user's: remove only what this run put there.
            for p in ours:
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _collect_in(
    work: Path, command: Sequence[str], options: CollectOptions, fmt: str, ui: Ui
) -> CollectResult:
    dump_dir, stage_dir = work / "dump", work / "bundle"
    ui.say(f"running {' '.join(command)} with XLA dumps on")
    run = run_program(command, work, options, echo=ui.verbosity >= 0)
    for note in run.xla_flags.notes:
        ui.warn(note)
    ui.say(f"the program ended: {run.failure.describe}")
    if not run.failure.kind.is_failure and not options.always:
        return CollectResult(ExitCode.NO_FAILURE, run, fmt=fmt)
    with ui.phase("indexing dumps"):
        found = index_dumps(dump_dir, run)
    for problem in found.problems:
        ui.warn(f"{problem}: free disk space or raise the file-size limit, then run again")
    if not found.index.modules:
        raise BugkitError(_no_dumps_message(run))
    selection = choose(found.index, run, options)
    verdicts = replay_chosen(dump_dir, selection, run, options, ui) if options.replay else ()
    with ui.phase("writing the bundle"):
        manifest, size = write_bundle(stage_dir, found, selection, run, verdicts, options, ui)
    return CollectResult(
        exit_code(run, verdicts), run, selection, verdicts, options.output, size,
        tuple(manifest["notes"]), manifest, fmt,
    )  # fmt: skip


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


def choose(index: dumps.DumpIndex, run: RunRecord, options: CollectOptions) -> Selection:
    """The modules that matter, each with the reasons it was chosen."""
    return select(
        index, run.failure, run.output,
        module_re=options.module_re, symbol=options.symbol, limit=options.limit,
    )  # fmt: skip


def replay_chosen(
    root: Path, selection: Selection, run: RunRecord, options: CollectOptions, ui: Ui
) -> tuple[Verdict, ...]:
    """Replay each chosen module in a child process, judged against the run's failure."""
    # Each module replays with the flags XLA really used for it (its dumped debug options),
    # which include what the program appended to XLA_FLAGS itself.
    verdicts = []
    for chosen in selection.chosen:
        m = chosen.module
        inp = replay_input(m.label, module_files(root, m), m.platform)
        if inp is None:
            ui.warn(f"{m.label} has no before-optimizations proto: it cannot be replayed")
            continue
        with ui.phase(f"replaying {m.label}"):
            verdict = replay(
                inp, expected=run.failure, timeout=options.replay_timeout, use_data=options.data
            )
        ui.detail(f"{m.label}: {verdict.outcome.value}: {verdict.evidence}")
        verdicts.append(verdict)
    return tuple(verdicts)


def write_bundle(
    stage_dir: Path,
    found: Dumps,
    selection: Selection,
    run: RunRecord,
    verdicts: Sequence[Verdict],
    options: CollectOptions,
    ui: Ui,
) -> tuple[Manifest, int]:
    """Write the bundle; while it is over ``max_size``, leave out the next least useful file.

    The compressed size is only known after compressing, so each drop rewrites the archive;
    bundles are small and drops are rare, which keeps this simpler than estimating.
    """
    redactor = Redactor.for_this_machine()
    # The device list belongs in a bug report (jax.print_environment_info has it): one probe.
    env = envinfo.collect_env(redactor, probe_devices=True)
    order = layout.drop_order(layout.plan(found.index, selection.chosen, data=options.data))
    dropped: list[str] = []
    while True:
        manifest = stage_bundle(stage_dir, found, selection, run, verdicts, options,
                                redactor=redactor, env=env, dropped=dropped)  # fmt: skip
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
) -> Manifest:
    """Fill ``stage_dir`` afresh with what goes into the archive, less ``dropped``."""
    shutil.rmtree(stage_dir, ignore_errors=True)
    return build.build(
        stage_dir, index=found.index, selection=selection, run=run, verdicts=verdicts,
        redactor=redactor, env=env, data=options.data, bundle_name=options.output.name,
        dropped=dropped, problems=found.problems,
    )  # fmt: skip


def archive_bundle(stage_dir: Path, options: CollectOptions, ui: Ui) -> int:
    """Write everything under ``stage_dir`` to ``options.output``; return the archive's size."""
    fmt = archive.output_format(options.output, options.fmt)
    files = {p.relative_to(stage_dir).as_posix(): p for p in _files(stage_dir)}
    return archive.write_archive(files, options.output, fmt, progress=ui.progress("compressing"))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def exit_code(run: RunRecord, verdicts: Sequence[Verdict]) -> ExitCode:
    if run.interrupted:
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
