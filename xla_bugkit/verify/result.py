"""What ``verify`` found: each module's check against the reporter's, and the bundle's whole."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from xla_bugkit.errors import ExitCode
from xla_bugkit.failure.classify import Failure
from xla_bugkit.replay import Unverified
from xla_bugkit.verdict import Outcome, Verdict


@dataclass(frozen=True)
class ModuleCheck:
    label: str
    verdict: Verdict | None  # None: nothing in the bundle to replay
    recorded: str | None  # the outcome the reporter's replay gave
    # Recorded on a platform this machine lacks: what was checked instead (verdict: None).
    unverified: Unverified | None = None

    @property
    def same_as_reporter(self) -> bool | None:
        if self.verdict is None or self.recorded is None:
            return None
        return self.verdict.outcome.value == self.recorded


class Found(StrEnum):
    """What verify found of the recorded failure: the one answer that the text, the JSON,
    the exit code and the Python API each give."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    UNVERIFIED = "unverified"


EXIT_CODES = {
    Found.REPRODUCED: ExitCode.OK,
    Found.NOT_REPRODUCED: ExitCode.NOT_REPRODUCED,
    Found.UNVERIFIED: ExitCode.UNVERIFIED,
}


@dataclass(frozen=True)
class VerifyResult:
    bundle: Path
    failure: Failure
    checks: tuple[ModuleCheck, ...]
    edited: tuple[str, ...] = ()  # human text files (ISSUE.md, ...) changed since the bundle
    # Each repro.py in the bundle: "checked" (xla-bugkit's own script, settings checked), or
    # why to read it before running it (``script_check``).
    scripts: tuple[tuple[str, str], ...] = ()
    flags: tuple[str, ...] = ()  # the reporter's XLA flags, which each replay applies
    # Each module's own compile options (``compiler_options``), by label: in its debug
    # options, which its replay applies.
    compiler_options: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def found(self) -> Found:
        """The answer: reproduced by some module's replay, unverified (``unverified``), or
        not reproduced."""
        if any(c.verdict is not None and c.verdict.reproduced for c in self.checks):
            return Found.REPRODUCED
        return Found.UNVERIFIED if self._unverified else Found.NOT_REPRODUCED

    @property
    def exit_code(self) -> ExitCode:
        """What ``xla-bugkit verify`` exits with: the answer's code."""
        return EXIT_CODES[self.found]

    @property
    def reproduced(self) -> bool:
        return self.found is Found.REPRODUCED

    @property
    def unverified(self) -> bool:
        return self.found is Found.UNVERIFIED

    @property
    def _unverified(self) -> bool:
        """Some module needs a platform this machine lacks, or none could be replayed at all
        (it calls back into the program), or the call that hung ran on inputs the reporter's
        run could not record: where nothing reproduced, the failure is not "not
        reproduced", it is unverified."""
        needs = any(c.unverified is not None for c in self.checks)
        return needs or self.unreplayable or self.failure.unread_inputs

    @property
    def unreplayable(self) -> bool:
        """Every module was refused before it ran (a host callback, say): no replay ran."""
        verdicts = [c.verdict for c in self.checks if c.verdict is not None]
        return bool(verdicts) and all(v.outcome is Outcome.NOT_REPLAYABLE for v in verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            "bundle": str(self.bundle),
            "integrity": "ok",
            "edited": list(self.edited),
            "scripts": dict(self.scripts),
            "failure": self.failure.to_json(),
            "xla_flags": list(self.flags),
            "compiler_options": {label: list(own) for label, own in self.compiler_options},
            "found": self.found.value,
            "exit_code": int(self.exit_code),
            "reproduced": self.reproduced,
            "unverified": self.unverified,
            "modules": [
                {
                    "label": c.label,
                    "verdict": c.verdict.to_json() if c.verdict else None,
                    "recorded": c.recorded,
                    "same_as_reporter": c.same_as_reporter,
                    "unverified": c.unverified.to_json() if c.unverified else None,
                }
                for c in self.checks
            ],
        }
