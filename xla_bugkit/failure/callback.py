"""A Python exception the program's own host callback raised, which XLA passed on.

``jax.pure_callback``, ``jax.experimental.io_callback`` and ``jax.debug.callback`` run the
program's Python inside a compiled computation; when that Python raises, XLA fails the
execution with a status that quotes the callback's traceback::

    jax.errors.JaxRuntimeError: INTERNAL: CpuCallback error calling callback: Traceback ...
      File "prog.py", line 46, in lookup_calibration
    KeyError: 7

The error is the program's, whatever status carries it. jax may print the traceback more
than once (its log, the exception, an atexit handler); each copy names the same callback,
so the first one found decides, and the same run always reads the same.

A callback that never returns (it sleeps, or waits on an event nobody sets) raises
nothing: XLA waits for it, and the hang is the program's. The process's Python stack at
the stop (faulthandler's, one block per thread, innermost frame first) shows it: a frame of
the program's own just inside jax's callback machinery (``running_in_callback``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import PurePath

# XLA's words when a host callback raised, on CPU and on accelerators.
_CALLBACK_ERROR = re.compile(r"(?:Cpu|Gpu|Tpu)?Callback error calling callback", re.I)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fun>\S+)\s*$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s*(?P<message>.*))?$")
# An exception of XLA's or jax's own inside the callback (a jitted call that failed in it)
# is not the program's fault alone.
_XLA_TYPES = re.compile(r"XlaRuntimeError|JaxRuntimeError|jaxlib|^jax\.errors\.", re.I)
_LOOK_AHEAD = 400  # lines after XLA's words in which the callback's traceback must end
# faulthandler's line for one frame, and the modules through which jax calls a host
# callback (pure_callback and io_callback in callback.py, debug.callback in debugging.py).
_STACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<fun>\S+)\s*$')
_JAX_CALLING = re.compile(r"[/\\]jax[/\\]_src[/\\](?:callback|debugging)\.py$")
_JAX_OWN = re.compile(r"[/\\](?:jax|jaxlib)[/\\]")


@dataclass(frozen=True)
class CallbackError:
    """The exception a host callback raised: ``KeyError: 7`` in ``lookup (prog.py:46)``."""

    exception: str  # its type as printed: "KeyError"
    line: str  # the exception's line: "KeyError: 7"
    where: str  # the callback's innermost frame: "lookup_calibration (calibrate.py:46)"


def callback_failed(error: str) -> bool:
    """Whether an execution's error is XLA's word that a host callback raised (a stop's
    KeyboardInterrupt inside the callback, say)."""
    return _CALLBACK_ERROR.search(error) is not None


def raised_in_callback(output: str) -> CallbackError | None:
    """The program's own exception from a host callback, when XLA's error quotes one."""
    m = _CALLBACK_ERROR.search(output)
    if m is None:
        return None
    lines = output[m.end() :].splitlines()[:_LOOK_AHEAD]
    frame = None
    for line in lines:
        if (f := _FRAME.match(line)) is not None:
            frame = f
            continue
        if frame is None or not line.strip() or line.startswith((" ", "\t")):
            continue
        found = _EXCEPTION.match(line.strip())
        if found is None or _XLA_TYPES.search(found.group("type")):
            return None
        where = f"{frame.group('fun')} ({PurePath(frame.group('file')).name}:{frame.group('line')})"
        return CallbackError(found.group("type"), line.strip()[:300], where)
    return None


def running_in_callback(stack: str) -> str | None:
    """The program's own host callback that a thread was inside when faulthandler wrote
    ``stack``: ``fetch_gain (prog.py:30)``, the function jax called and the line it was at;
    None when no thread was in one (or only jax's own, ``jax.debug.print``'s)."""
    for block in re.split(r"\n\s*\n", stack):
        frames = [f for line in block.splitlines() if (f := _STACK_FRAME.match(line))]
        for inner, outer in itertools.pairwise(frames):
            if _JAX_CALLING.search(outer.group("file")) and not _JAX_OWN.search(
                inner.group("file")
            ):
                name = PurePath(inner.group("file")).name
                return f"{inner.group('fun')} ({name}:{inner.group('line')})"
    return None
