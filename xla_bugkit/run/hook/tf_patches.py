"""The recorder's patch of TensorFlow: the inputs of ``tf.function(jit_compile=True)`` calls.

TensorFlow writes no HLO snapshot on CPU (and crashes with ``--xla_dump_hlo_snapshots``), so
a replay would have only generated inputs. The XLA module of a ``jit_compile`` function
takes, in order, the function's tensor inputs (flattened as ``tf.nest`` flattens them;
Python values are baked in as constants) and then the tensors and variables it captures
(``captured_inputs``); seen with tensorflow-cpu 2.21 on a function of two tensors, a Python
float and two captured variables: ``(arg0: f32[3], arg1: f64[1,4,4], arg2: f32[7,2],
arg3: s64[])``. This patch saves those values, before the call (a variable the call
updates is saved as the call found it), as ``inputs`` records naming the concrete function
(``__inference_f_46``, dumped as ``a_inference_f_46__XlaMustCompile...``);
``xla_bugkit.run.arguments`` matches them with the module's parameters by shape and type.

What is saved, within the recorder's size budget (nothing is read when over it): the first
call of each concrete function before it runs (its compilation may crash the process), and
then the newest call of each, kept in memory and written when a call raises or the process
exits. Patched: ``polymorphic_function.Function.__call__``; functions without
``jit_compile=True`` pass straight through. Checked against tensorflow-cpu 2.21.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Any

_LOCK = threading.Lock()
_NEWEST: dict[str, tuple[int, list[Any]]] = {}  # concrete function -> (n, its inputs)
_SAVED: set[str] = set()  # concrete functions whose first call was saved


def apply(recorder: Any) -> None:
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    cls = polymorphic_function.Function
    original = cls.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self, "_jit_compile", False):
            return original(self, *args, **kwargs)
        pending = _inputs(recorder, self, args, kwargs)
        try:
            return original(self, *args, **kwargs)
        except Exception:
            if pending is not None:
                _save(recorder, *pending)
            raise

    setattr(cls, "__call__", __call__)  # noqa: B010  # a method, replaced on its class
    atexit.register(_save_newest, recorder)


def _inputs(
    recorder: Any, function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, int, list[Any]] | None:
    """This call's inputs as numpy arrays, saved now if it is its function's first call;
    None when they cannot be had (or are over the budget)."""
    try:
        import tensorflow as tf

        concrete = function.get_concrete_function(*args, **kwargs)
        name = _text(concrete.name)
        values = _values(tf, concrete, args, kwargs, recorder)
        if values is None:
            return None
        n = recorder.next_n()
        with _LOCK:
            first = name not in _SAVED
            _SAVED.add(name)
            _NEWEST[name] = (n, values)
        if first:
            _save(recorder, name, n, values)
        return name, n, values
    except Exception as e:  # the call goes on, its inputs unrecorded
        recorder.write("hook_error", error=f"tf.function inputs: {type(e).__name__}: {e}")
        return None


def _values(
    tf: Any, concrete: Any, args: tuple[Any, ...], kwargs: dict[str, Any], recorder: Any
) -> list[Any] | None:
    """The module's parameters' values: tensor inputs, then captures; None over budget."""
    flat = tf.nest.flatten((args, kwargs), expand_composites=True)
    inputs = [x for x in flat if isinstance(x, (tf.Tensor, tf.Variable)) or _is_array(x)]
    by_handle = {id(v.handle): v for v in concrete.variables}
    captured = [by_handle.get(id(c), c) for c in concrete.captured_inputs]
    everything = inputs + captured
    size = sum(_nbytes(x) for x in everything)
    if size > recorder.budget():
        recorder.write("args_skipped", fun=_text(concrete.name), bytes=size)
        return None
    return [_numpy(x) for x in everything]


def _is_array(x: Any) -> bool:
    return type(x).__module__ == "numpy" and hasattr(x, "dtype") and hasattr(x, "shape")


def _nbytes(x: Any) -> int:
    if _is_array(x):
        return int(x.nbytes)
    count = 1
    for d in x.shape:
        count *= int(d or 0)
    return count * int(x.dtype.size)


def _numpy(x: Any) -> Any:
    import numpy as np

    if hasattr(x, "read_value"):  # a variable: its value as this call finds it
        return np.array(x.read_value().numpy())
    return np.array(x.numpy() if hasattr(x, "numpy") else x)


def _text(name: Any) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


def _save(recorder: Any, name: str, n: int, values: list[Any]) -> None:
    with contextlib.suppress(Exception):
        recorder.save_arrays(n, values, record="inputs", fun=name, framework="tensorflow")
    with _LOCK:
        if _NEWEST.get(name, (None,))[0] == n:
            del _NEWEST[name]  # written: nothing left to write at exit


def _save_newest(recorder: Any) -> None:
    with _LOCK:
        newest = sorted((n, name, values) for name, (n, values) in _NEWEST.items())
    for n, name, values in newest:
        _save(recorder, name, n, values)
