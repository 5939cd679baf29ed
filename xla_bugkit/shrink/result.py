"""What a shrink found: the manifest's ``shrink`` record and the lines people read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xla_bugkit.shrink.passes import Culprit

# The stages ``--only`` chooses among; the workarounds are tried whatever ran.
STAGES = ("flags", "module", "passes")


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
    # The stages --only asked for (a spent budget ends one early, and its note says so): a
    # finding about flags, the module or a pass comes only from its own stage.
    stages: tuple[str, ...] = STAGES

    @property
    def skipped(self) -> tuple[str, ...]:
        """The stages ``--only`` left out, in their order."""
        return tuple(s for s in STAGES if s not in self.stages)

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
            "stages": list(self.stages),
            "skipped": list(self.skipped),
        }

    def findings(self) -> list[str]:
        """One line per finding, for the terminal and ISSUE.md: each from the stage that
        found it, and a line naming the stages that did not run."""
        lines = [self._size_line()]
        if self.culprit is not None:
            lines.append(self.culprit.sentence())
        lines += self._flag_lines()
        if self.workarounds:
            lines.append(f"passes with: {', '.join(self.workarounds)}")
        if self.skipped:
            lines.append(
                f"not run (--only): the {' and '.join(self.skipped)} stage{_s(self.skipped)}"
            )
        lines.extend(self.notes)
        return lines

    def _size_line(self) -> str:
        same = f"same failure ({self.oracle}); {self.probes} probes in {self.seconds:.0f} s"
        if "module" not in self.stages:
            return f"not shrunk: {self.instructions_before} instructions; {same}"
        return (
            f"shrunk: {self.instructions_before} → {self.instructions_after} instructions; {same}"
        )

    def _flag_lines(self) -> list[str]:
        """What the flags stage showed; nothing when it did not run (or had none to try)."""
        if "flags" not in self.stages or not self.user_flags:
            return []
        if not self.needed_flags:
            return [f"fails without any of the {self.user_flags} recorded flags"]
        rest = (
            f"; not {' '.join(self.unneeded_flags)}, also in force in the run"
            if self.unneeded_flags
            else ""
        )
        lines = [
            f"needs {' '.join(self.needed_flags)} "
            f"({len(self.needed_flags)} of {self.user_flags} flags{rest})"
        ]
        if self.module_independent:
            lines.append("module-independent: the flags alone fail on a module that does nothing")
        return lines


def _s(items: tuple[str, ...]) -> str:
    return "s" if len(items) > 1 else ""
