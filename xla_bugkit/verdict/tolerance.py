"""How far a replay's output may be from its reference: run_hlo_module's bounds (1e-3), or
the user's ``--rtol``/``--atol``. Apart from ``compare`` so that the command line and the
options reach it without loading numpy."""

from __future__ import annotations

from dataclasses import dataclass

ABS_BOUND = 1e-3
REL_BOUND = 1e-3


@dataclass(frozen=True)
class Tolerance:
    """How far an output may be from its reference: ``rtol`` relative; ``atol`` absolute,
    or None for the bound scaled to the reference's values (``_scaled``). The user's
    ``--rtol``/``--atol``; a bundle never sets it."""

    rtol: float = REL_BOUND
    atol: float | None = None

    def describe(self) -> str:
        atol = f"{self.atol:g}" if self.atol is not None else "scaled"
        return f"rtol {self.rtol:g}, atol {atol}"


DEFAULT_TOLERANCE = Tolerance()
