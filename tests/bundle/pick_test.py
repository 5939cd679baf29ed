"""The module a command on a bundle is about: the first that reproduced, never a shrunk one."""

from __future__ import annotations

import pytest

from xla_bugkit.bundle.manifest import ModuleEntry, pick_module
from xla_bugkit.errors import BugkitError


def _module(label: str, outcome: str | None) -> ModuleEntry:
    replay = None if outcome is None else {"outcome": outcome}
    return ModuleEntry(label=label, name=label, id=1, platform="cpu", reasons=[], files={},
                       replay=replay)  # fmt: skip


MODULES = [
    _module("module_0001.jit_init", "not reproduced"),
    _module("module_0002.jit_step", "reproduced: crash"),
    _module("module_0002.jit_step.shrunk", "reproduced: crash"),
    _module("module_0003.jit_eval", None),
]


def test_the_first_that_reproduced_and_never_the_shrunk_one() -> None:
    assert pick_module(MODULES, None)["label"] == "module_0002.jit_step"
    assert pick_module(MODULES[2:], None)["label"] == "module_0003.jit_eval"


def test_a_pattern_narrows_the_choice() -> None:
    assert pick_module(MODULES, "init|eval")["label"] == "module_0001.jit_init"
    with pytest.raises(BugkitError, match="no module of the bundle matches 'shrunk'"):
        pick_module(MODULES, "shrunk")
