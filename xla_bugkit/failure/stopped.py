"""A run stopped from outside (its timeout, the user's Ctrl-C, a signal) and the hang it shows.

Its output ends where the stop cut it, not where it failed. It is a hang when XLA was busy at
the stop: JAX's compile log or PyTorch/XLA's graph log left a compilation or an execution
open. A hang's headline says what was busy, how long the run went without output and how it
was stopped (``busy_headline``, with which ``run.weigh`` words a process's hang too).
"""

from __future__ import annotations

from dataclasses import replace

from xla_bugkit.failure import ptxla_log
from xla_bugkit.failure.compile_log import Busy, busy_in_xla
from xla_bugkit.failure.kinds import Kind
from xla_bugkit.failure.record import Failure, Phase, Stop


def stopped_run(output: str, base: Failure, *, by: str, stop: Stop | None) -> Failure:
    """A run stopped by its timeout or by the user: a hang when XLA was busy at the stop, so
    that Ctrl-C on a program stuck in XLA reports the hang it is."""
    base = replace(
        base,
        stopped_by=by,
        ran_seconds=round(stop.ran, 1) if stop else None,
        stalled_seconds=round(stop.stalled, 1) if stop else None,
    )
    how = "killed after the timeout" if by == "timeout" else "stopped by the user"
    busy = busy_in_xla(output) or _graph_in_xla(output)
    if busy is None:
        if by == "user":
            return replace(base, kind=Kind.INTERRUPTED, headline=how, signature="interrupted")
        return replace(base, kind=Kind.HANG, headline=how, signature="hang")
    phase = Phase.COMPILE if busy.compiling else Phase.RUN
    doing = "compiling" if busy.compiling else "executing"
    return replace(
        base,
        kind=Kind.HANG,
        phase=phase,
        headline=busy_headline(f"{busy.who} was {doing} {busy.call}", base),
        signature="hang",
        compiling=(busy.name or None) if busy.compiling else base.compiling,
        executing=None if busy.compiling else (busy.name or None),
    )


# How a run was stopped, by ``Failure.stopped_by`` (the timeout's words depend on the figures).
_STOPPED_BY = {
    "user": "stopped by the user",
    "signal": "stopped by a SIGTERM or SIGINT from outside collect",
}


def busy_headline(busy: str, stopped: Failure) -> str:
    """A hang's headline: what was ``busy`` ("XLA was executing jit(f)"), how long without
    output and how the run was stopped, from ``stopped``'s record of the stop."""
    if stopped.ran_seconds is None or stopped.stalled_seconds is None:
        how = (
            "killed after the timeout"
            if stopped.stopped_by == "timeout"
            else _STOPPED_BY.get(stopped.stopped_by or "", "stopped by the user")
        )
        return f"{busy}; {how}"
    how = "killed by the timeout" if stopped.stopped_by == "timeout" else "stopped by the user"
    return (
        f"{busy} with no output for {seconds(stopped.stalled_seconds)}; "
        f"{how} after {seconds(stopped.ran_seconds)}"
    )


def _graph_in_xla(output: str) -> Busy | None:
    """PyTorch/XLA's graph log: the graph it started compiling or executing and never
    logged ``done!`` for (JAX's compile log says nothing of torch_xla's graphs)."""
    graph = ptxla_log.unfinished(output)
    if graph is None:
        return None
    return Busy(graph.compiling, "", graph.describe, who="PyTorch/XLA")


def seconds(value: float) -> str:
    """A duration as the summaries print it: \"12 s\", \"0.4 s\"."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
