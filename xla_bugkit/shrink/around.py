"""The module right before and right after the HLO pass a shrink named: the two files a
maintainer opens first.

One compile of the shrunk module in a fresh child, with XLA dumping the module around each
run of that pass (``--xla_dump_hlo_pass_re``) into the shrink's own folder. XLA names those
dumps ``NNNN.<pipeline>.after_<A>.before_<B>.txt``: the state between two passes. A run of the
pass is a ``before_<pass>`` dump followed by an ``after_<pass>`` one; the first run that
changed the module is the one shown. A crash inside the pass leaves only the state before it.
"""

from __future__ import annotations

import re
from pathlib import Path

from xla_bugkit.shrink.hlo_text import Candidate
from xla_bugkit.shrink.passes import Culprit
from xla_bugkit.shrink.session import Exhausted, Session

FOLDER = "around-pass"  # in the shrink's work folder


def around_pass(s: Session, module: Candidate, culprit: Culprit) -> tuple[tuple[str, str], ...]:
    """(file name, module text) of the module before the named pass, and after it when the
    pass finished; () when no single pass is named or the dump shows no run of it."""
    if not culprit.pass_name or "," in culprit.pass_name:
        return ()
    name = culprit.pass_name
    folder = s.work / FOLDER
    dump = [
        f"--xla_dump_to={folder}",
        "--xla_dump_hlo_as_text",
        f"--xla_dump_hlo_pass_re=^{re.escape(name)}$",
    ]
    try:
        s.run(module, xla_flags=[*s.xla_flags, *dump], fresh_env={})
    except Exhausted:
        return ()
    return pick(folder, name)


def pick(folder: Path, name: str) -> tuple[tuple[str, str], ...]:
    """From XLA's pass dumps in ``folder``: the module before the run of pass ``name`` that
    never finished (a crash inside it), alone; else the first run that changed the module,
    before and after."""
    dumps = sorted(p for p in folder.glob("*.txt") if ".after_" in p.name)
    before = [i for i, p in enumerate(dumps) if p.name.endswith(f".before_{name}.txt")]
    runs = []
    for i in before:
        after = dumps[i + 1] if i + 1 < len(dumps) else None
        if after is not None and f".after_{name}.before_" in after.name:
            runs.append((dumps[i], after))
        elif i == before[-1]:
            return ((f"before_{name}.txt", dumps[i].read_text()),)
    for b, a in runs:
        if _body(b) != _body(a):
            return ((f"before_{name}.txt", b.read_text()), (f"after_{name}.txt", a.read_text()))
    if runs:
        b, a = runs[0]
        return ((f"before_{name}.txt", b.read_text()), (f"after_{name}.txt", a.read_text()))
    return ()


def _body(path: Path) -> str:
    return path.read_text().split("\n", 1)[-1]
