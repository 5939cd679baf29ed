"""The maintainer's side: unpack a stranger's bundle safely, check it, replay every module,
and say whether the reporter's failure reproduces here (``run``; its answer: ``result``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xla_bugkit import _lazy

__all__ = ["ModuleCheck", "VerifyResult", "verify_bundle"]

_HOMES = {
    "ModuleCheck": "xla_bugkit.verify.result",
    "VerifyResult": "xla_bugkit.verify.result",
    "verify_bundle": "xla_bugkit.verify.run",
}

if TYPE_CHECKING:
    from xla_bugkit.verify.result import ModuleCheck, VerifyResult
    from xla_bugkit.verify.run import verify_bundle

__getattr__, __dir__ = _lazy.exports(__name__, _HOMES, __all__, globals())
