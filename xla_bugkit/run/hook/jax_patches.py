"""The recorder's patches of private jax internals: the one place the hook touches them.

``xla_bugkit.jaxlib_adapter`` is the adapter the rest of xla-bugkit uses for private APIs,
but it cannot be imported here: this module runs inside the user's interpreter, which may
not have xla-bugkit installed, and importing it would cost the program time. So it keeps its
own small set of patches, each checked against the names it needs and skipped (with a
``hook_error`` record) when a jax release moved them. Checked against jax 0.10.2.

Patched, each wrapper calling the original with the same arguments and returning its result
or raising its exception unchanged (and left out of the tracebacks jax filters, as jax's own
frames are: ``traceback_util.register_exclusion``):

- ``xla_bridge._init_backend``: before the first backend starts, collect's ``--xla_dump_to``
  is moved to a folder of this process's own (``_own_dump_dir``) and XLA's cache flags are
  taken out (``caches``); afterwards, the ``backend`` record.
- ``compilation_cache.is_cache_used`` and ``is_persistent_cache_enabled``: always no, so the
  program's own compilation cache is neither read nor written (``caches``).
- ``compiler.compile_or_get_cached``: ``compile`` / ``compiled`` records, with the XLA
  options the program passed to that compile (``options``).
- nothing patched: the recorder's answer to collect's question before a stop
  (``waiting.state``) finds a call under way that took jax's C++ fast path.
- ``pxla.ExecuteReplicated.__call__``: ``execute`` / ``executed`` records (``pending``, and
  later ``ready``, when the device was still computing as dispatch returned: ``ready.py``;
  ``fed``, the earlier executions whose outputs the call takes: ``outputs.py``),
  and the arguments
  (``args``) of multi-device executions, which XLA writes no snapshot of, and, when collect
  turned XLA's snapshots off, of each compiled function's first execution and of one that
  raises. Calls that jax's C++ fast path dispatches never reach Python and are not
  recorded; the first call of each compiled function always comes through here.
"""

from __future__ import annotations

import os
import re
from typing import Any

# jax config options a replay or a reader of the report may need.
_CONFIG = (
    "jax_enable_x64",
    "jax_platforms",
    "jax_default_matmul_precision",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_numpy_rank_promotion",
    "jax_enable_compilation_cache",
    "jax_compilation_cache_dir",
    "jax_debug_nans",
    "jax_disable_jit",
)
OLDEST = (0, 4, 30)  # older releases lay these internals out differently
_LISTED = 64  # devices listed in the backend record; a pod's thousands are counted only


def apply(recorder: Any) -> None:
    import jax

    version = tuple(int(p) for p in re.findall(r"\d+", jax.__version__)[:3])
    if version < OLDEST:
        recorder.write("hook_error", error=f"jax {jax.__version__} is older than the hook knows")
        return
    for patch in (
        _hide_own_frames,
        _quiet_jaxpr_dumps,
        _defeat_caches,
        _patch_backend,
        _patch_compile,
        _patch_execute,
        _answer_state,
    ):
        try:
            patch(recorder)
        except Exception as e:  # the others still help
            recorder.write("hook_error", error=f"{patch.__name__}: {type(e).__name__}: {e}")


def _hide_own_frames(recorder: Any) -> None:
    """The patches' wrappers stand between the program's call and jax's: jax's traceback
    filtering leaves them out, as it leaves out its own frames, so that the program's
    tracebacks read as they do without the hook."""
    from jax._src import traceback_util

    traceback_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)))


def _defeat_caches(recorder: Any) -> None:
    """The program's own compilation cache is neither read nor written (``caches``)."""
    recorder.load_sibling("caches").defeat(recorder)


# --- backend start -------------------------------------------------------------------


def _patch_backend(recorder: Any) -> None:
    from jax._src import xla_bridge

    original = xla_bridge._init_backend
    state = {"started": False}
    recorder.flags_at_backend = True

    def _init_backend(platform: str) -> Any:
        if not state["started"]:
            state["started"] = True
            recorder.load_sibling("xla_flags").keep(recorder)  # the program's own are set by now
            recorder.load_sibling("caches").drop_cache_flags(recorder)
            _own_dump_dir(recorder)
        backend = original(platform)
        _record_backend(recorder, backend)
        return backend

    setattr(xla_bridge, "_init_backend", _init_backend)  # noqa: B010  # a private name


def _own_dump_dir(recorder: Any) -> None:
    """The first process of the run to start a backend keeps collect's folder, so a
    single-process run dumps exactly where it always did; every later one (another rank, a
    worker) moves to ``<folder>/<pid>``, since ranks given one folder write the same
    module numbers into it."""
    ours = os.environ.get("XLA_BUGKIT_DUMP_DIR")
    value = os.environ.get("XLA_FLAGS")
    if not ours or not value:
        return
    claim = os.path.join(recorder.folder, "dump-root")
    try:
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        if _claimed_by_this_pid(claim):
            return  # this process's next image (os.execv): the folder is still its own
        own = os.path.join(ours, str(os.getpid()))
        xla_flags = recorder.load_sibling("xla_flags")
        os.environ["XLA_FLAGS"] = xla_flags.own_dump_flags(value, ours, own)
        _own_jaxpr_dir(ours, own)
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)


def _claimed_by_this_pid(claim: str) -> bool:
    try:
        with open(claim, encoding="ascii") as f:
            return f.read().strip() == str(os.getpid())
    except (OSError, ValueError):
        return False


def _quiet_jaxpr_dumps(recorder: Any) -> None:
    """Keep jax's "Dumping jaxpr for f to DIR." out of the program's logs where DIR is ours:
    jax logs it on the root logger at INFO, which a program that logs at INFO would show.
    A filter on the root logger itself, which the program's own logging setup leaves be."""
    ours = os.environ.get("XLA_BUGKIT_DUMP_DIR")
    if not ours or not os.environ.get("JAX_DUMP_IR_TO", "").startswith(ours):
        return
    import logging

    def ours_only(record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        dumped_to = str(args[1]) if len(args) == 2 else ""
        return not (record.msg == "Dumping jaxpr for %s to %s." and dumped_to.startswith(ours))

    logging.getLogger().addFilter(ours_only)
    # jax logs it with logging.log(), which configures the root logger (basicConfig) when it
    # has no handler yet: a program that sets up its logging after its first jitted call
    # would find it done, and its format and level ignored. Bare, jax dumps nothing and
    # never calls it; the root logger's own method logs without configuring anything.
    try:
        from jax._src import jaxpr_util

        setattr(jaxpr_util, "logging", _LoggingWithoutConfig(logging))  # noqa: B010
    except Exception as e:  # a jax release that moved it: the program's logging may change
        recorder.write("hook_error", error=f"jaxpr dump logging: {type(e).__name__}: {e}")


class _LoggingWithoutConfig:
    """The ``logging`` module as jax's jaxpr dump uses it, less the root logger's set-up."""

    def __init__(self, logging: Any) -> None:
        self._logging = logging

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logging, name)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self._logging.getLogger().log(level, msg, *args, **kwargs)


def _own_jaxpr_dir(ours: str, own: str) -> None:
    """Where this process's jaxprs go: with its own dumps (jax read JAX_DUMP_IR_TO at import;
    the folder is looked up at each dump)."""
    jaxprs = os.path.join(ours, "jaxprs")  # hook.JAXPRS: this module imports nothing of ours
    if os.environ.get("JAX_DUMP_IR_TO") != jaxprs:
        return  # the user's own setting
    import jax

    os.environ["JAX_DUMP_IR_TO"] = os.path.join(own, "jaxprs")
    jax.config.update("jax_dump_ir_to", os.environ["JAX_DUMP_IR_TO"])  # type: ignore[no-untyped-call]


def _record_backend(recorder: Any, backend: Any) -> None:
    try:
        devices = backend.devices()
        flags = os.environ.get("XLA_FLAGS", "")
        recorder.write(
            "backend",
            platform=str(backend.platform),
            rank=int(backend.process_index()),
            processes=len({d.process_index for d in devices}),
            devices=int(backend.device_count()),
            local_devices=int(backend.local_device_count()),
            # What the environment report lists (as jax.print_environment_info does), seen
            # here at no cost instead of by a probe that imports jax again.
            device_kind=str(devices[0].device_kind) if devices else "",
            # The runtime's own build ("TFRT TPU v5 lite\nBuilt on ... cl/933746096").
            platform_version=str(getattr(backend, "platform_version", "")),
            device_list=[f"{d!r} {d} kind={d.device_kind!r}" for d in devices[:_LISTED]],
            env={k: os.environ[k] for k in ("XLA_FLAGS", "LIBTPU_INIT_ARGS") if k in os.environ},
            jax_config=_config(),
            dump_dir=recorder.load_sibling("xla_flags").dump_dir_of(flags),
            versions=recorder.versions(),
        )
    except Exception as e:
        recorder.write("hook_error", error=f"backend record: {type(e).__name__}: {e}")


def _config() -> dict[str, str]:
    import jax

    out = {}
    for name in _CONFIG:
        try:
            out[name] = repr(getattr(jax.config, name))
        except Exception:  # an option this jax does not have
            continue
    return out


# --- compilations and executions -----------------------------------------------------

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


def _patch_compile(recorder: Any) -> None:
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


def _patch_execute(recorder: Any) -> None:
    from jax._src.interpreters import pxla

    first_arguments = bool(getattr(recorder, "first_arguments", False))
    ready = recorder.load_sibling("ready")
    outputs = recorder.load_sibling("outputs")
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
        saved = False
        if len(getattr(self, "_local_devices", ())) > 1:
            _save_arguments(recorder, n, self, args)
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


def _inputs_failed(recorder: Any, outputs: Any, ready: Any, args: tuple[Any, ...]) -> None:
    """A ``ready`` record with the error of each earlier execution whose outputs, among
    ``args``, are computed and hold an error: the runtime's word that it failed, which the
    watcher (``ready``) misses where the program dropped those outputs before its next poll."""
    for m, error in outputs.failures(args, ready):
        recorder.write("ready", n=m, error=error)


def _save_arguments(recorder: Any, n: int, call: Any, args: tuple[Any, ...]) -> None:
    """The arguments of a multi-device execution, which XLA writes no snapshot of, saved
    before it runs (so a crash in it keeps them), within the recorder's size budget."""
    try:
        kept = getattr(call, "kept_var_idx", None)
        params = [a for i, a in enumerate(args) if kept is None or i in kept]
        # Another process holds part of a global array: its values are not here to save.
        if not all(getattr(a, "is_fully_addressable", True) for a in params):
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


def _answer_state(recorder: Any) -> None:
    """collect's question before a stop is answered by ``waiting.state``, loaded (by file
    path, as this module is) only when asked: a run that is never stopped pays nothing."""

    def answer() -> dict[str, Any]:
        waiting = recorder.load_sibling("waiting")
        return waiting.state(recorder, _COMPILED)  # type: ignore[no-any-return]

    recorder.answer_with(answer)
