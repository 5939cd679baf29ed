"""Classify how a run failed and reduce it to a stable, comparable signature.

The record itself (``Failure``, ``Phase``, ``Stop``) is in ``record`` and its ``Kind`` in
``kinds``; they are imported from here too, where the code that makes one lives. A crash's
fatal line and signal are read in ``fatal``, a run stopped from outside in ``stopped``.

The same engine reads the user's rerun (``collect``) and each replay child (``replay``),
so "the replay failed the same way" is a comparison of two ``Failure`` records.
"""

from __future__ import annotations

import re
from dataclasses import replace

from xla_bugkit.failure import callback, jax_use, own_raise, peers, ptxla_log, value_check, xla_log
from xla_bugkit.failure.compile_log import COMPILING_RE, FINISHED_RE, compile_open
from xla_bugkit.failure.fatal import (
    fatal_in_compile,
    first_fatal,
    python_fatal_at,
    says_only_signal,
    signal_name,
)
from xla_bugkit.failure.kinds import Kind
from xla_bugkit.failure.record import HANG_REPLAY_START_SECONDS, Failure, Phase, Stop
from xla_bugkit.failure.signature import normalise
from xla_bugkit.failure.stopped import stopped_run
from xla_bugkit.failure.xla_status import (
    DISPATCH,
    Status,
    framework_status,
    graph_that_raised,
    last_status,
    tf_function,
)

# The record's types, imported from here as well as from ``record``.
__all__ = [
    "HANG_REPLAY_START_SECONDS",
    "Failure",
    "Kind",
    "Phase",
    "Stop",
    "classify",
    "unprefixed",
]

_RET_CHECK_RE = re.compile(r"RET_CHECK failure \((?P<site>[^)\s]+:\d+)\)\s*(?P<msg>[^\n]*)")
_XLA_HINTS = re.compile(
    r"xla|XlaRuntimeError|JaxRuntimeError|jaxlib|HloModule|Check failed|RET_CHECK|StreamExecutor|"
    r"pjrt|PjRt",
    re.I,
)
# Python frames of JAX's compile path (a traceback printed with JAX_TRACEBACK_FILTERING=off).
_COMPILE_PY_FRAMES = re.compile(r", in (?:backend_compile\w*|compile_or_get_cached)$", re.M)

# Colours: Jupyter prints a cell's traceback with them (`jupyter execute`, nbconvert).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# What launchers put before each line of a rank's or worker's output: torch's
# "[rank1]: " and "[default0]:", "[rank 1] ", Open MPI's "[1,0]<stderr>:", srun --label's
# "1: ", Ray's "(pid=4242) " and "(Worker pid=4242) ".
_LAUNCHER_PREFIX = re.compile(
    r"^(?:\[(?:rank ?\d+|default\d+)\]:? ?|\[\d+,\d+\]<std(?:out|err)>: ?|"
    r" {0,4}\d{1,5}: |\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\) )",
    re.M | re.I,
)


def unprefixed(output: str) -> str:
    """``output`` less the launcher's prefix on each line, so that XLA's fatal line of a
    rank (``[rank1] F1204 ... Check failed: ...``) reads as XLA wrote it."""
    return _LAUNCHER_PREFIX.sub("", output)


def classify(
    output: str,
    *,
    exit_status: int | None,
    timed_out: bool = False,
    interrupted: bool = False,
    phase: Phase | None = None,
    stop: Stop | None = None,
    asked_exit: int | None = None,
) -> Failure:
    """Classify a finished process from its exit status and combined output.

    ``exit_status`` is the return code (negative for a signal, None if unknown). ``phase``
    overrides what the output says about compiling versus running (the replay child knows).
    A run that ``timed_out`` or was ``interrupted`` is a hang when XLA was busy at the stop;
    ``stop`` says when that was. ``asked_exit``: the status the program asked sys.exit for,
    where its process's own record says it did and it then did not exit normally.
    """
    output = unprefixed(_ANSI.sub("", output))
    compiling = compile_open(output)
    if phase is None:
        phase = _phase_from_output(output, compiling)
    if compiling is None and phase is Phase.COMPILE:
        # JAX logs "Finished XLA compilation" even when the compilation raised; then the
        # last compilation to start is the one that failed.
        started = list(COMPILING_RE.finditer(output))
        compiling = started[-1].group("name") if started else None
    base = Failure(
        Kind.SUCCESS, phase, "", "", exit_status, signal_name(exit_status), compiling=compiling
    )
    if timed_out or interrupted:
        return stopped_run(output, base, by="timeout" if timed_out else "user", stop=stop)
    if exit_status == 0:
        return base
    if asked_exit and asked_exit != exit_status:
        return _ended_itself(output, base, asked_exit)
    return _classify_failure(output, base)


def _ended_itself(output: str, base: Failure, asked: int) -> Failure:
    """The program called sys.exit(``asked``), and its exit was then cut short: in a job,
    the coordination service's abort at jax.distributed's shutdown barrier, which reads as
    another process's failure. Its failure is what it printed before that end."""
    ends = [peers.job_end(output), python_fatal_at(output)]
    cut = min((at for at in ends if at is not None), default=len(output))
    ended = _classify_failure(output[:cut], replace(base, exit_status=asked, signal=None))
    how = base.signal or f"exit status {base.exit_status}"
    return replace(
        ended, exit_status=base.exit_status, peer=None, evidence=_ENDED_ITSELF.format(asked, how)
    )


_ENDED_ITSELF = (
    "the program ended itself: it called sys.exit({}) (its process's own record), and was "
    "then ended during its exit ({}), before it could finish"
)


def _classify_failure(output: str, base: Failure) -> Failure:
    fatal = first_fatal(output)
    status = framework_status(output, last_status(output))
    failure = _classified(output, base, fatal, status)
    if not peers.mentions_job(output):
        return failure
    if (own_end := peers.ended_on_its_own(output)) is not None:
        # Its program had ended (its own check's exit, say) and it waited at the job's
        # shutdown barrier for the others: how it ended is what it said before the job's end.
        ended = _classify_failure(output[:own_end], replace(base, signal=None))
        return replace(ended, evidence=_WAITED_AT_SHUTDOWN.format(base.signal or "an abort"))
    first = peers.first_error(output, fatal, status)
    aborted = fatal[0] if fatal is not None else output  # its line, or cut into another
    if first is not None and base.signal is not None and peers.TERMINATED in aborted:
        # The JAX client's abort came after the process's first error: that error is the
        # news (a collective that lost its peer, the program's own out-of-memory).
        failure = replace(_classified(output, replace(base, signal=None), None, status),
                          signal=base.signal)  # fmt: skip
    peer = peers.peer_failure(output, first and first[1], ended_by=base.signal)
    return replace(failure, peer=peer) if peer is not None else failure


_WAITED_AT_SHUTDOWN = (
    "its program had ended and it waited at jax.distributed's shutdown barrier, which the "
    "others never reached; the job's coordination service then ended it ({})"
)


def _classified(
    output: str,
    base: Failure,
    fatal: tuple[str, str | None] | None,
    status: Status | None,
) -> Failure:
    """The failure that ``output`` shows: ``fatal``, its first fatal line, and ``status``,
    the framework's or XLA's status it ended with, read once by the caller."""
    if fatal is not None and base.signal is not None and says_only_signal(fatal[0]):
        fatal = None  # faulthandler's line names the signal, not what raised it
    if base.signal is not None or fatal is not None:
        headline, site = fatal if fatal else (f"killed by {base.signal}", None)
        kind = Kind.COMPILE_CRASH if base.phase is Phase.COMPILE else Kind.CRASH
        return replace(
            base,
            kind=kind,
            headline=headline,
            signature=normalise(headline),
            site=site,
            status_code=status[1] if status else None,
            function=tf_function(output),
            message_lost=fatal is None,  # a signal and no fatal line in the output
        )
    if status is not None and (raised := callback.raised_in_callback(output)) is not None:
        # XLA passed on what the program's own Python raised inside the computation.
        headline = f"{raised.line}, {raised.said}"
        return replace(
            base,
            kind=Kind.EXIT,
            headline=headline,
            signature=normalise(headline),
            exception=raised.exception,
            callback=raised.callback,
        )
    if status is not None and (why := jax_use.misuse(_exception_line(status))) is not None:
        # jax's error about the program's use of it, in XLA's words or under XLA's name.
        headline = f"{_exception_line(status)[:300]}, raised by jax: {why}"
        return replace(
            base,
            kind=Kind.EXIT,
            headline=headline,
            signature=normalise(_exception_line(status)),
            exception=status[0] or None,
        )
    graph = graph_that_raised(output, status)
    # The program's own raise, worded as XLA's: its status code and "Check failed" are not
    # XLA's. (An exception in no words of XLA's is the program's anyway, said as it is.)
    worded = status is not None and (
        status[1] is not None or _XLA_HINTS.search(f"{status[0]} {status[2]}") is not None
    )
    own = (
        own_raise.raised_by_program(output, _exception_line(status))
        if status is not None and worded
        else None
    )
    from_xla = (
        status is not None
        and own is None
        and (
            status[1] is not None
            or graph is not None
            or _XLA_HINTS.search(f"{status[0]} {status[2]}") is not None
        )
    )
    checked = value_check.message(output, status, from_xla=from_xla)
    if checked is not None:
        return replace(
            base,
            kind=Kind.WRONG_RESULT,
            headline=checked,
            signature=normalise(checked),
            exception=value_check.exception_of(checked),
            check_note=value_check.check_note(output),
        )
    if status is not None:
        exc, code, msg = status
        site_m = _RET_CHECK_RE.search(msg)
        # torch_xla raises XLA's message as it is, less the status code: that message is
        # what a replay under jaxlib prints after the code.
        headline = f"{code}: {msg}" if code else msg if graph else f"{exc}: {msg}"
        if own is not None:
            headline = f"{_exception_line(status)}, raised by the program itself in {own.where}"
            return replace(
                base,
                kind=Kind.EXIT,
                headline=headline,
                signature=normalise(headline),
                exception=exc or None,
            )
        if code is None and graph is None and not _XLA_HINTS.search(f"{exc} {msg}"):
            kind = Kind.EXIT
        elif base.phase is Phase.COMPILE:
            kind = Kind.COMPILE_ERROR
        else:
            kind = Kind.RUNTIME_ERROR
        return replace(
            base,
            kind=kind,
            headline=headline,
            # Compared without the wrappers an asynchronous failure reached Python in: a
            # replay raises the inner status bare.
            signature=normalise(headline.replace(DISPATCH, "")),
            site=site_m.group("site").rsplit("/", 1)[-1] if site_m else None,
            status_code=code,
            exception=exc or None,
            function=tf_function(output),
        )
    tail = _last_nonempty_line(output)
    return replace(
        base,
        kind=Kind.EXIT,
        headline=tail or f"exit status {base.exit_status}",
        signature=normalise(tail),
    )


def _exception_line(status: Status) -> str:
    """The exception's line as Python printed it: ``RuntimeError: INTERNAL: message``."""
    exc, code, msg = status
    return ": ".join(part for part in (exc, code, msg) if part)


def _phase_from_output(output: str, compiling: str | None) -> Phase:
    if compiling is not None:
        return Phase.COMPILE
    graph = ptxla_log.unfinished(output)  # PyTorch/XLA's graph log
    if graph is not None:
        return Phase.COMPILE if graph.compiling else Phase.RUN
    if fatal_in_compile(output):
        return Phase.COMPILE
    last_traceback = output.rfind("Traceback (most recent call last)")
    if last_traceback >= 0 and _COMPILE_PY_FRAMES.search(output, last_traceback):
        return Phase.COMPILE
    if FINISHED_RE.search(output) or COMPILING_RE.search(output):
        return Phase.RUN
    return Phase.UNKNOWN


def _last_nonempty_line(output: str) -> str:
    """The program's last words: its last line that is not one XLA (or gloo) logged at INFO
    or WARNING ("I1206 ... service.cc:114] Jax service shutting down", which every process of
    a jax.distributed job logs as it exits); such a line only when there is no other."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    said = [line for line in lines if not _LOGGED.match(line)]
    return value_check.without_timestamp((said or lines or [""])[-1])[:300]


# A line XLA's logging (or gloo's) writes at INFO or WARNING.
_LOGGED = re.compile(rf"{xla_log.INFO_OR_WARNING}|\[Gloo\] ")
