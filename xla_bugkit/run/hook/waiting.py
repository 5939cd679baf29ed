"""What a process is waiting for, asked by collect before it stops the run.

Loaded by ``jax_calls`` (by file path, standard library and the program's own jax only)
the first time collect asks (``recorder._listen``), in the hook's listening thread, while
the program's threads stay where they are. jax dispatches every call of a jitted function
after its first from C++ (its fast path), so the hook never sees such a call start, and XLA
writes no snapshot of an execution that never ends. This finds it all the same:

- A thread inside the call (XLA's CPU client runs a small computation before the call
  returns): its frame's current instruction is a call of a jitted function, the same
  instruction of the same frame at two looks a moment apart.
- Arrays still being computed (an accelerator, or a larger CPU computation, runs after
  the call has returned, and the program waits on its outputs): the compiled function
  whose results hold the most of them.

Either way, only when no array was made or freed between the two looks: a loop that calls
the function again and again is not stuck in it. The hook then writes an ``execute``
record that never ends, with ``seen`` saying what showed it, and saves the call's arguments
(``args``) where the call's source names them plainly: names, constants and attributes,
read without running the program's code.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import os
import re
import sys
import threading
import time
import weakref
from collections import Counter
from typing import Any

STILL_SECONDS = 0.25  # between two looks at the threads
LOOKS = 4  # pairs of looks before deciding that nothing is under way
_UNREADY_LISTED = 64  # array types listed in the ``state`` record; more are counted only
_FRAMES = 32  # frames of a waiting thread searched for the program's own
_TYPES_SAID = 8  # array types named in an execute record's ``seen``
# numpy's names of dtypes whose MLIR element type is not the name's short form.
_ELEMENT_TYPES = {
    "bool": "i1",
    "bfloat16": "bf16",
    "complex64": "complex<f32>",
    "complex128": "complex<f64>",
}


def state(recorder: Any, compiled: dict[int, Any]) -> dict[str, Any]:
    """Record the calls under way (see the module's docstring); the ``state`` record's
    fields: the arrays still being computed, as MLIR result types (``tensor<4x3xf32>``,
    at most ``_UNREADY_LISTED``), their number, and how many calls were recorded."""
    blocked, unready = 0, []
    for _ in range(LOOKS):
        earlier = _Look()
        time.sleep(STILL_SECONDS)
        later = _Look()
        if not earlier.still(later):
            continue  # the program is getting on: a call that returned, or arrays made
        unready = [a for i, a in later.unready.items() if i in earlier.unready]
        blocked = _record_blocked(recorder, compiled, earlier, later)
        if blocked or unready:
            break
    types = [_tensor_type(a.shape, a.dtype) for a in unready]
    awaited = 0
    if types and not blocked:
        awaited = _record_awaited(recorder, compiled, types, later.frames)
    return {
        "unready": types[:_UNREADY_LISTED],
        "unready_count": len(types),
        "calls": blocked + awaited,
    }


class _Look:
    """Every other thread's innermost frame and the instruction it is at, and the arrays
    alive: all of them, and those still being computed."""

    def __init__(self) -> None:
        import jax

        me = threading.get_ident()
        self.frames = {i: f for i, f in sys._current_frames().items() if i != me}
        self.at = {i: f.f_lasti for i, f in self.frames.items()}
        arrays = jax.live_arrays()  # type: ignore[no-untyped-call]
        self.ids = {id(a) for a in arrays}
        self.unready = {id(a): a for a in arrays if _unready(a)}
        # Weak: an array of this look that is gone by the next shows progress (its id alone
        # would not: a new array may take a freed one's address).
        self.refs = [weakref.ref(a) for a in arrays]

    def still(self, later: _Look) -> bool:
        """Whether nothing happened to the arrays between this look and ``later``: none
        made, none freed."""
        return self.ids == later.ids and all(r() is not None for r in self.refs)


def _unready(array: Any) -> bool:
    try:
        return not array.is_deleted() and not array.is_ready()
    except Exception:  # an array this jax describes otherwise
        return False


def _record_blocked(recorder: Any, compiled: dict[int, Any], earlier: _Look, later: _Look) -> int:
    """Record each thread that both looks found inside the same call of a jitted function."""
    found = 0
    for ident, frame in earlier.frames.items():
        if later.frames.get(ident) is not frame or later.at[ident] != earlier.at[ident]:
            continue
        try:
            call = _call_in(frame)
            match = _compilation(call[0], call[1], compiled) if call is not None else None
        except Exception:  # a frame this reads otherwise: that thread is left out
            continue
        if call is None or match is None:
            continue
        c, compilation, arguments = match
        seen = (
            f"its thread was inside the call {call[2]} at {call[3]}, which jax ran through "
            "its C++ fast path, unseen by the hook, when collect asked before the stop"
        )
        _record(recorder, c, compilation, arguments, seen)
        found += 1
    return found


def _record_awaited(
    recorder: Any, compiled: dict[int, Any], types: list[str], frames: dict[int, Any]
) -> int:
    """Record the call whose outputs are still being computed: of the compiled function
    whose results hold the most of ``types`` (none when two functions tie), with the
    arguments of the nearest call of it before where a waiting thread stands."""
    match = _still_computing(types, compiled)
    if match is None:
        return 0
    c, compilation = match
    arguments, source = None, ""
    for frame in frames.values():
        own = _programs_frame(frame)
        call = _preceding_call(own, compilation) if own is not None else None
        if call is None:
            continue
        try:
            arguments = _passed(call[0], compilation) if call[0] is not None else None
        except Exception:  # its arguments cannot be read: the call is recorded without
            arguments = None
        source = f"; its arguments are those of the call {call[1]} at {call[2]}"
        if arguments is not None:
            break
    held = ", ".join(types[:_TYPES_SAID]) + (", ..." if len(types) > _TYPES_SAID else "")
    seen = (
        f"arrays it returns were still being computed when collect asked before the stop "
        f"({held}): a call of it that jax ran through its C++ fast path, unseen by the hook"
        + (source if arguments is not None else "")
    )
    _record(recorder, c, compilation, arguments, seen)
    return 1


def _record(
    recorder: Any, c: int, compilation: Any, arguments: list[Any] | None, seen: str
) -> None:
    n = recorder.next_n()
    recorder.write("execute", n=n, module=compilation.module, fun=compilation.fun, c=c, seen=seen)
    if arguments is None:
        return
    try:
        recorder.save_arrays(n, arguments)
    except Exception as e:  # the disk: the record stands without its arguments
        recorder.write("hook_error", error=f"arguments of {n}: {type(e).__name__}: {e}")


def _still_computing(types: list[str], compiled: dict[int, Any]) -> tuple[int, Any] | None:
    """The compilation whose results hold the most of ``types``; none when functions tie
    (one compiled again for other shapes is one function: its newest compilation)."""
    left = Counter(types)
    scored = [(sum((left & Counter(v.results)).values()), c, v) for c, v in compiled.items()]
    most = max((held for held, _, _ in scored), default=0)
    best = [(c, v) for held, c, v in scored if held == most and held > 0]
    if not best or len({v.module for _, v in best}) > 1:
        return None
    return best[-1]


def _programs_frame(frame: Any) -> Any:
    """The innermost frame of the program's own code: outside jax, jaxlib, numpy and the
    hook's own patches (a wait of the program's goes through ``ready.patch_waits``)."""
    libraries = (
        *(
            os.path.dirname(getattr(sys.modules.get(name), "__file__", None) or "") + os.sep
            for name in ("jax", "jaxlib", "numpy")
            if sys.modules.get(name) is not None
        ),
        os.path.dirname(os.path.abspath(__file__)) + os.sep,
    )
    for _ in range(_FRAMES):
        if frame is None:
            return None
        if not frame.f_code.co_filename.startswith(libraries):
            return frame
        frame = frame.f_back
    return None


def _call_in(frame: Any) -> tuple[Any, list[Any] | None, str, str] | None:
    """The jitted function a frame's current instruction calls, the call's positional
    arguments (None when they cannot be read without running the program's code), the
    call's source and where it is."""
    position = _position(frame)
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    if position is None or not lines:
        return None
    first, last, start, end = position
    text = "".join(lines[first - 1 : last]).encode()
    last_line = len("".join(lines[first - 1 : last - 1]).encode())
    segment = text[start : last_line + end].decode(errors="replace").strip()
    node = ast.parse(segment, mode="eval").body
    if not isinstance(node, ast.Call):
        return None
    function = _value_of(node.func, frame)
    if not _jitted(function):
        return None
    where = f"{os.path.basename(frame.f_code.co_filename)}:{first}"
    return function, _arguments(node, frame), segment[:200], where


def _preceding_call(frame: Any, compilation: Any) -> tuple[list[Any] | None, str, str] | None:
    """The last call of ``compilation``'s function in the frame's code before where the
    frame stands: its arguments as the frame sees them now, its source, where it is."""
    filename = frame.f_code.co_filename
    source = "".join(linecache.getlines(filename, frame.f_globals))
    if not source:
        return None
    here = frame.f_lineno
    begins = frame.f_code.co_firstlineno
    found = None
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not begins <= node.lineno <= here:
            continue
        if found is not None and node.lineno < found.lineno:
            continue
        function = _value_of(node.func, frame)
        if _jitted(function) and f"jit_{getattr(function, '__name__', '')}" == compilation.module:
            found = node
    if found is None:
        return None
    text = (ast.get_source_segment(source, found) or "")[:200]
    return _arguments(found, frame), text, f"{os.path.basename(filename)}:{found.lineno}"


def _position(frame: Any) -> tuple[int, int, int, int] | None:
    """The source range of the instruction a frame is at (Python 3.11 and later)."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return None
    for i, position in enumerate(positions()):
        if i == frame.f_lasti // 2:
            return None if None in position else position
    return None


def _jitted(value: Any) -> bool:
    return type(value).__name__ == "PjitFunction"


def _arguments(node: ast.Call, frame: Any) -> list[Any] | None:
    """The call's positional arguments, ``*args`` spread (a worker's ``fn(*args,
    **kwargs)``); None when one cannot be read, or a keyword is passed (its place among the
    parameters is the function's to say)."""
    for keyword in node.keywords:
        spread = _value_of(keyword.value, frame) if keyword.arg is None else _UNREAD
        if not (isinstance(spread, dict) and not spread):  # only an empty ``**kwargs``
            return None
    values: list[Any] = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            spread = _value_of(a.value, frame)
            if not isinstance(spread, (tuple, list)):
                return None
            values.extend(spread)
            continue
        value = _value_of(a, frame)
        if value is _UNREAD:
            return None
        values.append(value)
    return values


_UNREAD = object()


def _value_of(node: Any, frame: Any) -> Any:
    """A name, a constant or an attribute of one, as the frame sees it; ``_UNREAD`` for
    anything else. Attributes are read without running a descriptor (``getattr_static``):
    asking must not run the program's code."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return _UNREAD
    if isinstance(node, ast.Attribute):
        owner = _value_of(node.value, frame)
        if owner is _UNREAD:
            return _UNREAD
        try:
            value = inspect.getattr_static(owner, node.attr)
        except AttributeError:
            return _UNREAD
        return _UNREAD if hasattr(value, "__get__") and not callable(value) else value
    return _UNREAD


def _compilation(
    function: Any, arguments: list[Any] | None, compiled: dict[int, Any]
) -> tuple[int, Any, list[Any] | None] | None:
    """The compilation a call runs, and the arrays it passes the module (None when not
    known): among the function's compilations, the one its arrays fit; without arguments
    that fit, its newest."""
    mine = [(c, v) for c, v in compiled.items() if v.module == f"jit_{function.__name__}"]
    if not mine:
        return None
    if arguments is not None:
        for c, compilation in reversed(mine):
            passed = _passed(arguments, compilation)
            if passed is not None:
                return c, compilation, passed
    c, compilation = mine[-1]
    return c, compilation, None


def _passed(arguments: list[Any], compilation: Any) -> list[Any] | None:
    """The arrays a call with ``arguments`` passes the module, as numpy arrays of its
    parameters' types; None when they do not fit it (static arguments, another
    compilation's shapes) or an array is not ready to read."""
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves(arguments)
    if compilation.kept is None or len(leaves) != compilation.passed:
        return None
    kept = [leaves[i] for i in compilation.kept]
    if len(kept) != len(compilation.inputs):
        return None
    values = []
    for leaf, wanted in zip(kept, compilation.inputs):  # noqa: B905  # lengths checked above
        if isinstance(leaf, jax.Array) and _unready(leaf):
            return None
        dtype = jax.dtypes.canonicalize_dtype(jax.dtypes.result_type(leaf))
        value = np.asarray(leaf, dtype=dtype)
        if _tensor_type(value.shape, value.dtype) != wanted:
            return None
        values.append(value)
    return values


def _tensor_type(shape: tuple[int, ...], dtype: Any) -> str:
    """An array's type as MLIR writes a function's parameter or result: ``tensor<4x3xf32>``."""
    name = str(dtype)
    found = re.fullmatch(r"(u?)(int|float)(\d+)", name)
    element = _ELEMENT_TYPES.get(name, name if found is None else found[1] + found[2][0] + found[3])
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"
