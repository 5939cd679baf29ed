"""The module a command on a bundle is about (``shrink``, ``bisect``): of the modules its
manifest lists, the first that reproduced, never one a shrink added."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xla_bugkit.bundle.manifest.schema import ModuleEntry
from xla_bugkit.errors import BugkitError

SHRUNK = ".shrunk"  # the end of the label (and of the archive's name) that a shrink wrote


def pick_module(modules: Sequence[ModuleEntry], module_re: str | None) -> ModuleEntry:
    """The module a bundle is about: the first that reproduced (``module_re`` narrows the
    choice), never a shrunk one."""
    pattern = re.compile(module_re) if module_re else None
    found = [
        m
        for m in modules
        if not m["label"].endswith(SHRUNK) and (pattern is None or pattern.search(m["label"]))
    ]
    if not found:
        raise BugkitError(f"no module of the bundle matches {module_re!r}")
    reproduced = [m for m in found if (m["replay"] or {}).get("outcome", "").startswith("repro")]
    return (reproduced or found)[0]
