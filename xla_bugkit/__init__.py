"""xla-bugkit: turn a failing JAX/XLA program into a replayable bug bundle, and verify one.

The public API::

    from xla_bugkit import CollectOptions, collect, verify_bundle, replay_dump

    result = collect(["python", "train.py"], CollectOptions(output=Path("bug.zip")))
    print(verify_bundle(Path("bug.zip")).reproduced)
    for verdict in replay_dump(Path("dump/"), module_re="jit_train_step"):
        print(verdict.module, verdict.outcome.value)

Names are loaded on first use: the replay child imports this package too, and starts with
what it needs and no more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xla_bugkit import _lazy
from xla_bugkit._version import __version__

__all__ = [
    "CollectOptions",
    "CollectResult",
    "Outcome",
    "Verdict",
    "VerifyResult",
    "__version__",
    "collect",
    "replay_dump",
    "start_capture",
    "verify_bundle",
]

# Public name -> the module that defines it.
_HOMES = {
    "CollectOptions": "xla_bugkit.collecting",
    "CollectResult": "xla_bugkit.collecting",
    "collect": "xla_bugkit.collecting",
    "Outcome": "xla_bugkit.verdict",
    "Verdict": "xla_bugkit.verdict",
    "replay_dump": "xla_bugkit.replay",
    "VerifyResult": "xla_bugkit.verify",
    "verify_bundle": "xla_bugkit.verify",
    "start_capture": "xla_bugkit.collecting.here",
}

if TYPE_CHECKING:
    from xla_bugkit.collecting import CollectOptions, CollectResult, collect
    from xla_bugkit.collecting.here import start_capture
    from xla_bugkit.replay import replay_dump
    from xla_bugkit.verdict import Outcome, Verdict
    from xla_bugkit.verify import VerifyResult, verify_bundle


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext xla_bugkit``: the ``%xla_bugkit collect`` magic, which reruns the notebook's
    cells in a fresh process under collect (a kernel cannot turn XLA's dumps on afterwards)."""
    from xla_bugkit.notebook import magic

    magic.load(ipython)


__getattr__, __dir__ = _lazy.exports(__name__, _HOMES, __all__, globals())
