"""``xla-bugkit collect -- CMD``: rerun a failing program and turn it into a bundle."""

from __future__ import annotations

import errno
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from xla_bugkit import archive, bundle, dumps, envinfo, github, replay, report
from xla_bugkit.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_FAILURE,
    EXIT_NOT_REPRODUCED,
    EXIT_OK,
    BugkitError,
    DiskFullError,
)
from xla_bugkit.redact import Redactor
from xla_bugkit.run import RunRecord, rerun
from xla_bugkit.select import Selection, select
from xla_bugkit.ui import Ui


@dataclass(frozen=True)
class CollectOptions:
    output: Path = Path("bundle.7z")
    fmt: str | None = None  # from the output's suffix when None
    timeout: float | None = None
    replay_timeout: float = 300.0
    module_re: str | None = None
    symbol: str | None = None
    workdir: Path | None = None
    keep_workdir: bool = False
    always: bool = False  # bundle even when the program succeeds
    replay: bool = True
    data: bool = True  # ship snapshots (real inputs)
    limit: int = 3
    repo: str = "jax-ml/jax"  # where the summary's new-issue link points
    max_size: int | None = 25 * 1000 * 1000  # GitHub's attachment limit


@dataclass(frozen=True)
class CollectResult:
    """What ``collect`` did. ``exit_code`` is what the CLI returns."""

    exit_code: int
    run: RunRecord
    selection: Selection | None = None
    verdicts: tuple[replay.Verdict, ...] = ()
    bundle: Path | None = None
    size: int = 0
    notes: tuple[str, ...] = field(default=())


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
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
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
    run = rerun(
        command, dump_dir=dump_dir, log_path=work / "run.log",
        timeout=options.timeout, echo=ui.verbosity >= 0,
    )  # fmt: skip
    for note in run.xla_flags.notes:
        ui.warn(note)
    ui.say(f"the program ended: {run.failure.describe}")
    if not run.failure.kind.is_failure and not options.always:
        ui.summary("xla-bugkit: no failure seen: nothing to report (use --always to bundle anyway)")
        return CollectResult(EXIT_NO_FAILURE, run)
    with ui.phase("indexing dumps"):
        index = dumps.index(dump_dir)
    broken = dumps.failed_writes(run.output)
    problems: tuple[str, ...] = ()
    if broken:
        index = dumps.without(index, broken)
        why = ", ".join(sorted(set(broken.values())))
        problems = (f"XLA could not write {len(broken)} dump files ({why}); they are left out",)
        ui.warn(f"{problems[0]}: free disk space or raise the file-size limit, then run again")
    if not index.modules:
        raise BugkitError(_no_dumps_message(run))
    selection = select(
        index, run.failure, run.output,
        module_re=options.module_re, symbol=options.symbol, limit=options.limit,
    )  # fmt: skip
    verdicts = _replay_all(dump_dir, selection, run, options, ui) if options.replay else ()
    with ui.phase("writing the bundle"):
        manifest, size = _write_within_budget(stage_dir, index, selection, run, verdicts,
                                              options, fmt, ui, problems)  # fmt: skip
    result = CollectResult(
        _exit_code(run, verdicts), run, selection, verdicts, options.output, size,
        tuple(manifest["notes"]),
    )  # fmt: skip
    ui.summary(
        report.summary(result.bundle, size, selection, verdicts, run, fmt,
                       repo=options.repo, manifest=manifest, verbose=ui.verbosity > 0)
    )  # fmt: skip
    return result


def _write_within_budget(
    stage_dir: Path,
    index: dumps.DumpIndex,
    selection: Selection,
    run: RunRecord,
    verdicts: tuple[replay.Verdict, ...],
    options: CollectOptions,
    fmt: str,
    ui: Ui,
    problems: tuple[str, ...],
) -> tuple[bundle.Manifest, int]:
    """Write the bundle; while it is over ``max_size``, leave out the next least useful file.

    The compressed size is only known after compressing, so each drop rewrites the archive;
    bundles are small and drops are rare, which keeps this simpler than estimating.
    """
    redactor = Redactor.for_this_machine()
    # The device list belongs in a bug report (jax.print_environment_info has it): one probe.
    env = envinfo.collect_env(redactor, probe_devices=True)
    order = bundle.drop_order(bundle.plan(index, selection.chosen, data=options.data))
    dropped: list[str] = []
    while True:
        shutil.rmtree(stage_dir, ignore_errors=True)
        manifest = report.build(
            stage_dir, index=index, selection=selection, run=run, verdicts=verdicts,
            redactor=redactor, env=env, data=options.data, bundle_name=options.output.name,
            dropped=dropped, problems=problems,
        )  # fmt: skip
        files = {p.relative_to(stage_dir).as_posix(): p for p in _files(stage_dir)}
        size = archive.write_archive(
            files, options.output, fmt, progress=ui.progress("compressing")
        )
        if options.max_size is None or size <= options.max_size:
            return manifest, size
        if len(dropped) == len(order):
            ui.warn(f"the bundle is {size:,} bytes: over --max-size with nothing left to drop")
            return manifest, size
        dropped.append(order[len(dropped)].arcname)
        ui.say(f"over the size budget: leaving out {dropped[-1]}")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _replay_all(
    root: Path, selection: Selection, run: RunRecord, options: CollectOptions, ui: Ui
) -> tuple[replay.Verdict, ...]:
    # Each module replays with the flags XLA really used for it (its dumped debug options),
    # which include what the program appended to XLA_FLAGS itself.
    verdicts = []
    for chosen in selection.chosen:
        m = chosen.module
        inp = bundle.replay_input(m.label, bundle.module_files(root, m), m.platform)
        if inp is None:
            ui.warn(f"{m.label} has no before-optimizations proto: it cannot be replayed")
            continue
        with ui.phase(f"replaying {m.label}"):
            verdict = replay.replay(
                inp, expected=run.failure, timeout=options.replay_timeout, use_data=options.data
            )
        ui.detail(f"{m.label}: {verdict.outcome.value}: {verdict.evidence}")
        verdicts.append(verdict)
    return tuple(verdicts)


def _exit_code(run: RunRecord, verdicts: Sequence[replay.Verdict]) -> int:
    if run.interrupted:
        return EXIT_INTERRUPTED
    if not run.failure.kind.is_failure:
        return EXIT_NO_FAILURE
    if any(v.reproduced for v in verdicts):
        return EXIT_OK
    return EXIT_NOT_REPRODUCED


def _no_dumps_message(run: RunRecord) -> str:
    return (
        f"the program wrote no XLA dumps ({run.failure.describe}): it may replace XLA_FLAGS "
        "instead of appending to it (os.environ['XLA_FLAGS'] += ' --flag' keeps ours), stop "
        "before JAX compiles anything, or not use XLA at all"
    )
