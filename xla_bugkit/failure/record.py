"""The record of how a run failed (``Failure``): its kind (``kinds``), phase, key line and
signature, and whether two records show the same bug. ``classify`` makes one from a run's
output."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any

from xla_bugkit.failure.kinds import KINDS, Kind
from xla_bugkit.failure.signature import comparable

# What an allocation that failed says: the status code, or the allocator's own words.
_MEMORY = re.compile(r"RESOURCE_EXHAUSTED|out of memory|\bOOM\b|allocat", re.I)


class Phase(StrEnum):
    """Where the process was when it stopped, as far as the output tells."""

    COMPILE = "compile"
    RUN = "run"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Failure:
    """How one run ended, with the single line a maintainer would search for."""

    kind: Kind
    phase: Phase
    headline: str  # the key line as printed, e.g. "buffer_assignment_util.cc:46] Check failed: ..."
    signature: str  # headline normalised: stable across two runs of the same bug
    exit_status: int | None = None  # the exit code; negative for a signal
    signal: str | None = None  # e.g. "SIGABRT"
    status_code: str | None = None  # e.g. "INTERNAL"
    site: str | None = None  # "file.cc:123" of a CHECK / RET_CHECK
    exception: str | None = None  # the Python exception type, e.g. "jax.errors.JaxRuntimeError"
    compiling: str | None = None  # the function JAX was compiling when the run stopped
    # A run that was stopped (hang, interrupted): by what ("timeout", "user", "signal": a
    # SIGTERM or SIGINT from outside collect, a wrapper's timeout say, or "job": a part of a
    # job that collect ended once its job had ended it, ``peer``), how long it
    # ran, for how long before the stop it printed nothing, and the function XLA was running.
    stopped_by: str | None = None
    ran_seconds: float | None = None
    stalled_seconds: float | None = None
    executing: str | None = None
    function: str | None = None  # the framework's name for it: TensorFlow's "__inference_f_13"
    # The process died on a signal and its own fatal line never reached the run's output
    # (pytest's capture, a worker whose parent printed last): the headline is the signal's.
    message_lost: bool = False
    # What the failure rests on beyond the output: the failing process's own record, or the
    # replay whose message stands in for one that was lost (``with_message_of``).
    evidence: str | None = None
    # For a wrong result np.testing reported: its difference is only rounding in the values'
    # own precision (``value_check.check_note``).
    check_note: str | None = None
    # A hang in a call whose arguments could not be read (jax's fast path, the hook finding
    # it only at the stop, or a process waiting on a result with nothing under way): a
    # replay can run only on inputs recorded from an earlier call.
    unread_inputs: bool = False
    # The program's own host callback raised (jax.pure_callback, io_callback, debug.callback)
    # and XLA passed the error on: the callback, where it raised ("lookup (prog.py:46)").
    callback: str | None = None
    # A process of a multi-process job that the job took down after another of its processes
    # failed (``failure.peers``): what happened, in words.
    peer: str | None = None
    # A fatal signal that hit the program's own native code (a ctypes or cffi call, an
    # extension of its own), with no jax frame on the thread it hit: where, in words.
    native: str | None = None

    @property
    def describe(self) -> str:
        """One line for humans: "compile crash (SIGABRT): <headline>"."""
        # The signal that ended a stopped run is the stop's own, not news.
        extra = f" ({self.signal})" if self.signal and self.stopped_by is None else ""
        line = self.headline if len(self.headline) <= 160 else self.headline[:159] + "…"
        if line.lower().startswith(f"{self.kind.value}:") and not extra:
            return line  # the program's own "wrong result: ..." says the kind already
        return f"{self.kind.value}{extra}: {line}" if line else self.kind.value

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "kind": self.kind.value,
            "phase": self.phase.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Failure:
        """The inverse of ``to_json``; unknown keys (from newer versions) are ignored."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["kind"] = Kind(values["kind"])
        values["phase"] = Phase(values.get("phase", Phase.UNKNOWN.value))
        return cls(**values)

    def replay_timeout(self, limit: float) -> float:
        """Seconds a replay of this failure may take, at most ``limit``.

        A hang's replay can only end by its timeout, so waiting ``limit`` (minutes) proves
        nothing more than waiting as long as the run went without progress, plus the time a
        replay child needs to start (import jax, compile) before it can hang at all.
        """
        if self.kind is not Kind.HANG or self.stalled_seconds is None:
            return limit
        return min(limit, max(self.stalled_seconds, 0.0) + HANG_REPLAY_START_SECONDS)

    def running_bound(self) -> float | None:
        """For a hang: how long a replay runs the module before it is taken for hung, counted
        from when it starts running it (a readiness signal, not from its start: importing
        jax and compiling vary with the machine's load). As long as the run went without
        progress, half again, and ``HANG_REPLAY_MARGIN_SECONDS`` more; None for any other
        failure, or a hang whose stall was not measured."""
        if self.kind is not Kind.HANG or self.stalled_seconds is None:
            return None
        return max(self.stalled_seconds, 0.0) * 1.5 + HANG_REPLAY_MARGIN_SECONDS

    @property
    def out_of_memory_running(self) -> bool:
        """An allocation that failed as a module ran (a device or the host out of memory,
        RESOURCE_EXHAUSTED): its kind may show one (``KindInfo.out_of_memory_running``),
        and its status or headline says so."""
        if not KINDS[self.kind].out_of_memory_running:
            return False
        return _MEMORY.search(f"{self.status_code or ''} {self.headline}") is not None

    def same_bug(self, other: Failure) -> bool:
        """Whether ``other`` shows this failure: same family and same normalised key line.

        Compile crash and compile error count as one family, since the same XLA bug can abort
        in one build and return a status in another; the signature must still match, but
        not in what differs between two XLAs (a PyTorch/XLA run replayed under jaxlib): the
        status code torch_xla drops, and the numbers XLA puts in computation names
        (``region_1.1`` in one version is ``region_0.1`` in another).
        """
        if _family(self.kind) != _family(other.kind):
            return False
        if _unread(self, other) or _unread(other, self):
            return True
        if self.message_lost or other.message_lost:
            # One side's message was lost: the same way of dying must do (kind, which holds
            # the phase, and signal); the caller says that this rests on less. Two deaths on
            # a signal with no line at all (a segfault) are one way of dying: where the run
            # died is then read from what Python was doing, and jax runs a computation in the
            # background while Python compiles the next function.
            if self.signal != other.signal:
                return False
            bare = _both_died(self, other) and self._bare() and other._bare()
            return self.kind is other.kind or bare
        return comparable(self.signature) == comparable(other.signature)

    def _bare(self) -> bool:
        return self.signal is not None and self.headline.startswith("killed by ")

    def with_message_of(self, other: Failure, source: str) -> Failure:
        """This failure, whose message was lost, with ``other``'s (a replay that died the
        same way), saying so: "the run's message was not captured; the replay's: ..."."""
        # A bare death's phase was read from what Python was doing; the replay's is the
        # module's own (a crash in a background execution while Python compiled the next).
        crashes = _both_died(self, other)
        return replace(
            self,
            kind=other.kind if crashes else self.kind,
            phase=other.phase if crashes else self.phase,
            headline=other.headline,
            signature=other.signature,
            site=other.site,
            status_code=other.status_code or self.status_code,
            evidence=f"the run's message was not captured; the replay's ({source}): "
            f"{other.headline[:200]}" + (f"; {self.evidence}" if self.evidence else ""),
        )


# What a hang's replay child gets on top of the run's time without progress: importing jax
# alone takes up to ~15 s on a loaded machine, and the module must compile before it can hang.
HANG_REPLAY_START_SECONDS = 60.0
# What a hang's replay gets on top of the run's stall once it runs the module (a machine
# slower than the run's, a module that runs a while before it hangs).
HANG_REPLAY_MARGIN_SECONDS = 10.0


@dataclass(frozen=True)
class Stop:
    """When a run was stopped (by its timeout, or by the user)."""

    by: str  # "timeout" or "user"
    ran: float  # seconds from the start to the stop
    stalled: float  # seconds without any output before the stop


# XLA aborts when a program reads a result it failed to compute (an allocation that failed
# at run time); a replay waits on each result first and gets the failure's own status.
_UNREAD_RESULT = re.compile(r"raw_buffer\.h:\d+\] Check failed: buffer_\.IsConcrete\(\)")


def _unread(crash: Failure, error: Failure) -> bool:
    """``crash`` aborted reading a result XLA failed to compute, and ``error`` is a run-time
    error: one failure, seen from the program and from a replay."""
    return (
        crash.kind is Kind.CRASH
        and _UNREAD_RESULT.search(crash.signature) is not None
        and error.kind is Kind.RUNTIME_ERROR
    )


def _both_died(one: Failure, other: Failure) -> bool:
    return KINDS[one.kind].dies and KINDS[other.kind].dies


def _family(kind: Kind) -> str:
    return "xla" if KINDS[kind].xla_failure else str(kind.value)
