"""How one replay runs (``ReplayOptions``): one value that every stage passes on whole.

The module and its recorded flags are the ``ReplayInput``; what is expected of it is the
caller's ``Failure``. These are the rest: the child's bounds, its inputs, what it checks and
what it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xla_bugkit import config
from xla_bugkit.hlo.generated import SEED

if TYPE_CHECKING:
    from xla_bugkit.replay.children import Spares


@dataclass(frozen=True)
class ReplayOptions:
    """One replay's settings; the defaults are a plain replay of a module from anywhere."""

    timeout: float = config.REPLAY_TIMEOUT  # for the test and the references together
    memory_limit: int | None = None  # bytes; None: no cap
    use_data: bool = True  # the recorded inputs; False (or none recorded): generated from seed
    seed: int = SEED
    reference: bool = True  # False: no wrong-result check
    keep_arrays: Path | None = None  # a folder to copy the child's arrays into
    extreme_set: str | None = None  # generate the inputs from this set of ``extreme``
    spares: Spares | None = None  # children started ahead, one of which may run the replay


PLAIN = ReplayOptions()
