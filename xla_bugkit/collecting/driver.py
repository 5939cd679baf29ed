"""collect and rebundle: the stages run in order, with the work dir kept or removed and
errors said as the user reads them."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from xla_bugkit import frameworks
from xla_bugkit.collecting import ahead, job, running, warm, workdir
from xla_bugkit.collecting.job import JobPart
from xla_bugkit.collecting.options import (
    CollectOptions,
    CollectResult,
    check_options,
    rebundle_command,
)
from xla_bugkit.errors import (
    DISK_FULL_ERRNOS,
    BugkitError,
    DiskFullError,
    RerunNeeded,
)
from xla_bugkit.proc import leftovers
from xla_bugkit.run import capture
from xla_bugkit.ui import Ui


def collect(command: Sequence[str], options: CollectOptions, ui: Ui | None = None) -> CollectResult:
    """Rerun ``command`` with dumps on and write a bundle of the modules that matter.

    The options and the output are checked before the program starts. Once it has run, its
    work dir is kept when ``keep_workdir`` asks, when it holds the dumps of a
    ``--xla_dump_to`` of the user's that the run replaced, and when the bundle cannot be
    made (the error then says how to make it from there: ``rebundle``). With ``shrink``, the
    written bundle's failing module is shrunk and added to it (``stages.shrink_written``);
    with ``bisect``, it is bisected over jaxlib releases (``stages.bisect_written``).
    """
    ui = ui or Ui()
    fmt = check_options(command, options)
    _remove_killed(options.output, ui)
    work = workdir.prepare(options.workdir, owned=True)
    keep, run, finished = options.keep_workdir, None, False
    # A JAX program's hook records its devices; for others the environment report's device
    # probe imports jax (seconds): on a CPU-only machine it runs alongside the program.
    if frameworks.from_command(command) is not frameworks.Framework.JAX:
        from xla_bugkit.bundle import devices

        devices.start_device_probe()
    scope = contextlib.ExitStack()
    try:
        first_capture = options.capture
        scope.enter_context(ahead.replays_ahead(work))
        with warm.importing(prepare=lambda: warm.redactor(command, work)):
            options, run = running.run_stage(work, command, options, ui)
        from xla_bugkit.collecting import bundling  # imported while the program ran

        user_dumps = work / workdir.DUMP if workdir.replaced_dump_dir(run) is not None else None
        keep = keep or user_dumps is not None
        result = bundling.after_run(work, run, options, fmt, ui)
        if (_needs_newest_inputs(result, options) or _hang_needs_its_inputs(result, options)) and (
            why_not := _cannot_run_again(
                command, options.job_part, every=first_capture.xla_snapshots
            )
        ):
            ui.say(f"not running the program a second time to read later inputs: {why_not}")
        elif _needs_newest_inputs(result, options):
            # A wrong result that the first call's inputs do not show may need the values of
            # a later call: only XLA's snapshots of every execution hold those.
            ui.say(
                "the replay on each function's first inputs shows no wrong result: running "
                "the program again with XLA's snapshot of every execution (--snapshots every), "
                "to replay its newest inputs"
            )
            note = (
                "the program ran twice: the replay on each function's first inputs showed no "
                "wrong result; this is the second run, with XLA's snapshot of every execution "
                "(--snapshots every)"
            )
            again = replace(options, snapshots=capture.EVERY)
            result = _run_again(work, command, again, fmt, ui, result, note)
        elif _hang_needs_its_inputs(result, options):
            result = _again_for_the_hung_inputs(work, command, options, fmt, ui, result)
        result = _shrunk_and_bisected(result, options, ui)
        finished = True
        return replace(result, workdir=work if keep else None, user_dumps=user_dumps)
    except KeyboardInterrupt:
        if keep:
            ui.say(f"work dir kept: {work}")
        raise
    except Exception as e:
        # A bundle can be made again from a kept run, unless the run itself was the trouble.
        rebundlable = run is not None and _holds_dumps(work) and not isinstance(e, RerunNeeded)
        keep = keep or rebundlable
        error = _explained(e, work, options, ui, kept=rebundlable)
        if error is e:
            raise
        raise error from None
    finally:
        scope.close()
        if not keep:
            # Once the bundle is written, the dumps' deletion need not hold up the user;
            # after a stop or an error, it is done before returning.
            workdir.remove(work, made_here=options.workdir is None, detach=finished)
        elif options.workdir is None:
            leftovers.release(work)  # kept for the user: no later collect may remove it


def _shrunk_and_bisected(result: CollectResult, options: CollectOptions, ui: Ui) -> CollectResult:
    """``result``, whose bundle reproduced the failure, once the bundle is shrunk in place
    (``--shrink``) and bisected over jaxlib releases (``--bisect``)."""
    bundle = result.bundle
    if bundle is None or result.exit_code != 0:
        return result
    if options.shrink is not None:
        from xla_bugkit.collecting.stages import shrink_written

        if shrink_written(bundle, options, ui) is not None:
            result = replace(result, size=bundle.stat().st_size)
    if options.bisect:
        from xla_bugkit.collecting.stages import bisect_written

        if (answer := bisect_written(bundle, options, ui)) is not None:
            result = replace(result, size=bundle.stat().st_size, across_releases=answer)
    return result


def rebundle(work: Path, options: CollectOptions, ui: Ui | None = None) -> CollectResult:
    """Make a bundle again from a work dir that ``collect`` kept, with ``options`` (another
    ``module_re``, say): the program does not run again, and the work dir stays as it was."""
    ui = ui or Ui()
    run = workdir.load_run(work)
    fmt = check_options(run.command, options)
    from xla_bugkit.collecting import bundling  # the program does not run: no wait to fill

    try:
        return replace(bundling.bundle_from(work, run, options, fmt, ui), workdir=work)
    except OSError as e:
        error = _explained(e, work, options, ui)
        if error is e:
            raise
        raise error from None


def _needs_newest_inputs(result: CollectResult, options: CollectOptions) -> bool:
    """A wrong result not reproduced on first-call inputs, when the mode was not chosen
    (and not where every replay ran a Pallas kernel, which no reference can check on any
    inputs, nor where the kernel's own code gives the wrong values under its interpret
    mode)."""
    from xla_bugkit.failure.classify import Kind  # imported while the program ran (warm)
    from xla_bugkit.replay import KERNEL_ONLY
    from xla_bugkit.verdict import OWN_CODE

    return (
        options.snapshots is None
        and options.replay
        and not any(v.reproduced for v in result.verdicts)
        and result.run.failure.kind is Kind.WRONG_RESULT
        and not (result.verdicts and all(KERNEL_ONLY in v.evidence for v in result.verdicts))
        and not any(v.numbers.get("kernel") == OWN_CODE for v in result.verdicts)
    )


def _hang_needs_its_inputs(result: CollectResult, options: CollectOptions) -> bool:
    """A hang whose call ran on inputs nobody could read (jax dispatched it from C++ and it
    returned before it ran), which no replay reproduced, when the mode was not chosen."""
    f = result.run.failure
    return (
        options.snapshots is None
        and options.replay
        and result.bundle is not None
        and f.unread_inputs
        and not any(v.reproduced for v in result.verdicts)
    )


# How much slower a program may run with XLA's snapshot of every execution (the training
# loop of benchmarks/SNAPSHOTS.md: 4 to 8 times), for the second run's timeout.
_EVERY_SLOWER = 8.0


def _again_for_the_hung_inputs(
    work: Path,
    command: Sequence[str],
    options: CollectOptions,
    fmt: str,
    ui: Ui,
    first: CollectResult,
) -> CollectResult:
    """Run the program again with XLA's snapshot of every execution, under which each call
    runs to its end before it returns: a call that hangs then holds its thread inside it,
    where the hook reads its arguments when asked before the stop. The second run's bundle
    replaces the first only when its replay reproduces the hang."""
    f = first.run.failure
    reached = max((f.ran_seconds or 0.0) - (f.stalled_seconds or 0.0), 0.0)
    timeout = max(options.timeout or 0.0, reached * _EVERY_SLOWER + 60.0)
    ui.say(
        "the call that hung ran on inputs the capture hook could not read: running the "
        "program again with XLA's snapshot of every execution (--snapshots every), under "
        f"which a call returns only once it has run, to read them there (stopped after "
        f"{timeout:.0f} s; Ctrl-C stops it sooner)"
    )
    note = (
        "the program ran twice: the call that hung in the first run ran on inputs the "
        "capture hook could not read; this is the second run, with XLA's snapshot of "
        f"every execution (--snapshots every), stopped after {timeout:.0f} s"
    )
    again = replace(options, snapshots=capture.EVERY, timeout=timeout)
    return _run_again(work, command, again, fmt, ui, first, note)


def _run_again(
    work: Path,
    command: Sequence[str],
    again: CollectOptions,
    fmt: str,
    ui: Ui,
    first: CollectResult,
    note: str,
) -> CollectResult:
    """Run the program a second time with ``again``'s options; its bundle (saying ``note``)
    replaces the first run's only when its replay reproduces the failure, else the first
    run's bundle and result stand (a second run may not fail at all)."""
    from xla_bugkit.collecting import bundling  # imported while the program ran (warm)

    bundle = first.bundle
    aside = bundle.with_name(f".{bundle.name}.first-run") if bundle is not None else None
    if bundle is not None and aside is not None:
        os.replace(bundle, aside)
    _rewind_stdin()
    second = None
    try:
        workdir.clear(work)
        with warm.importing(prepare=lambda: warm.redactor(command, work)):
            _, run = running.run_stage(work, command, again, ui)
        notes = (*run.xla_flags.notes, note)
        run = replace(run, xla_flags=replace(run.xla_flags, notes=notes))
        second = bundling.after_run(work, run, again, fmt, ui)
    finally:
        better = second is not None and any(v.reproduced for v in second.verdicts)
        if aside is not None and bundle is not None:
            if better:
                aside.unlink(missing_ok=True)
            else:
                os.replace(aside, bundle)  # the first run's bundle stands
    if second is not None and better:
        return second
    if bundle is not None:
        ui.say(
            "no replay of the second run's inputs reproduced the failure either: "
            f"{bundle.name} is the first run's"
        )
    return first


def _cannot_run_again(
    command: Sequence[str], part: JobPart | None = None, *, every: bool = False
) -> str | None:
    """Why the program cannot run a second time as it ran the first: it is ``part`` of a
    job (alone, it would wait for peers that never come; ``every``: its one run kept XLA's
    snapshot of every execution), or Python read its program from standard input
    (``python - < train.py``, ``python`` with no script), which the first run consumed."""
    if part is not None:
        return job.cannot_run_alone(part, every=every)
    if not command or not os.path.basename(command[0]).startswith("python"):
        return None
    args = list(command[1:])
    while args and args[0].startswith("-") and args[0] != "-":
        option = args.pop(0)
        if option in ("-c", "-m"):
            return None  # the program is in the command line, or a module
        if option in ("-W", "-X") and args:
            args.pop(0)
    if not args or args[0] == "-":
        return "Python read the program from standard input, which the first run consumed"
    return None


def _rewind_stdin() -> None:
    """Standard input from a file (``< data.txt``) is read again from its start; a pipe or a
    terminal is left as it is."""
    try:
        if stat.S_ISREG(os.fstat(0).st_mode):
            os.lseek(0, 0, os.SEEK_SET)
    except OSError:
        pass


def _remove_killed(output: Path, ui: Ui) -> None:
    """Remove what killed runs left: work dirs, temp folders, partial outputs next to ours."""
    found = [
        *workdir.killed_runs(),
        *leftovers.killed_temp_folders(),
        *leftovers.killed_partials(output.parent),
    ]
    if said := leftovers.remove(found):
        ui.say(said)


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
