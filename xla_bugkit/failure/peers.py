"""A process of a multi-process job (``jax.distributed``) that another process took down.

When one process of a job dies (a crash inside XLA, a kill, a preemption), the others find
out through the job's coordination service: a collective that waits for it times out
(``Gloo context initialization failed: DEADLINE_EXCEEDED: GetKeyValue() timed out``), the
service marks it unhealthy (``Task 1 heartbeat timeout``), and each survivor is ended by
the JAX client itself::

    F1206 04:46:42.454236  5669 client.h:80] Terminating process because the JAX
    distributed service detected fatal errors. This most likely indicates that another task
    died; ...

That abort is the job's doing, not XLA's: the failure to look at is the other process's.
A process whose own error came first (an XLA status of its own, a CHECK of its own) is not
such a survivor, even when the service then ends it the same way.
"""

from __future__ import annotations

import re

TERMINATED = "Terminating process because the JAX distributed service detected fatal errors"
_HEARTBEAT = re.compile(r"\bTask (\d+) heartbeat timeout")
_UNHEALTHY = re.compile(r"unhealthy \(stopped sending heartbeats\):\s*\n((?:\s*\d+\s*\n)+)")
# A collective between the processes (gloo's all-gather, all-reduce) whose peer went away.
_LOST_PEER = re.compile(
    r"Gloo \w+ failed: .*(?:Connection reset by peer|Connection closed by peer)"
)
_PREEMPTED = re.compile(r"received (?:a )?preemption notice|preemption notice received", re.I)
# What a survivor's own error says when it is only the job's: a collective whose peers never
# came, the coordination service's errors.
_PEER_STATUS = re.compile(
    r"Gloo context initialization failed|GetKeyValue\(\) timed out|heartbeat timeout|"
    rf"stopped sending heartbeats|{_LOST_PEER.pattern}|"
    r"CoordinationServiceError|coordination service|Barrier failed|JAX distributed service",
    re.I,
)


def peer_failure(output: str, own_error: str | None) -> str | None:
    """What took this process down when it was another process of its job ("task 1 of the
    job stopped sending heartbeats: it failed, was preempted or was killed"); None when the
    process failed on its own (``own_error``: its own first error's text, if any, that
    does not read as the job's)."""
    if own_error is not None and not _PEER_STATUS.search(own_error):
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
    if TERMINATED in output:
        return "the JAX distributed service ended this process after another task of the job died"
    if own_error is not None and "Gloo context initialization failed" in own_error:
        return "a collective timed out waiting for another process of the job, which never joined"
    if own_error is not None and _LOST_PEER.search(own_error):
        return "a collective lost its connection to another process of the job, which had died"
    return None
