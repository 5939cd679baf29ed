"""Replay one dumped module in a child process and judge what it shows.

The ways in: ``replay_module`` replays a module as its run ran it (``RunContext``: the run's
flags, interpreter, memory cap and framework); ``replay_dump`` replays what a dump folder
holds; ``replay`` is the bare replay under them, for a caller that sets every flag itself
(shrink's confirmations, collect's flag isolation). Each takes the module as a
``ReplayInput`` and one ``ReplayOptions``, and gives a ``Verdict`` (``xla_bugkit.verdict``).

Inside: ``inputs`` finds what a replay needs; ``spawn`` starts a child (``children`` starts
them ahead) and settles its flags and devices; ``judge`` reads what it did
(``interpret_mode``: a Pallas kernel by its outputs under that mode); ``compare`` holds
it to its references; ``native`` replays under PyTorch/XLA's own XLA; ``differential`` is
collect's search for the module of a wrong result; ``elsewhere`` is what a machine without
the module's platform can say. The child's side is ``child/`` (the worker, the op-by-op
reference, what can replay here); ``protocol`` is what parent and child say to each other,
and the arrays they leave, which shrink's and repro.py's children read too.

Names are loaded on first use: the child starts with what it needs and no more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_bugkit import _lazy

__all__ = [
    "KERNEL_ONLY",
    "PHASE",
    "PLAIN",
    "PROCESS_FLAGS",
    "UNRECORDED",
    "Ahead",
    "Comparison",
    "CompilerRelease",
    "Interpreted",
    "Release",
    "ReplayInput",
    "ReplayOptions",
    "RunContext",
    "Spares",
    "Unverified",
    "as_found",
    "capped",
    "child_spec",
    "compare_outputs",
    "dump_modules",
    "env_flags",
    "failed",
    "fallback_note",
    "judged",
    "made_ahead",
    "marker",
    "memory_limit",
    "module_files",
    "replay",
    "replay_batch",
    "replay_dump",
    "replay_input",
    "replay_label",
    "replay_module",
    "replay_platform",
    "reproduced_under_jaxlib",
    "run_and_exit",
    "say",
    "split_flags",
]

_HOMES = {
    "replay_module": "xla_bugkit.replay.context",
    "RunContext": "xla_bugkit.replay.context",
    "UNRECORDED": "xla_bugkit.replay.context",
    "replay_dump": "xla_bugkit.replay.dump",
    "as_found": "xla_bugkit.replay.dump",
    "failed": "xla_bugkit.replay.dump",
    "replay": "xla_bugkit.replay.judge",
    "judged": "xla_bugkit.replay.judge",
    "replay_batch": "xla_bugkit.replay.batch",
    "env_flags": "xla_bugkit.replay.batch",
    "ReplayOptions": "xla_bugkit.replay.options",
    "PLAIN": "xla_bugkit.replay.options",
    "ReplayInput": "xla_bugkit.replay.inputs",
    "Interpreted": "xla_bugkit.replay.inputs",
    "CompilerRelease": "xla_bugkit.replay.inputs",
    "Release": "xla_bugkit.replay.inputs",
    "replay_input": "xla_bugkit.replay.inputs",
    "replay_platform": "xla_bugkit.replay.inputs",
    "module_files": "xla_bugkit.replay.inputs",
    "dump_modules": "xla_bugkit.replay.inputs",
    "memory_limit": "xla_bugkit.replay.limits",
    "capped": "xla_bugkit.replay.limits",
    "Spares": "xla_bugkit.replay.children",
    "Ahead": "xla_bugkit.replay.children",
    "made_ahead": "xla_bugkit.replay.children",
    "split_flags": "xla_bugkit.replay.spawn",
    "child_spec": "xla_bugkit.replay.spawn",
    "PROCESS_FLAGS": "xla_bugkit.replay.spawn",
    "Comparison": "xla_bugkit.replay.compare",
    "compare_outputs": "xla_bugkit.replay.compare",
    "Unverified": "xla_bugkit.replay.elsewhere",
    "fallback_note": "xla_bugkit.replay.native",
    "replay_label": "xla_bugkit.replay.native",
    "reproduced_under_jaxlib": "xla_bugkit.replay.native",
    "KERNEL_ONLY": "xla_bugkit.replay.protocol",
    "PHASE": "xla_bugkit.replay.protocol",
    "say": "xla_bugkit.replay.protocol",
    "marker": "xla_bugkit.replay.protocol",
    "run_and_exit": "xla_bugkit.replay.protocol",
}

if TYPE_CHECKING:
    from xla_bugkit.replay.batch import env_flags, replay_batch
    from xla_bugkit.replay.children import Ahead, Spares, made_ahead
    from xla_bugkit.replay.compare import Comparison, compare_outputs
    from xla_bugkit.replay.context import UNRECORDED, RunContext, replay_module
    from xla_bugkit.replay.dump import as_found, failed, replay_dump
    from xla_bugkit.replay.elsewhere import Unverified
    from xla_bugkit.replay.inputs import (
        CompilerRelease,
        Interpreted,
        Release,
        ReplayInput,
        dump_modules,
        module_files,
        replay_input,
        replay_platform,
    )
    from xla_bugkit.replay.judge import judged, replay
    from xla_bugkit.replay.limits import capped, memory_limit
    from xla_bugkit.replay.native import fallback_note, replay_label, reproduced_under_jaxlib
    from xla_bugkit.replay.options import PLAIN, ReplayOptions
    from xla_bugkit.replay.protocol import KERNEL_ONLY, PHASE, marker, run_and_exit, say
    from xla_bugkit.replay.spawn import PROCESS_FLAGS, child_spec, split_flags

__getattr__, __dir__ = _lazy.exports(__name__, _HOMES, __all__, globals())
