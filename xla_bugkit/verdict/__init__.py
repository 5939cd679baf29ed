"""What a replay showed and how far its numbers may stray: read by every stage after the run.

``record`` holds the ``Verdict`` (one replay's outcome and what it rests on); ``tolerance`` the
bounds a replay's output is held to against its reference. Names are loaded on first use: the
tolerance is read by the command line before the program starts, the verdict after it ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_bugkit import _lazy

__all__ = [
    "BUSY_CORES",
    "CANNOT_INTERPRET",
    "COMPILED_DIFFERS",
    "INTERPRET_MODE",
    "NO_REFERENCE",
    "OWN_CODE",
    "OWN_CODE_GIVES",
    "Outcome",
    "Verdict",
]

_HOMES = {name: "xla_bugkit.verdict.record" for name in __all__}

if TYPE_CHECKING:
    from xla_bugkit.verdict.record import (
        BUSY_CORES,
        CANNOT_INTERPRET,
        COMPILED_DIFFERS,
        INTERPRET_MODE,
        NO_REFERENCE,
        OWN_CODE,
        OWN_CODE_GIVES,
        Outcome,
        Verdict,
    )

__getattr__, __dir__ = _lazy.exports(__name__, _HOMES, __all__, globals())
