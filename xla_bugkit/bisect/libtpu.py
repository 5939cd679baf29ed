"""Bisect a TPU module over libtpu releases: the TPU's compiler ships in libtpu, released
apart from jaxlib, so on a TPU the axis is libtpu's. Each probe replays the module in a child
under this interpreter's jax and jaxlib, loading that release's ``libtpu.so`` in place of the
installed one (jax's ``TPU_LIBRARY_PATH``), and is judged as ``verify`` judges.

A libtpu far from the jaxlib it runs under may not load (the PJRT C API between them
changes): such a release could not test the module, and is stepped around like any release
not tried; it is never judged as passing or failing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from xla_bugkit import config, platforms
from xla_bugkit.bisect.search import Bisection, Probe, Seen, bisect, probe_seen
from xla_bugkit.errors import BugkitError, NeedsDevice
from xla_bugkit.failure.classify import Failure
from xla_bugkit.releases import cache, libtpu
from xla_bugkit.replay import CompilerRelease, ReplayInput, ReplayOptions, RunContext, replay_module
from xla_bugkit.replay.elsewhere import missing_platform
from xla_bugkit.ui import Ui
from xla_bugkit.verdict import Outcome, Verdict


@dataclass(frozen=True)
class LibtpuRange:
    """Which libtpu releases to try: from a folder of wheels or PyPI, between two versions."""

    wheels: Path | None = None
    low: str | None = None
    high: str | None = None

    def listing(self) -> libtpu.Listing:
        found = libtpu.from_folder(self.wheels) if self.wheels else libtpu.from_pypi()
        chosen = found.between(self.low, self.high)
        if not chosen.tried:
            bounds = f"from {self.low or 'the oldest'} to {self.high or 'the newest'}"
            raise BugkitError(f"no libtpu release {bounds} can be tried here ({found.source})")
        return chosen


def refuse_off_device(label: str, platform: platforms.Platform) -> None:
    """Raise ``NeedsDevice`` where this machine has none of ``platform``'s chips: each
    release of its compiler is judged by running the module there."""
    if platforms.devices_here(platform) is False:
        raise NeedsDevice(
            f"{label} was compiled for {platform.needs}: bisect needs {platform.needs} "
            f"(it replays the module under each {platform.compiler_dist} release on the "
            f"chip); on a {platform.device} machine: xla-bugkit bisect BUNDLE"
        )


def detail_of(verdict: Verdict, version: str) -> str:
    """The probe's line: why a release could not test the module, or what the replay showed."""
    if missing_platform(verdict):
        return f"cannot test: libtpu {version} did not load under this jaxlib: {verdict.evidence}"
    if verdict.outcome is Outcome.NOT_REPLAYABLE:
        return f"cannot test: {verdict.evidence}"
    if verdict.withheld:
        return f"{verdict.evidence} (not applied: {'; '.join(verdict.withheld)})"
    return verdict.evidence


def prober(
    inp: ReplayInput,
    expected: Failure | None,
    context: RunContext,
    listing: libtpu.Listing,
    wheels: Path | None,
    timeout: float,
    ui: Ui,
) -> Callable[[str], Probe]:
    """The probe of one libtpu release: unpack it (cache, folder or pip), replay ``inp``
    with its library."""

    def probe(version: str) -> Probe:
        started = time.monotonic()
        try:
            with ui.phase(f"getting libtpu {version}"):
                release: CompilerRelease = cache.compiler(version, listing.wheels[version], wheels)
        except BugkitError as e:
            ui.say(f"libtpu {version}: not tried: {e}")
            return Probe(version, Seen.UNTRIED, str(e), time.monotonic() - started)
        with ui.phase(f"replaying under libtpu {version}"):
            verdict = replay_module(
                replace(inp, compiler=release),
                expected=expected,
                context=context,
                options=ReplayOptions(timeout=timeout),
            )
        seen, detail = probe_seen(verdict), detail_of(verdict, version)
        # jax names the library it could not open: a path in the user's cache, which a
        # bundle written with the result would carry.
        detail = detail.replace(str(cache.root()), "<cache>")
        ui.say(f"libtpu {version}: {seen.value}: {detail}")
        return Probe(version, seen, detail, time.monotonic() - started)

    return probe


def bisect_libtpu(
    inp: ReplayInput,
    expected: Failure | None,
    context: RunContext,
    chosen: LibtpuRange,
    *,
    reported: str | None,
    timeout: float = config.REPLAY_TIMEOUT,
    ui: Ui | None = None,
) -> Bisection:
    """Bisect ``inp``'s failure (``expected``) over the libtpu releases ``chosen`` names."""
    ui = ui or Ui()
    listing = chosen.listing()
    ui.say(
        f"bisecting {inp.name} over libtpu {listing.tried[0]} to {listing.tried[-1]} "
        f"({len(listing.tried)} releases, from {listing.source})"
    )
    pin = libtpu.paired()
    if pin is not None:
        ui.say(f"the installed jax was released with libtpu {pin}: one far from it may not load")
    probe = prober(inp, expected, context, listing, chosen.wheels, timeout, ui)
    return bisect(
        listing.tried, probe, reported=reported, untried=listing.untried, dist=libtpu.DIST
    )
