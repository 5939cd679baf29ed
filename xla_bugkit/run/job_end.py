"""A job's part ended once its job has ended it.

When another process of a ``jax.distributed`` job fails, a survivor finds out at once (a
collective loses its peer, the coordination service reports the error), but then waits for
jax's heartbeat timeout or its shutdown barrier (100 s by default) before the JAX client
ends it. Once the survivor's output shows the job's end, and the run's judge
(``classify``) reads it as a process its job took down, collect gives it a short grace to
print its error and then ends it, as it ends a hang. A process whose own error came first (a
CHECK, an XLA status of its own) is never ended so: the judge does not read it as the job's.
"""

from __future__ import annotations

import signal

from xla_bugkit.failure import peers

# Seconds a part the job ended gets to print its error before collect ends it.
GRACE = 3.0
# ``Failure.stopped_by`` of a part that collect ended once its job had ended it.
JOB = "job"


class JobEnd:
    """Reads a part's output as it arrives (``proc.EndWhen``): the grace, once the job has
    ended the process; ``peer`` then says how, in the judge's words."""

    def __init__(self, grace: float = GRACE) -> None:
        self.grace = grace
        self.peer: str | None = None
        self._seen: list[bytes] = []

    def __call__(self, lines: bytes) -> float | None:
        self._seen.append(lines)
        if self.peer is not None or not peers.says_job_ended(_text(lines)):
            return None
        from xla_bugkit.failure.classify import classify

        # Judged as the run will be once collect has ended it (SIGTERM): one judge.
        output = _text(b"".join(self._seen))
        self.peer = classify(output, exit_status=-signal.SIGTERM).peer
        return self.grace if self.peer is not None else None


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
