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
the program's own just inside jax's callback machinery (``running_in_callback``). A
callback that kills its process (``os.abort()``, a C extension's segfault) shows the same
frame in the stack faulthandler writes at the fatal signal, in the block of the thread the
signal hit (``crashed_in_callback``).

The callback is the function jax called, the program's outermost frame below jax's
machinery; the exception or the signal may come from a helper deeper in the program's code,
which is named beside it.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import PurePath

from xla_bugkit.failure.pytraceback import FRAME, JAX_OWN, NOT_PROGRAM, XLA_TYPE

# XLA's words when a host callback raised, on CPU and on accelerators.
_CALLBACK_ERROR = re.compile(r"(?:Cpu|Gpu|Tpu)?Callback error calling callback", re.I)
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s*(?P<message>.*))?$")
_LOOK_AHEAD = 400  # lines after XLA's words in which the callback's traceback must end
# faulthandler's line for one frame, and the modules through which jax calls a host
# callback (pure_callback and io_callback in callback.py, debug.callback in debugging.py).
_STACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<fun>\S+)\s*$')
_JAX_CALLING = re.compile(r"[/\\]jax[/\\]_src[/\\](?:callback|debugging)\.py$")
# The block of the thread a fatal signal hit: "Current thread 0x... (most recent call
# first):", with the thread's name in brackets since Python 3.13.
_CURRENT_THREAD = re.compile(r"^Current thread 0x[0-9a-f]+\b", re.M)


@dataclass(frozen=True)
class CallbackError:
    """The exception a host callback raised: ``KeyError: 7`` in ``lookup (prog.py:46)``."""

    exception: str  # its type as printed: "KeyError"
    line: str  # the exception's line: "KeyError: 7"
    where: str  # the innermost frame, where it raised: "_edge_index (monitor.py:22)"
    callback: str  # the frame jax called: "record_grad_norm (monitor.py:36)"

    @property
    def said(self) -> str:
        """Where it raised, in words: in the callback itself, or in a helper it called."""
        if self.where == self.callback:
            return f"raised in the program's host callback {self.callback}"
        # The summary cuts the key line at 160 characters: the file is said once.
        name, _, at = self.callback.partition(" (")
        same_file = at.split(":")[0] == self.where.partition(" (")[2].split(":")[0]
        callback = name if same_file else self.callback
        return f"raised in {self.where}, from the host callback {callback}"


@dataclass(frozen=True)
class CallbackCrash:
    """The program's own host callback a fatal signal hit: the frame jax called, and the
    program's innermost frame when that is a helper deeper down."""

    callback: str  # "_check_header (decoder.py:32)"
    inner: str | None  # "_parse (decoder.py:12)", or None when the callback itself died

    @property
    def said(self) -> str:
        helper = f" (in {self.inner}, which it called)" if self.inner else ""
        return f"the program's own host callback {self.callback}{helper}"


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
    frames: list[re.Match[str]] = []
    for line in lines:
        if (f := FRAME.match(line)) is not None:
            frames.append(f)
            continue
        if not frames or not line.strip() or line.startswith((" ", "\t")):
            continue
        found = _EXCEPTION.match(line.strip())
        # XLA's or jax's own exception inside the callback (a jitted call that failed in
        # it) is not the program's fault alone.
        if found is None or XLA_TYPE.search(found.group("type")):
            return None
        # A traceback lists the outermost frame first: the one jax called is the last frame
        # of the program's own after jax's callback machinery.
        called = [i for o, i in itertools.pairwise(frames) if _called_by_jax(o, i)]
        where = _frame(frames[-1])
        callback = _frame(called[-1]) if called else where
        return CallbackError(found.group("type"), line.strip()[:300], where, callback)
    return None


def running_in_callback(stack: str) -> str | None:
    """The program's own host callback that a thread was inside when faulthandler wrote
    ``stack``: ``fetch_gain (prog.py:30)``, the function jax called and the line it was at;
    None when no thread was in one (or only jax's own, ``jax.debug.print``'s)."""
    for block in re.split(r"\n\s*\n", stack):
        if (found := _callback_in(block)) is not None:
            return _frame(found[0])
    return None


def crashed_in_callback(stack: str) -> CallbackCrash | None:
    """The program's own host callback that the thread a fatal signal hit was inside, from
    faulthandler's stack at the signal; None when that thread was in none (XLA's own crash
    while another thread waited in a callback is XLA's)."""
    current = next((b for b in re.split(r"\n\s*\n", stack) if _CURRENT_THREAD.search(b)), None)
    found = _callback_in(current) if current is not None else None
    if found is None:
        return None
    called, innermost = found
    inner = None if innermost is called else _frame(innermost)
    return CallbackCrash(_frame(called), inner)


def _callback_in(block: str) -> tuple[re.Match[str], re.Match[str]] | None:
    """In one thread's block of faulthandler's stack (innermost frame first): the program's
    frame that jax's callback machinery called, and the program's innermost frame above it."""
    frames = [f for line in block.splitlines() if (f := _STACK_FRAME.match(line))]
    for at, (inner, outer) in enumerate(itertools.pairwise(frames)):
        if _called_by_jax(outer, inner):
            own = [f for f in frames[: at + 1] if not NOT_PROGRAM.search(f.group("file"))]
            return inner, own[0] if own else inner
    return None


def _called_by_jax(outer: re.Match[str], inner: re.Match[str]) -> bool:
    return bool(_JAX_CALLING.search(outer.group("file"))) and not JAX_OWN.search(
        inner.group("file")
    )


def _frame(f: re.Match[str]) -> str:
    """``fetch_gain (prog.py:30)``: a frame's function, its file's name and the line."""
    return f"{f.group('fun')} ({PurePath(f.group('file')).name}:{f.group('line')})"


def crashed_outside_jax(stack: str) -> str | None:
    """Where a fatal signal hit a thread of the program's that was running none of jax: its
    innermost frame and the program's own frame that called it ("string_at
    (ctypes/__init__.py:519) from <module> (train.py:14)"), from faulthandler's stack at
    the signal; None when the thread it hit had a jax frame, was not a Python thread (XLA's
    own threads are not), or faulthandler wrote no stack."""
    current = next((b for b in re.split(r"\n\s*\n", stack) if _CURRENT_THREAD.search(b)), None)
    if current is None:
        return None
    frames = [f for line in current.splitlines() if (f := _STACK_FRAME.match(line))]
    if not frames or any(JAX_OWN.search(f.group("file")) for f in frames):
        return None
    innermost = frames[0]
    own = next((f for f in frames if not NOT_PROGRAM.search(f.group("file"))), None)
    where = _library_frame(innermost)
    if own is None or own is innermost:
        return where
    return f"{where} from {_frame(own)}"


def _library_frame(f: re.Match[str]) -> str:
    """A frame named with its file's folder too where that says the library
    (``ctypes/__init__.py``)."""
    path = PurePath(f.group("file"))
    name = f"{path.parent.name}/{path.name}" if path.name == "__init__.py" else path.name
    return f"{f.group('fun')} ({name}:{f.group('line')})"
