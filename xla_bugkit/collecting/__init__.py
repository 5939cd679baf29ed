"""collect's pipeline as library stages: run -> dumps -> select -> replay -> bundle.

``collect`` runs them all; ``rebundle`` runs the stages after the run again on a work dir
that ``collect`` kept (``driver``, ``bundling``). Each stage is also a function of its own
(``stages``), for benchmarks and for programs that want one step. Stages report progress on
the ``Ui`` they are given and print no summary: that is the commands'.

Names are loaded on first use: ``collect`` starts the program before it imports the stages
that run after it (``warm``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_bugkit import _lazy

__all__ = [
    "CollectOptions",
    "CollectResult",
    "collect",
    "rebundle",
    "rebundle_command",
    "shrink_written",
]

_HOMES = {
    "CollectOptions": "xla_bugkit.collecting.options",
    "CollectResult": "xla_bugkit.collecting.options",
    "collect": "xla_bugkit.collecting.driver",
    "rebundle": "xla_bugkit.collecting.driver",
    "rebundle_command": "xla_bugkit.collecting.options",
    "shrink_written": "xla_bugkit.collecting.stages",
}

if TYPE_CHECKING:
    from xla_bugkit.collecting.driver import collect, rebundle
    from xla_bugkit.collecting.options import CollectOptions, CollectResult, rebundle_command
    from xla_bugkit.collecting.stages import shrink_written

__getattr__, __dir__ = _lazy.exports(__name__, _HOMES, __all__, globals())
