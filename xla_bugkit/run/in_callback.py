"""A failing process that ended inside the program's own host callback: stopped or ended by
the program while the callback ran (a hang of the program's own), or killed by a fatal signal
that hit the thread running it (its ``os.abort()``). Either way XLA was only waiting for the
program's Python: ``weigh`` reads which from the process's Python stack."""

from __future__ import annotations

from dataclasses import replace

from xla_bugkit.failure.callback import CallbackCrash
from xla_bugkit.failure.classify import Failure, Kind, Phase
from xla_bugkit.failure.signature import normalise
from xla_bugkit.failure.stopped import busy_headline
from xla_bugkit.run.evidence import Event
from xla_bugkit.run.processes import Culprit


def hung(failure: Failure, callback: str, event: Event | None, culprit: Culprit) -> Failure:
    """A run stopped, or a program that ended itself, while its own host callback ran: XLA
    was executing the computation that called it, and waiting for the program's Python."""
    inside = f" in {event.call}" if event is not None else ""
    busy = f"the program's own host callback {callback} was running{inside}"
    headline = (
        busy_headline(busy, failure)
        if failure.stopped_by is not None
        else f"{busy} when the program ended itself ({failure.headline[:120]})"
    )
    at = "the stop" if failure.stopped_by is not None else "its own os._exit"
    return replace(
        failure,
        kind=Kind.HANG,
        phase=Phase.RUN,
        headline=headline,
        signature="hang in a host callback",
        executing=event.name if event is not None and event.kind == "execute" else None,
        callback=callback,
        exception=None,  # a stop's KeyboardInterrupt in the callback is the stop's, not news
        evidence=f"{culprit.label}'s Python stack at {at} shows a thread inside the "
        f"program's own host callback {callback}, which jax called{inside}: XLA was waiting "
        "for the program's Python to return",
    )


def died(
    failure: Failure, signal: str, killer: CallbackCrash, busy: Event | None, culprit: Culprit
) -> Failure:
    """The failing process died on ``signal`` inside the program's own host callback (its
    ``os.abort()``, say): XLA was running the computation that called it, and only waiting."""
    inside = f" while {busy.call} ran it" if busy is not None and busy.kind == "execute" else ""
    headline = f"the process died inside {killer.said}{inside}"
    return replace(
        failure,
        kind=Kind.CRASH,
        phase=Phase.RUN,
        headline=headline,
        signature=normalise(f"{signal} in host callback {killer.callback.split(' (')[0]}"),
        signal=signal,
        message_lost=False,
        exception=None,
        executing=busy.name if busy is not None and busy.kind == "execute" else None,
        callback=killer.callback,
        evidence=f"{culprit.label}'s Python stack at the {signal} shows the thread it hit "
        f"inside {killer.said}, which jax called{inside}: the program's Python died there, "
        "not XLA's code",
    )


def died_natively(
    failure: Failure, signal: str, native: str, busy: Event | None, culprit: Culprit
) -> Failure:
    """The failing process died on ``signal`` in a thread of the program's running none of
    jax (``native``: its ctypes call, say), while XLA perhaps ran a computation elsewhere."""
    running = busy if busy is not None and busy.kind == "execute" else None
    beside = f", while {running.call} ran on XLA's threads" if running is not None else ""
    return replace(
        failure,
        kind=Kind.CRASH,
        phase=Phase.RUN,
        headline=f"the process died on {signal} in the program's own code: {native}",
        signature=normalise(f"{signal} in {native.split(' (')[0]}"),
        signal=signal,
        message_lost=False,
        exception=None,
        executing=running.name if running is not None else None,
        native=native,
        evidence=f"{culprit.label}'s Python stack at the {signal} shows the thread it hit "
        f"in {native}, with no frame of jax's on it{beside}",
    )
