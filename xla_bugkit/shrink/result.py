"""What a shrink found: the manifest's ``shrink`` record and the lines people read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xla_bugkit.shrink.passes import Culprit


@dataclass(frozen=True)
class ShrinkResult:
    module: str  # the label of the module shrunk
    text: str  # the shrunk module, parsable HLO text
    oracle: str  # what "the same failure" meant
    instructions_before: int
    instructions_after: int
    probes: int
    seconds: float  # wall time of the whole shrink, the confirming replays and the bundle too
    culprit: Culprit | None = None
    needed_flags: tuple[str, ...] = ()
    user_flags: int = 0  # how many flags the ddmin started from
    unneeded_flags: tuple[str, ...] = ()  # of those, the ones the failure was shown not to need
    module_independent: bool = False
    workarounds: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # budget exhausted, inconclusive pass search, ...
    trace: str = field(default="", repr=False)  # the pass trace's log
    parameters: tuple[dict[str, object], ...] = ()  # each parameter's source
    probe_seconds: float = 0.0  # the probing stages' share: what --budget limits
    # The module right before and right after the named pass: (file name, HLO text).
    around: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def record(self) -> dict[str, Any]:
        """The manifest's ``shrink`` record (JSON-ready)."""
        return {
            "module": self.module,
            "oracle": self.oracle,
            "instructions_before": self.instructions_before,
            "instructions_after": self.instructions_after,
            "probes": self.probes,
            "seconds": round(self.seconds, 1),
            "probe_seconds": round(self.probe_seconds, 1),
            "culprit": self.culprit.to_json() if self.culprit else None,
            "needed_flags": list(self.needed_flags),
            "unneeded_flags": list(self.unneeded_flags),
            "module_independent": self.module_independent,
            "workarounds": list(self.workarounds),
            "notes": list(self.notes),
            "parameters": list(self.parameters),
        }

    def findings(self) -> list[str]:
        """One line per finding, for the terminal and ISSUE.md."""
        lines = [
            f"shrunk: {self.instructions_before} → {self.instructions_after} instructions; "
            f"same failure ({self.oracle}); {self.probes} probes in {self.seconds:.0f} s"
        ]
        if self.culprit is not None:
            lines.append(self.culprit.sentence())
        if self.needed_flags:
            rest = (
                f"; not {' '.join(self.unneeded_flags)}, also in force in the run"
                if self.unneeded_flags
                else ""
            )
            lines.append(
                f"needs {' '.join(self.needed_flags)} "
                f"({len(self.needed_flags)} of {self.user_flags} flags{rest})"
            )
        elif self.user_flags:
            lines.append(f"fails without any of the {self.user_flags} recorded flags")
        if self.module_independent:
            lines.append("module-independent: the flags alone fail on a module that does nothing")
        if self.workarounds:
            lines.append(f"passes with: {', '.join(self.workarounds)}")
        lines.extend(self.notes)
        return lines
