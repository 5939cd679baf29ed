"""A process of a multi-process job (``jax.distributed``) that another process took down.

When one process of a job dies (a crash inside XLA, a kill, a preemption, its own exit), the
others find out through the job: a collective loses its connection to it (gloo's
``Gloo all-reduce failed: [.../pair.cc:547] Connection closed by peer``, NCCL's ``remote
process exited or there was a network error``), a collective waits for it until it times
out (``Gloo context initialization failed: DEADLINE_EXCEEDED: GetKeyValue() timed out``),
the coordination service marks it unhealthy (``Task 1 heartbeat timeout``) or fails a
barrier it never reached, and each survivor is ended by the JAX client itself::

    F1206 04:46:42.454236  5669 client.h:80] Terminating process because the JAX
    distributed service detected fatal errors. This most likely indicates that another task
    died; ...

That is the job's doing, not XLA's: the failure to look at is the other process's. A process
whose FIRST error is the job's (``job_error``) was ended by the job, whatever it printed
after (the shutdown's abort, gloo's own abort). A process whose own error came first (an XLA
status of its own, a CHECK of its own) is not such a survivor, even when the job then ends
it the same way.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from xla_bugkit.failure.xla_log import INFO_OR_WARNING
from xla_bugkit.failure.xla_status import Status

TERMINATED = "Terminating process because the JAX distributed service detected fatal errors"
_HEARTBEAT = re.compile(r"\bTask (\d+) heartbeat timeout")
_UNHEALTHY = re.compile(r"unhealthy \(stopped sending heartbeats\):\s*\n((?:\s*\d+\s*\n)+)")
_PREEMPTED = re.compile(
    r"received (?:a )?preemption notice|preemption notice received|SIGTERM caught at", re.I
)
_GAP = r"[\s\S]{0,400}?"  # what lies between two parts of one message, over lines too


class JobText(NamedTuple):
    """What a process prints when its job, not XLA, failed it; what that says, in words."""

    pattern: re.Pattern[str]
    words: str


_LOST = "a collective lost its connection to another process of the job, which had died"
_NEVER_CAME = "a collective timed out waiting for another process of the job, which never joined"
# One row per way a job's transport or coordination shows a lost process, first match wins.
JOB_TEXTS = (
    # gloo (CPU collectives): "Gloo all-reduce failed: [.../pair.cc:547] Connection closed by
    # peer", "Gloo AllGather failed: [...] Read error [...]: Connection reset by peer".
    JobText(
        re.compile(
            rf"(?:Gloo [\w-]+ failed|gloo/transport/\w+/pair\.cc:\d+\]){_GAP}"
            r"(?:Connection (?:closed|reset) by peer|Socket unexpectedly closed)"
        ),
        _LOST,
    ),
    JobText(
        re.compile(r"gloo::EnforceNotMet"),
        "gloo aborted this process: another process of the job sent what its collective did "
        "not expect (that process failed, or had gone on to another step)",
    ),
    JobText(
        re.compile(r"Gloo context initialization failed|GetKeyValue\(\) timed out"), _NEVER_CAME
    ),
    # NCCL (GPU collectives), as XLA and torch pass it on.
    JobText(
        re.compile(
            r"remote process exited or there was a network error|ncclRemoteError|"
            r"NCCL[^\n]{0,300}unhandled system error"
        ),
        "NCCL lost another process of the job (it exited, or the network between them failed)",
    ),
    # Open MPI's launcher, ending every rank once one called MPI_Abort.
    JobText(
        re.compile(r"MPI_ABORT was invoked on rank \d+"),
        "MPI ended the job after one of its ranks called MPI_ABORT",
    ),
    JobText(
        re.compile(r"Shutdown barrier (?:in coordination service )?has failed"),
        "another process of the job never reached jax.distributed's shutdown barrier (it "
        "failed or hung), and the JAX distributed service ended this process",
    ),
    JobText(
        re.compile(r"Failed to send RPC to coordination service"),
        "the job's coordination service (in process 0) went away: process 0 had died, and "
        "the JAX distributed service ended this process",
    ),
    JobText(
        re.compile(
            r"Barrier timed out|Barrier failed because|heartbeat timeout|"
            r"stopped sending heartbeats"
        ),
        "the job's coordination service gave up waiting for another process of the job",
    ),
    JobText(
        re.compile(r"JAX distributed service|CoordinationServiceError|coordination service", re.I),
        "the JAX distributed service ended this process after another task of the job died",
    ),
    JobText(_PREEMPTED, "the job was preempted"),
)
# The cheap test before reading an output for the job's texts: a word of every wording any
# row of JOB_TEXTS reads (tests/failure/peers_test.py holds the two together).
_JOB_SIGNS = re.compile(
    r"JAX distributed service|heartbeat|gloo|preemption|NCCL|MPI_ABORT|coordination ?service|"
    r"Barrier timed out|Barrier failed|Shutdown barrier|SIGTERM caught|GetKeyValue|"
    r"remote process exited",
    re.I,
)


# The coordination service's own line (it runs in task 0) when jax.distributed's shutdown
# barrier times out, and the tasks that never reached it ("1\n2\n", or their full names).
_SHUTDOWN_FAILED = re.compile(
    r"^.*\bShutdown barrier in coordination service has failed:[\s\S]*?"
    r"Some timed out task names:\n((?:\s*(?:/job:[\w-]+/replica:\d+/task:)?\d+\s*\n)+)",
    re.M,
)


def ended_on_its_own(output: str) -> int | None:
    """Where the job's end of this process starts in ``output``, when the process had ended
    on its own before it: task 0, which runs the coordination service, had reached
    jax.distributed's shutdown barrier (its program had finished, or exited on its own
    check) and waited there for the others until the barrier timed out. None otherwise."""
    found = _SHUTDOWN_FAILED.search(output)
    if found is None:
        return None
    late = {int(t) for t in re.findall(r"(\d+)\s*$", found.group(1), re.M)}
    return found.start() if 0 not in late else None


def job_end(output: str) -> int | None:
    """Where the job's word on this process begins in ``output``: the line of the first
    error of its transport or coordination (a line logged at INFO or WARNING does not
    count), or of the JAX client's abort; None where there is none."""
    if not mentions_job(output) and TERMINATED not in output:
        return None
    lines = (
        output.rfind("\n", 0, m.start()) + 1 for t in JOB_TEXTS for m in t.pattern.finditer(output)
    )
    said = [at for at in lines if _LOGGED.match(output, at) is None]
    if (abort := output.find(TERMINATED)) >= 0:
        said.append(output.rfind("\n", 0, abort) + 1)
    return min(said, default=None)


def mentions_job(output: str) -> bool:
    """Whether ``output`` holds any word of a job's transport or coordination."""
    return _JOB_SIGNS.search(output) is not None


def says_job_ended(lines: str) -> bool:
    """Whether ``lines`` (whole lines of a process's output, as they arrive) hold one in which
    the job's transport or coordination shows a lost process; a line logged at INFO or
    WARNING does not count (every process logs the service as it starts, and warns when it
    cannot read a preemption notice)."""
    return mentions_job(lines) and job_error(_LOGGED.sub("", lines)) is not None


def job_error(text: str) -> str | None:
    """What ``text`` (an error's message, or a process's output) says of the job, in words,
    when it is the job's transport or coordination failing, not XLA; None otherwise."""
    return next((t.words for t in JOB_TEXTS if t.pattern.search(text)), None)


def peer_failure(output: str, own_error: str | None, *, ended_by: str | None = None) -> str | None:
    """What took this process down when it was another process of its job ("task 1 of the
    job stopped sending heartbeats: it failed, was preempted or was killed"); None when the
    process failed on its own (``own_error``: its first error's text, if any, that does not
    read as the job's). ``ended_by``: the signal that ended it, if one did; a process with
    no error of its own that the job's launcher killed (MPI's SIGTERM) was ended by the
    job when its output says so."""
    own_words = job_error(own_error) if own_error is not None else None
    if own_error is not None and own_words is None:
        return None
    tasks = sorted({int(t) for t in _HEARTBEAT.findall(output)})
    for listed in _UNHEALTHY.findall(output):
        tasks = sorted({*tasks, *(int(t) for t in listed.split())})
    named = ", ".join(str(t) for t in tasks)
    who = f"task {named} of the job" if len(tasks) == 1 else f"tasks {named} of the job"
    if tasks:
        return (
            f"{who} stopped sending heartbeats (it failed, was preempted or was killed), and "
            "the JAX distributed service ended this process"
        )
    if _PREEMPTED.search(output):
        return "the job was preempted, and the JAX distributed service ended this process"
    if own_words is not None:
        return own_words
    if TERMINATED in output:
        return job_error(output[output.find(TERMINATED) :])
    if ended_by not in _FROM_OUTSIDE:
        return None
    # Every process of a job logs the service at INFO as it starts ("Polling for error from
    # coordination service"): only an error line is the job's word.
    return job_error(_LOGGED.sub("", output))


# The signals a launcher ends the rest of a job with once one process has failed.
_FROM_OUTSIDE = frozenset({"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP"})
_LOGGED = re.compile(rf"^{INFO_OR_WARNING}[^\n]*$", re.M)


def first_error(
    output: str, fatal: tuple[str, str | None] | None, status: Status | None
) -> tuple[int, str] | None:
    """Where the output shows the process's first error, and its text: its own fatal line
    (a CHECK of its own counts before the JAX distributed service's end of it, see
    ``fatal.first_fatal``) or a status it raised, whichever came first; a status only
    logged (the coordination service's) when there is neither, and only before the JAX
    client's abort (a status in that abort is the abort's). A raised status counts wherever
    its traceback is: the abort comes from another thread at the moment the job loses a
    process, and its line may reach the output before Python prints the collective's error
    that the same loss raised."""
    abort = output.find(TERMINATED)
    said: tuple[int, str] | None = None
    raised = False
    if status is not None:
        exc, code, msg = status
        at, raised = _position(output, msg), bool(exc)
        if raised or abort < 0 or at < abort:
            said = (at, f"{exc}: {code}: {msg}" if code else f"{exc}: {msg}")
    if fatal is not None and TERMINATED not in fatal[0]:
        own = (_position(output, fatal[0].split("] ", 1)[-1]), fatal[0])
        return min(own, said) if said is not None and raised else own
    return said


def _position(output: str, message: str) -> int:
    at = output.find(message[:80].strip())
    return at if at >= 0 else len(output)
