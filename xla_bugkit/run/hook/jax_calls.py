"""The recorder's patches of jax's compilations and executions (``jax_patches``): the
``compile`` / ``compiled`` and ``execute`` / ``executed`` records, the arguments saved, and
the answer to collect's question before a stop (``waiting``), which needs the compilations.

Loaded by file path from ``jax_patches`` (as the recorder's siblings are), inside the
program's interpreter: standard library and the program's own jax only.
"""

from __future__ import annotations

import os
from typing import Any

_MODULES: dict[int, tuple[str, int]] = {}  # id(executable) -> (module name, compile n)


class _Compiled:
    """What ``waiting`` needs of a compilation to find a call of it under way: the module,
    its parameters' and results' MLIR types, and, from its first execution, how many arrays
    jax passes it and which of them the module keeps (jax drops the arguments a function
    does not use)."""

    def __init__(self, module: str, fun: str, inputs: list[str], results: list[str]) -> None:
        self.module, self.fun, self.inputs, self.results = module, fun, inputs, results
        self.passed: int | None = None
        self.kept: list[int] | None = None


_COMPILED: dict[int, _Compiled] = {}  # compile n -> its compilation


def _describe(computation: Any) -> tuple[str, str, list[str]]:
    """The module's name, its arguments' types and its results' types, from the MLIR module
    being compiled."""
    name = _symbol(computation.operation)
    shapes, results = "", []
    try:
        main = next(op for op in computation.body.operations if _symbol(op) == "main")
        shapes = ", ".join(str(t) for t in main.type.inputs)
        results = [str(t) for t in main.type.results]
    except Exception:  # no main function, or a jax that lays it out otherwise: no shapes
        pass
    return name, shapes, results


def _symbol(op: Any) -> str:
    attributes = op.attributes
    return str(attributes["sym_name"]).strip('"') if "sym_name" in attributes else ""


def _overridden_dump_dir(options: Any) -> str | None:
    for key, value in getattr(options, "env_option_overrides", None) or ():
        if key == "xla_dump_to" and isinstance(value, str):
            return value
    return None


def _own_options(options: Any) -> list[str]:
    """The XLA options the program passed to this compile (``jax.jit(f, compiler_options=...)``,
    ``.compile(compiler_options=...)``), as flags: they reach XLA without XLA_FLAGS."""
    own = []
    for key, value in getattr(options, "env_option_overrides", None) or ():
        if isinstance(key, str) and not key.startswith("xla_dump"):
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            own.append(f"--{key}={text}")
    return own


def patch_compile(recorder: Any) -> None:
    from jax._src import compiler

    original = compiler.compile_or_get_cached

    def compile_or_get_cached(*args: Any, **kwargs: Any) -> Any:
        n = recorder.next_n()
        name, shapes = "", ""
        extra: dict[str, Any] = {}
        results: list[str] = []
        try:
            computation = args[1] if len(args) > 1 else kwargs["computation"]
            options = args[3] if len(args) > 3 else kwargs.get("compile_options")
            name, shapes, results = _describe(computation)
            extra = {"dump_to": d} if (d := _overridden_dump_dir(options)) else {}
            if own := _own_options(options):
                extra["options"] = own
        except Exception:  # the start is still worth recording, nameless
            pass
        fun = f"jit({name[4:]})" if name.startswith("jit_") else name
        recorder.write("compile", n=n, fun=fun, module=name, id=None, shapes=shapes, **extra)
        try:
            executable = original(*args, **kwargs)
        except Exception as e:
            recorder.write("compiled", n=n, error=_error(e))
            raise
        # Ctrl-C or SIGTERM (KeyboardInterrupt, SystemExit) leaves it unfinished: it was
        # still compiling when the program was stopped.
        recorder.write("compiled", n=n)
        _MODULES[id(executable)] = (name, n)
        _COMPILED[n] = _Compiled(name, fun, shapes.split(", ") if shapes else [], results)
        return executable

    setattr(compiler, "compile_or_get_cached", compile_or_get_cached)  # noqa: B010  # same


# The calls whose first execution has had its arguments saved (``FIRST_ARGUMENTS``).
_SEEN: set[int] = set()
# Each executable's executions so far in this process (its compile n, or its id).
_CALLS: dict[Any, int] = {}


def patch_fastpath(recorder: Any) -> None:
    """A call whose inputs span several processes is kept off jax's C++ fast path: its
    cache miss gives the C++ dispatch no fast-path data, which sends every later call of it
    back through Python, and so through ``patch_execute``, which saves each call's shards
    (``shards``). A job's data may go wrong at any step, not only the first; the cost is
    jax's Python dispatch on each such call."""
    from jax._src import pjit

    original = pjit._get_fastpath_data

    def _get_fastpath_data(executable: Any, out_tree: Any, args_flat: Any, *rest: Any) -> Any:
        data = original(executable, out_tree, args_flat, *rest)
        # None already for a call traced inside another (its arguments are tracers, which
        # must not be asked): only a call that ran has arrays to look at.
        if data is not None and _spans_processes(tuple(args_flat)):
            return None
        return data

    setattr(pjit, "_get_fastpath_data", _get_fastpath_data)  # noqa: B010  # as jax calls it


def patch_execute(recorder: Any) -> None:
    from jax._src.interpreters import pxla

    first_arguments = bool(getattr(recorder, "first_arguments", False))
    ready = recorder.load_sibling("ready")
    outputs = recorder.load_sibling("outputs")
    ready.patch_waits(recorder, outputs)
    # The run collect starts for a Pallas kernel's reference keeps one call's outputs.
    interpret = (
        recorder.load_sibling("pallas_interpret")
        if os.environ.get("XLA_BUGKIT_PALLAS_INTERPRET")
        else None
    )
    cls = pxla.ExecuteReplicated
    original = cls.__call__

    def __call__(self: Any, *args: Any) -> Any:
        n = recorder.next_n()
        module, c = _MODULES.get(id(self.xla_executable), ("", None))
        # The earlier executions whose outputs this call takes: an error of theirs, met here
        # (jax dispatches asynchronously), is theirs (``outputs``).
        fed = {"fed": made} if (made := outputs.makers(args)) else {}
        recorder.write("execute", n=n, module=module or str(self.name), c=c, **fed)
        compiled = _COMPILED.get(c) if c is not None else None
        if compiled is not None and compiled.passed is None:
            kept = getattr(self, "kept_var_idx", None)
            compiled.passed = len(args)
            compiled.kept = sorted(kept) if kept is not None else list(range(len(args)))
        key = c if c is not None else id(self)
        _CALLS[key] = call = _CALLS.get(key, 0) + 1
        saved = False
        if len(getattr(self, "_local_devices", ())) > 1 or _spans_processes(args):
            # XLA writes no snapshot of a call over several devices, and one over several
            # processes' devices it writes with this process's shards alone, however few:
            # its shards, each with its place, are what merge stitches the inputs from.
            _save_arguments(recorder, n, self, args, (key, call))
            saved = True
        elif first_arguments and id(self) not in _SEEN:
            # Its first call: later ones take jax's C++ fast path, which never comes here.
            _SEEN.add(id(self))
            _save_arguments(recorder, n, self, args)
            saved = True
        try:
            out = original(self, *args)
        except Exception as e:  # as for compilations, a stop leaves it unfinished
            _inputs_failed(recorder, outputs, ready, args)
            recorder.write("executed", n=n, error=_error(e))
            if first_arguments and not saved:
                _save_arguments(recorder, n, self, args)  # the call that failed, if still there
            raise
        _inputs_failed(recorder, outputs, ready, args)
        arrays = ready.leaves(out)
        outputs.made(n, arrays)
        if interpret is not None:
            shapes = ", ".join(compiled.inputs) if compiled is not None else ""
            interpret.keep_outputs(recorder, n, module, shapes, arrays)
        if ready.pending(arrays):
            # Dispatch returned, the device is still computing: ``ready`` says when it ends.
            recorder.write("executed", n=n, pending=True)
            ready.watch(recorder, n, arrays)
        elif (error := ready.failed(arrays)) is not None:
            # It failed before dispatch returned (an output XLA could not allocate, say): the
            # program meets the error only when it reads the outputs, and it is this call's.
            recorder.write("executed", n=n, error=error)
        else:
            recorder.write("executed", n=n)
        return out

    setattr(cls, "__call__", __call__)  # noqa: B010  # a method, replaced on its class


def _spans_processes(args: tuple[Any, ...]) -> bool:
    """Some argument is a global array other processes hold part of."""
    return not all(getattr(a, "is_fully_addressable", True) for a in args)


def _inputs_failed(recorder: Any, outputs: Any, ready: Any, args: tuple[Any, ...]) -> None:
    """A ``ready`` record with the error of each earlier execution whose outputs, among
    ``args``, are computed and hold an error: the runtime's word that it failed, which the
    watcher (``ready``) misses where the program dropped those outputs before its next poll."""
    for m, error in outputs.failures(args, ready):
        recorder.write("ready", n=m, error=error)


def _save_arguments(
    recorder: Any, n: int, call: Any, args: tuple[Any, ...], which: tuple[Any, int] = (None, 0)
) -> None:
    """The arguments of a multi-device execution, which XLA writes no snapshot of, saved
    before it runs (so a crash in it keeps them), within the recorder's size budget;
    ``which``: its module's key and the how-manieth execution of it this is."""
    try:
        kept = getattr(call, "kept_var_idx", None)
        params = [a for i, a in enumerate(args) if kept is None or i in kept]
        # Another process holds part of a global array: this process's shards are saved,
        # each with its place in the global array (``shards``), for merge to stitch.
        if not all(getattr(a, "is_fully_addressable", True) for a in params):
            recorder.load_sibling("shards").save(recorder, n, params, *which)
            return
        # Arguments over the whole budget are not saved, and so not waited on: a wait would
        # hold the call until its inputs are computed, which the program's own dispatch
        # does not (an error of the call's own then surfaces where the program waits).
        size = sum(int(getattr(a, "nbytes", 0) or 0) for a in params)
        if size > recorder.budget():
            recorder.write("args_skipped", n=n, bytes=size)
            return
        # An argument that an earlier computation failed to produce (out of memory) aborts
        # the process when read (raw_buffer.h: buffer_.IsConcrete()); waiting on it raises
        # its status instead. Such arguments are not saved: the program meets the error as
        # it would have, in its own call.
        for a in params:
            wait = getattr(a, "block_until_ready", None)
            if wait is not None:
                wait()
        recorder.save_arrays(n, params)
    except Exception as e:  # a value that cannot be copied to the host: no arguments kept
        recorder.write("hook_error", error=f"arguments of {n}: {type(e).__name__}: {e}")


def _error(e: Exception) -> str:
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0][:300] if first else ''}"


# --- what the process is waiting for -------------------------------------------------


def answer_state(recorder: Any) -> None:
    """collect's question before a stop is answered by ``waiting.state``, loaded (by file
    path, as this module is) only when asked: a run that is never stopped pays nothing."""

    def answer() -> dict[str, Any]:
        waiting = recorder.load_sibling("waiting")
        return waiting.state(recorder, _COMPILED)  # type: ignore[no-any-return]

    recorder.answer_with(answer)
