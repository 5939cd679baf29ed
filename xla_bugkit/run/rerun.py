"""Rerun the user's command with dumps on, and record how it ended."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from xla_bugkit import frameworks, proc
from xla_bugkit.failure import xla_log
from xla_bugkit.hlo import flags
from xla_bugkit.run import adapt, ask, caches, evidence_files, hook, stops
from xla_bugkit.run import main_end as ends
from xla_bugkit.run.at_main_end import AtEnd, AtMainEnd, Said, as_at_main_end
from xla_bugkit.run.capture import DEFAULT_CAPTURE, NEWEST_KEPT, Capture, Pruner
from xla_bugkit.run.job_end import JOB, JobEnd
from xla_bugkit.run.record import RunRecord

if TYPE_CHECKING:
    from xla_bugkit.failure.classify import Failure

# What reads the run once it has ended (classify, processes, weigh) is imported then: the
# program starts without waiting for it (collect imports it meanwhile: ``warm``).

# JAX shows none of XLA's INFO lines by itself (TensorFlow does).
_JAX = (None, frameworks.Framework.JAX)


def child_env(
    base: Mapping[str, str],
    dump_dir: Path,
    processes: Path | None = None,
    framework: frameworks.Framework | None = None,
    capture: Capture = DEFAULT_CAPTURE,
    pass_re: str | None = None,
    hook_sets_flags: bool = False,
) -> tuple[dict[str, str], flags.MergedFlags]:
    """The environment for the rerun: the user's, plus what makes XLA and JAX tell all;
    with ``processes``, the start-up hook that records each process there (``hook``);
    adapted to ``framework`` (TensorFlow, PyTorch/XLA) when it is known. Inputs are kept as
    ``capture`` says: by the hook, unless XLA's snapshots are asked for, or there is no hook
    (``start_capture``), or the program is PyTorch/XLA's (the hook sees none of its calls).

    The hook keeps collect's XLA flags in XLA_FLAGS until XLA reads it, also where the
    program replaces them; with ``hook_sets_flags`` (``_hook_sets_flags``) XLA_FLAGS is left
    unset, as the user left it, and only the hook sets it: a program's own
    ``os.environ.setdefault("XLA_FLAGS", ...)`` then works as it does bare."""
    hooked = processes is not None and framework is not frameworks.Framework.PYTORCH_XLA
    snapshots = capture.xla_snapshots or not hooked
    if processes is None:
        env = dict(base)
    else:
        env = hook.environment(
            base, processes, dump_dir, first_arguments=not snapshots, budget=capture.budget
        )
    merged = flags.merge(base.get("XLA_FLAGS"), dump_dir, snapshots=snapshots, pass_re=pass_re)
    env["XLA_FLAGS"] = merged.value
    # A persistent-cache hit compiles nothing and so dumps nothing; a miss would write into
    # the user's cache. The hook also keeps a cache the program turns on itself unused.
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    # Tiny computations are dumped too: the failing one may be tiny.
    env.setdefault("JAX_COMPILER_DETAILED_LOGGING_MIN_OPS", "0")
    if not hooked or processes is None:
        # No hook records whether XLA was compiling or running: JAX's own frames in the
        # traceback tell. With the hook, tracebacks stay as the program prints them.
        env.setdefault("JAX_TRACEBACK_FILTERING", "off")
    # Pallas/Mosaic TPU kernels dump through libtpu's own flags.
    mosaic = flags.join([flags.mosaic_dump_flag(dump_dir)])
    env["LIBTPU_INIT_ARGS"] = f"{base.get('LIBTPU_INIT_ARGS', '')} {mosaic}".strip()
    env["PYTHONUNBUFFERED"] = "1"
    # XLA names each dump file it writes: the last name before a crash is the culprit's.
    env.update(xla_log.log_env(base))
    env, merged = adapt.adapt(env, merged, framework)
    if hooked and processes is not None:
        env[hook.ENV_XLA_FLAGS] = merged.value
        if hook_sets_flags and "XLA_FLAGS" not in base:
            del env["XLA_FLAGS"]
        logs = {name: base.get(name) for name in xla_log.log_env(base)}
        env[hook.ENV_LOG_BEFORE] = json.dumps(logs)
        env[hook.ENV_COLLECT_PID] = str(os.getpid())
    return env, merged


def _hook_sets_flags(command: Sequence[str], framework: frameworks.Framework | None) -> bool:
    """Whether the hook alone can give the program collect's XLA flags: a JAX script run by
    Python that reads its environment (no ``-I`` or ``-E``, under which the hook would not
    load); elsewhere XLA_FLAGS is set before the program starts."""
    if framework is not frameworks.Framework.JAX or not command:
        return False
    if not Path(command[0]).name.startswith("python"):
        return False
    for word in command[1:]:
        if not word.startswith("-") or word in ("-c", "-m"):
            break
        if not word.startswith("--") and ("I" in word or "E" in word):
            return False
    return True


class Ending(NamedTuple):
    """When collect ends a run before its own end: after ``timeout`` seconds; for a part of
    a job, ``job_grace`` seconds after its output shows that its job ended it."""

    timeout: float | None
    job_grace: float | None = None


def rerun(
    command: Sequence[str],
    *,
    dump_dir: Path,
    log_path: Path,
    ending: Ending,
    echo: bool,
    base_env: Mapping[str, str] | None = None,
    processes: Path | None = None,
    capture: Capture = DEFAULT_CAPTURE,
    pass_re: str | None = None,
    at_main_end: ends.Then | AtMainEnd | None = None,
) -> RunRecord:
    """Run ``command`` with dumps into ``dump_dir``; its output goes live to the terminal
    (``echo``) and to ``log_path`` as it arrives. Each Python process of the run records
    what it did under ``processes`` (default: ``processes/`` next to ``dump_dir``), and
    each one that starts an XLA backend dumps into a subfolder of ``dump_dir`` named by its
    pid (``hook.process_dump_dir``). ``at_main_end`` runs in a thread once the
    program's main module has finished, while it tears itself down (``main_end``); the run
    returns after it has. With an ``AtMainEnd``, its ``while_held`` runs after it.

    A run stopped by ``ending.timeout`` or by the user (Ctrl-C, SIGTERM) while XLA was busy
    is a hang; how long it ran and went without output before the stop go into its failure.
    With ``ending.job_grace`` (a part of a job), a run whose output shows that its job ended
    it (another process failed) is ended that many seconds later (``job_end``).
    """
    timeout, job_grace = ending
    processes = processes or dump_dir.parent / evidence_files.PROCESSES
    base = os.environ if base_env is None else base_env
    # Known before the run only from the script's imports; unsure means JAX's settings.
    framework = frameworks.from_command(command)
    env, merged = child_env(
        base,
        dump_dir,
        processes,
        framework,
        capture,
        pass_re,
        hook_sets_flags=_hook_sets_flags(command, framework),
    )
    dump_dir.mkdir(parents=True, exist_ok=True)
    processes.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    deadline = started + timeout if timeout is not None else None
    # The terminal shows what the program would show by itself; run.log has everything.
    hide = xla_log.hidden_on_terminal(
        base, all_info=framework in _JAX, also=adapt.hidden_on_terminal(base, framework)
    )
    # XLA's snapshots of every execution are pruned as they come: the disk stays bounded.
    pruning = flags.SNAPSHOTS in map(flags.name_of, merged.flags)
    pruner = Pruner(dump_dir, capture.budget) if pruning else contextlib.nullcontext()
    hooked = hook.ENV_PROCESSES in env
    timed_log = stops.TimedLog(log_path, deadline)
    said = Said(command, log_path, processes, hide, base)
    at_end = AtEnd(at_main_end, said, timed_log, started, deadline, merged)
    main_end = ends.MainEnd(processes, at_end) if at_end.wanted and hooked else None
    at_end.main_end = main_end
    job_end = JobEnd(job_grace) if job_grace is not None else None
    with (
        main_end or contextlib.nullcontext(),
        pruner,
        timed_log as log,
        stops.stops_on_signals(log),
    ):
        if main_end is not None and main_end.env_value is not None:
            env[ends.ENV] = main_end.env_value
        done = proc.run(
            command,
            env=env,
            timeout=timeout,
            echo=proc.Echo(hide) if echo else None,
            log=log,
            stdin=None,
            watch=proc.Watch(
                on_output=log.arrived,
                # What each process was waiting for, asked while it still runs.
                before_stop=lambda: ask.ask(processes),
                end_when=job_end,
            ),
        )
    ended_at = time.time()
    ask.forget(processes)
    if at_end.ended_serving is not None:
        return as_at_main_end(at_end.ended_serving)
    if isinstance(pruner, Pruner) and pruner.removed:
        note = (
            f"{pruner.removed} older XLA snapshots removed while the program ran "
            f"({pruner.removed_bytes / 1e9:.2f} GB): each module keeps its first and newest "
            f"{NEWEST_KEPT}, within --max-dump-size"
        )
        merged = replace(merged, notes=(*merged.notes, note))
    # The program's own caches, which the hook kept unread and unwritten.
    merged = replace(merged, notes=(*merged.notes, *caches.notes(processes)))
    from xla_bugkit.failure.classify import classify
    from xla_bugkit.run.processes import asked_exit, failing

    stop = None
    if done.timed_out or done.interrupted:
        by = "timeout" if done.timed_out else "user"
        stop = stops.stop(log, by, started, deadline if done.timed_out else None)
    # What the failing process recorded of itself outweighs what its output let through.
    culprit = failing(evidence_files.read(processes))
    asked = asked_exit(culprit.process) if culprit is not None else None
    failure = classify(
        done.output,
        exit_status=done.returncode,
        timed_out=done.timed_out,
        interrupted=done.interrupted,
        stop=stop,
        asked_exit=asked,
    )
    if done.ended_early and job_end is not None and asked is None:
        failure = _ended_by_its_job(done.output, failure, done.duration)
        if failure.peer is not None:
            merged = replace(merged, notes=(*merged.notes, _ended_early_note(job_end, failure)))
    return said.record(done, failure, merged, ended_at, culprit)


def _ended_by_its_job(output: str, killed: Failure, ran: float) -> Failure:
    """The failure of a run that collect ended once its job had ended it (``killed``: as the
    judge reads the whole output, killed): what it printed before the kill is the news, as
    it is before the JAX client's own abort. Where the whole output shows a failure of its
    own first (its program had ended, and it waited at the job's shutdown barrier), that
    stands."""
    from xla_bugkit.failure.classify import Kind, classify

    said = classify(output, exit_status=None)
    peer = killed.peer or said.peer
    if peer is None:
        return killed
    return replace(
        said if said.kind is not Kind.SUCCESS else killed,
        exit_status=killed.exit_status,
        signal=killed.signal,
        stopped_by=JOB,
        ran_seconds=round(ran, 1),
        peer=peer,
    )


def _ended_early_note(job_end: JobEnd, failure: Failure) -> str:
    return (
        f"collect ended the program {job_end.grace:g} s after its output showed that its job "
        f"had ended it ({failure.peer}), rather than wait for the job's heartbeat timeout"
    )
