"""The one rule for replaying a module as it ran: ``replay_module`` with a ``RunContext``.

A module replays with the flags in force in the process that compiled it (its dumped debug
options, then what those cannot spell: ``flags.in_force``), under a memory cap the program
set itself as well as the limit for a module from elsewhere (``limits``), and under its
framework's own XLA first where that is installed (``native``). ``verify``, collect's replay
stage, ``replay`` of a dump folder, the differential search and shrink (its confirmations
and probes take the same flags and cap) all replay through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from xla_bugkit import frameworks, jaxlib_adapter
from xla_bugkit.failure.classify import Failure
from xla_bugkit.frameworks import Framework
from xla_bugkit.hlo import flags
from xla_bugkit.replay import native
from xla_bugkit.replay.inputs import Release, ReplayInput
from xla_bugkit.replay.limits import capped, memory_limit
from xla_bugkit.replay.options import PLAIN, ReplayOptions
from xla_bugkit.verdict import Verdict
from xla_bugkit.verdict.tolerance import DEFAULT_TOLERANCE, Tolerance


@dataclass(frozen=True)
class RunContext:
    """What a replay takes from the run that recorded its module, beyond the module's files."""

    process_flags: tuple[str, ...] = ()  # XLA_FLAGS in force in the process that compiled it
    memory_cap: int | None = None  # an address-space limit that process set itself
    framework: Framework | None = None  # the framework that handed XLA the module
    # The program's interpreter, when its jaxlib is not xla-bugkit's: replays run under it.
    # Only collect sets it, from its own run; a bundle's record never names an interpreter.
    python: str | None = None
    # How far an output may be from its reference: the user's --rtol/--atol, never a bundle's.
    tolerance: Tolerance = DEFAULT_TOLERANCE
    # --fake-data: generated inputs even where real ones were recorded (run_hlo_module's
    # --force_fake_data).
    fake_data: bool = False
    # verify --jaxlib: the release to replay under, unpacked; never taken from a bundle.
    release: Release | None = None
    # The jaxlib the run compiled with, as a bundle records it (None: this one's).
    jaxlib: str | None = None
    # The TPU compiler's flags the run set (LIBTPU_INIT_ARGS), as recorded; None: not recorded.
    tpu_args: tuple[str, ...] | None = None

    @classmethod
    def of_manifest(cls, manifest: Mapping[str, Any]) -> RunContext:
        """The context a bundle's manifest records (its loader checked every key)."""
        cap = manifest.get("process", {}).get("memory_cap")
        jaxlib = manifest.get("versions", {}).get("jaxlib")
        return cls(
            tuple(manifest["xla_flags"]),
            cap if isinstance(cap, int) else None,
            frameworks.of_record(manifest.get("framework")),
            jaxlib=jaxlib if isinstance(jaxlib, str) else None,
            tpu_args=_tpu_args(manifest),
        )

    def input(self, inp: ReplayInput) -> ReplayInput:
        """``inp`` with the flags in force where it ran; flags given by hand stay as given."""
        release = self.release or inp.release
        # A release built for another Python runs under that Python, whatever else was asked.
        python = release.python if release is not None and release.python else None
        inp = replace(
            inp,
            python=python or self.python or inp.python,
            tolerance=self.tolerance,
            release=release,
            tpu_args=inp.tpu_args if self.tpu_args is None else self.tpu_args,
        )
        if self.fake_data:
            inp = replace(inp, snapshot=None)
        if inp.autotune is not None and (release is not None or self._other_jaxlib()):
            # Autotune results carry their XLA's format version: another XLA may refuse them
            # (the compile would fail for that alone). It autotunes afresh.
            inp = replace(inp, autotune=None)
        if inp.flags_given:
            return inp
        return replace(inp, xla_flags=flags.in_force(inp.xla_flags, self.process_flags))

    def _other_jaxlib(self) -> bool:
        """Whether the run compiled with another jaxlib than this one (as its bundle says)."""
        return self.jaxlib is not None and self.jaxlib != jaxlib_adapter.jaxlib_version()

    def memory_limit(self, inp: ReplayInput) -> int | None:
        """The replay child's memory limit: the machine's policy, lowered to the run's cap."""
        return capped(memory_limit(inp.platform), self.memory_cap)


def _tpu_args(manifest: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A bundle's LIBTPU_INIT_ARGS: None where it has none (a run that set none, or an older
    xla-bugkit's), and the machine's stand, as they did before the bundle recorded them."""
    recorded = manifest.get("libtpu_init_args")
    return tuple(recorded) if isinstance(recorded, list) else None


# A module with no record of its run (a dump folder): its own debug options, the machine's
# memory policy, jaxlib.
UNRECORDED: RunContext = RunContext()


def replay_module(
    inp: ReplayInput,
    *,
    expected: Failure | None,
    context: RunContext,
    options: ReplayOptions = PLAIN,
) -> Verdict:
    """Replay ``inp`` as it ran (``RunContext``: its flags, its interpreter, its memory cap)
    and judge it against ``expected``."""
    inp = context.input(inp)
    return native.replay(
        inp,
        framework=context.framework,
        expected=expected,
        options=replace(options, memory_limit=context.memory_limit(inp)),
    )
