"""What JAX's compile log (``JAX_LOG_COMPILES=1``) tells about a run: which functions JAX
compiled, which compilation never finished, and whether XLA was still busy when the output
ended (a program stuck inside XLA prints nothing after the compile log's last line)."""

from __future__ import annotations

import re
from typing import NamedTuple

# The names are the jitted functions' names.
COMPILING_RE = re.compile(r"Compiling (?P<kind>jit|pmap|xla_pmap)\((?P<name>[^)]*)\)")
FINISHED_RE = re.compile(
    r"Finished XLA compilation of (?P<kind>jit|pmap|xla_pmap)\((?P<name>[^)]*)\)"
)
# A whole compile-log line (the rest of the line too: what comes after it is the program's).
_EVENT_RE = re.compile(
    r"(?P<event>Compiling|Finished XLA compilation of) "
    r"(?P<call>(?:jit|pmap|xla_pmap)\((?P<name>[^)]*)\))[^\n]*"
)
# What JAX's compile log and XLA's own logging (glog "I1202 09:49:08 ...") print while XLA
# works: none of it is the program making progress.
_XLA_CHATTER = re.compile(r"Finished (?:tracing|jaxpr to MLIR)|[IWE]\d{4} \d\d:\d\d:\d\d")
_TRACEBACK = "Traceback (most recent call last):"


class Busy(NamedTuple):
    """What XLA was doing when a run's output ended: compiling ``call``, or running it."""

    compiling: bool
    name: str  # the function, as JAX names it: "train_step"
    call: str  # as the compile log shows it: "jit(train_step)"
    who: str = "XLA"  # whose log said so ("PyTorch/XLA": a graph, not a JAX function)


def compile_open(output: str) -> str | None:
    """The function JAX started compiling and never finished."""
    open_names: list[str] = []
    for m in _EVENT_RE.finditer(output):
        name = str(m.group("name"))
        if m.group("event") == "Compiling":
            open_names.append(name)
        elif name in open_names:
            open_names.remove(name)
    return open_names[-1] if open_names else None


def busy_in_xla(output: str) -> Busy | None:
    """What XLA was doing when ``output`` ended: compiling a function whose compilation had
    started, or running the one just compiled. None when the program printed anything of its
    own after that compile-log line (a KeyboardInterrupt traceback at the end is the stop's
    doing, not the program's)."""
    last = next(reversed(list(_EVENT_RE.finditer(output))), None)
    if last is None:
        return None
    rest = _without_interrupt(output[last.end() :]).splitlines()
    if any(line.strip() and not _XLA_CHATTER.match(line.strip()) for line in rest):
        return None
    compiling = last.group("event") == "Compiling"
    return Busy(compiling, str(last.group("name")), str(last.group("call")))


def _without_interrupt(text: str) -> str:
    """``text`` less the traceback of a KeyboardInterrupt that ends it."""
    lines = text.rstrip().splitlines()
    if not lines or not lines[-1].startswith("KeyboardInterrupt"):
        return text
    start = text.find(_TRACEBACK)
    return text[:start] if start >= 0 else text
