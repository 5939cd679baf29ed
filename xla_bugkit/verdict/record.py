"""What one replay showed (``Verdict``), as the manifest and ``verify`` keep it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from xla_bugkit.failure.classify import Failure, Kind, Phase

# What a verdict's ``reference`` number says when no reference could be computed.
NO_REFERENCE = "no reference"
# ... and when the reference is a Pallas kernel's outputs under Pallas's TPU interpret mode,
# recorded by the program itself at collect (a replay cannot compute it).
INTERPRET_MODE = "interpret mode"
# A verdict's ``kernel`` number, where its interpret mode gives the values the program's
# check rejected: the kernel's own code computes them, not XLA, not Mosaic.
OWN_CODE = "own code"
# What a Pallas kernel's replay shows against its interpret mode, in the verdict's evidence
# and in every view of it: the compiled kernel differs; the kernel's own code gives the
# values the check rejected; or the interpret mode could not run it (the kernel unchecked).
COMPILED_DIFFERS = "the compiled kernel differs from its interpret mode"
OWN_CODE_GIVES = (
    "the kernel's own code: its interpret mode gives the same values, and the program's "
    "check fails under it too (not XLA's, not Mosaic's)"
)
CANNOT_INTERPRET = "Pallas's interpret mode cannot run the kernel"
# A replay its timeout stopped that kept at least this many CPU cores busy in its last
# seconds was computing, not waiting: a long computation, or a loop whose condition never
# turns false, looks just so, and only a replay that waits idle (a deadlock) proves a hang.
BUSY_CORES = 0.1


class Outcome(StrEnum):
    REPRODUCED_CRASH = "reproduced: crash"
    REPRODUCED_ERROR = "reproduced: error"
    REPRODUCED_HANG = "reproduced: hang"
    REPRODUCED_WRONG = "reproduced: wrong result"
    NOT_REPRODUCED = "not reproduced"
    NOT_REPLAYABLE = "not replayable"


@dataclass(frozen=True)
class Verdict:
    """What one replay showed. ``evidence`` is one line: the signature line, or the numbers."""

    module: str
    outcome: Outcome
    evidence: str
    inputs: str  # "snapshot" or "generated (seed 42)"
    failure: Failure | None = None  # how the replay child ended, when it failed
    numbers: Mapping[str, object] = field(default_factory=dict)
    matches_recorded: bool | None = None  # result equal to the snapshot's recorded result
    # The XLA it ran under: "jaxlib 0.10.2", "torch_xla 2.9.0's own XLA" ("": not said).
    under: str = ""
    # The jaxlib replay, when this one ran under the framework's own XLA (``native``).
    second: Verdict | None = None
    # Recorded options the replay did not apply (they could name a file), with the reason.
    withheld: tuple[str, ...] = ()

    @property
    def reproduced(self) -> bool:
        return self.outcome.name.startswith("REPRODUCED")

    @property
    def computing(self) -> bool:
        """A replay that ran past its bound with the module computing all along (the CPU
        cores it kept busy, its ``busy`` number), which proves no hang by itself."""
        busy = self.numbers.get("busy")
        return isinstance(busy, (int, float)) and busy >= BUSY_CORES

    @property
    def idle(self) -> bool:
        """A replay that ran past its bound waiting idle: blocked, as in a deadlock."""
        busy = self.numbers.get("busy")
        return isinstance(busy, (int, float)) and busy < BUSY_CORES

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; ``from_json`` reads it back."""
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data["numbers"] = dict(self.numbers)
        data["second"] = self.second.to_json() if self.second is not None else None
        if self.failure is not None:
            data["failure"] = {**data["failure"], "kind": self.failure.kind.value}
            data["failure"]["phase"] = self.failure.phase.value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        failure = data.get("failure")
        if failure is not None:
            failure = Failure(
                **{**failure, "kind": Kind(failure["kind"]), "phase": Phase(failure["phase"])}
            )
        return cls(
            module=data["module"],
            outcome=Outcome(data["outcome"]),
            evidence=data["evidence"],
            inputs=data["inputs"],
            failure=failure,
            numbers=dict(data.get("numbers", {})),
            matches_recorded=data.get("matches_recorded"),
            under=data.get("under", ""),
            second=cls.from_json(data["second"]) if data.get("second") else None,
            withheld=tuple(str(w) for w in data.get("withheld", ())),
        )
