"""collect's pipeline as library stages: run -> dumps -> select -> replay -> bundle.

``collect`` runs them all; ``rebundle`` runs the stages after the run again on a work dir
that ``collect`` kept (``driver``). Each stage is also a function of its own (``stages``),
for benchmarks and for programs that want one step. Stages report progress on the ``Ui``
they are given and print no summary: that is the commands'.
"""

from xla_bugkit.pipeline.driver import collect, rebundle
from xla_bugkit.pipeline.options import CollectOptions, CollectResult, rebundle_command
from xla_bugkit.pipeline.stages import shrink_written

__all__ = [
    "CollectOptions",
    "CollectResult",
    "collect",
    "rebundle",
    "rebundle_command",
    "shrink_written",
]
