"""The only package that touches private jaxlib APIs.

Everything here was checked against jaxlib 0.10.2. These APIs move between releases, so each
one is looked up by name at use (``lookup``). Importing this package does not import jax:
the parent process of a replay must stay free of XLA state. A replay child may take
jaxlib's objects from jaxlib alone (``alone``), without jax, when its module allows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo.compile_options import for_replay
from xla_bugkit.jaxlib_adapter import alone
from xla_bugkit.jaxlib_adapter.lookup import MIN_JAXLIB, jaxlib_version
from xla_bugkit.jaxlib_adapter.lookup import attr as _attr
from xla_bugkit.jaxlib_adapter.lookup import first as _first
from xla_bugkit.jaxlib_adapter.lookup import lacks as _lacks
from xla_bugkit.jaxlib_adapter.lookup import module as _module

__all__ = ["MIN_JAXLIB", "jaxlib_version"]

# Private jaxlib objects carry no usable stubs.
Executable = Any
# One per-compile DebugOptions setting (CompileOptions.env_option_overrides): a bool field
# takes only a bool; numbers, enums and strings parse from their text.
Override = tuple[str, bool | str]


def start_alone() -> bool:
    """Take jaxlib's objects from jaxlib alone in this process, never importing jax, where
    this jaxlib allows (``alone``); ``with_jax`` goes back. Returns whether it does."""
    return alone.start()


def with_jax() -> None:
    """Take jaxlib's objects through jax from now on (a module needs what jax sets up)."""
    if alone.active():
        alone.stop()
        # jax registers its custom-call targets with XLA as its backends start.
        _backends()


def _lib() -> Any:
    return alone.lib() if alone.active() else _module("jax._src.lib")


def _xla_client() -> Any:
    return _attr(_lib(), "xla_client", "xla_client")


def _hlo() -> Any:
    """The HLO module bindings: ``jax._src.lib.hlo`` from jaxlib 0.10.2; before it, the
    same names on ``jax._src.lib._jax``, and before 0.6 on ``xla_extension``."""
    lib = _lib()
    for name in ("hlo", "_jax", "xla_extension"):
        found = getattr(lib, name, None)
        if found is not None and hasattr(found, "HloModule"):
            return found
    raise _lacks("the HLO module bindings (jax._src.lib.hlo)")


def _backends() -> dict[str, Any]:
    if alone.active():
        return alone.backends()
    backends = _attr(_module("jax._src.xla_bridge"), "backends", "xla_bridge.backends")
    try:
        return dict(backends())
    except (RuntimeError, AssertionError) as e:
        # No backend initialised at all: JAX_PLATFORMS names only absent platforms (jaxlib
        # 0.10.2 fails an internal assert there rather than raising RuntimeError), or its
        # plugin's library would not load.
        _BACKEND_ERRORS.append(str(e).strip())
        return {}


# Why no backend started, as jax said it ("Unable to initialize backend 'tpu': INTERNAL:
# Failed to open ..."), for the child's refusal.
_BACKEND_ERRORS: list[str] = []


def backend_error() -> str:
    """What jax said when its backends would not start in this process ("": nothing)."""
    return next((e for e in reversed(_BACKEND_ERRORS) if e), "")


def preload() -> None:
    """Import what a replay takes from jax (seconds), or from jaxlib alone, before it is
    asked for anything."""
    if not alone.active():
        _module("jax._src.xla_bridge")
    _lib()


def available_platforms() -> list[str]:
    """Platforms with a working backend in this process ("cpu", "cuda", ...)."""
    if alone.active():
        return [alone.PLATFORM]  # without making its client yet
    return sorted(_backends())


# How a replay child says the module's platform has no backend in it (``elsewhere``).
UNAVAILABLE = "is not available here"


def _client(platform: str) -> Any:
    backends = _backends()
    if platform not in backends:
        raise BugkitError(f"platform {platform!r} {UNAVAILABLE}")
    return backends[platform]


def device_count(platform: str) -> int:
    """How many devices ``platform`` has in this process (0 when it is absent)."""
    backends = _backends()
    return len(backends[platform].devices()) if platform in backends else 0


def _parsable_print_options() -> Any:
    options_cls = _attr(_hlo(), "HloPrintOptions", "HloPrintOptions")
    options = _attr(options_cls, "short_parsable", "HloPrintOptions.short_parsable")()
    # Elided constants and references to absent instructions would not parse back.
    options.print_large_constants = True
    options.print_control_dependencies = False
    return options


def module_text(module_bytes: bytes) -> str:
    """Parsable HLO text (no metadata) of a serialized HloModuleProto.

    Raises ``BugkitError`` when this jaxlib cannot load the proto: ``hlo_to_stablehlo``
    ignores such errors, so this doubles as the validation step.
    """
    module_cls = _attr(_hlo(), "HloModule", "HloModule")
    load = _attr(module_cls, "from_serialized_hlo_module_proto", "HloModule deserialization")
    try:
        module = load(module_bytes)
    except Exception as e:  # jaxlib raises its own status exception types
        raise BugkitError(f"this jaxlib ({jaxlib_version()}) cannot load the HLO: {e}") from e
    return str(module.to_string(_parsable_print_options()))


def hlo_text_to_module_bytes(text: str) -> bytes:
    """Parse HLO text into a serialized HloModuleProto."""
    parse = _attr(_hlo(), "hlo_module_from_text", "hlo_module_from_text")
    try:
        module = parse(text)
    except Exception as e:  # jaxlib raises its own status exception types
        raise BugkitError(f"this jaxlib ({jaxlib_version()}) cannot parse the HLO: {e}") from e
    return bytes(module.as_serialized_hlo_module_proto())


def hlo_proto_to_stablehlo(module_bytes: bytes) -> bytes:
    """StableHLO for a serialized HloModuleProto (validate it with ``module_text``): bytecode,
    or text from releases before 0.4.36."""
    paths = ("_jax.mlir.hlo_to_stablehlo", "xla_extension.mlir.hlo_to_stablehlo")  # < 0.6
    try:
        convert = _first(_lib(), paths, "mlir.hlo_to_stablehlo")
    except BugkitError:  # before 0.4.36: through an XlaComputation, as MLIR text
        path = "xla_extension.mlir.xla_computation_to_mlir_module"
        to_mlir = _attr(_lib(), path, "mlir.hlo_to_stablehlo")
        computation = _attr(_xla_client(), "XlaComputation", "XlaComputation")(module_bytes)
        return str(to_mlir(computation)).encode("utf-8")
    return bytes(convert(module_bytes))


ArrayType = tuple[np.dtype[Any], tuple[int, ...]]


def _program_shape(module_bytes: bytes) -> Any:
    computation_cls = _attr(_xla_client(), "XlaComputation", "XlaComputation")
    return computation_cls(module_bytes).program_shape()


def parameter_types(module_bytes: bytes) -> list[ArrayType]:
    """(dtype, dimensions) of each entry parameter; tuple parameters are refused."""
    result: list[ArrayType] = []
    for shape in _program_shape(module_bytes).parameter_shapes():
        if shape.is_tuple():
            raise BugkitError("the module takes a tuple parameter; cannot generate inputs for it")
        result.append((np.dtype(shape.numpy_dtype()), tuple(shape.dimensions())))
    return result


def result_types(module_bytes: bytes) -> list[ArrayType]:
    """(dtype, dimensions) of each array of the entry's result, tuples flattened."""
    todo, result = [_program_shape(module_bytes).result_shape()], []
    while todo:
        shape = todo.pop(0)
        if shape.is_tuple():
            todo[:0] = list(shape.tuple_shapes())
        else:
            result.append((np.dtype(shape.numpy_dtype()), tuple(shape.dimensions())))
    return result


def initialize_lapack() -> bool:
    """Set up jaxlib's CPU LAPACK kernels (``lapack_*_ffi`` custom calls) in this process.

    JAX does this itself when it lowers a linalg op, and ``jax.export`` does it for a
    deserialised module; a module compiled straight from a dump gets neither, and its LAPACK
    calls then segfault when they run (seen with 0.10.2). Returns False when this jaxlib has
    no such step (then nothing is done: its kernels need none, or cannot be set up here).
    """
    for owner, path in (
        ("jax._src.lax.linalg", "initialize_lapack"),  # jaxlib 0.6 to 0.10 at least
        ("jaxlib.lapack", "_lapack.initialize"),  # what that function calls
    ):
        try:
            initialize = _attr(_module(owner), path, "LAPACK initialisation")
        except BugkitError:
            continue
        initialize()
        return True
    return False


def custom_call_targets(platform: str) -> set[str]:
    """Custom-call targets registered with XLA for ``platform`` in this process; none known
    before jaxlib 0.4.2x, which cannot list them (the module's then go through jax)."""
    targets = getattr(_xla_client(), "custom_call_targets", None)
    if targets is None:
        return set()
    try:
        return set(targets(platform))
    except Exception:  # an unknown platform name: nothing is registered for it
        return set()


def _compile_options(
    serialized: bytes | None,
    num_replicas: int,
    num_partitions: int,
    overrides: Sequence[Override] = (),
    recorded_flags: bool = True,
) -> Any:
    options_cls = _attr(_xla_client(), "CompileOptions", "CompileOptions")
    recorded: Sequence[Override] = ()
    if serialized is not None:
        # Only the allowlisted fields of a recorded proto reach XLA, whoever calls.
        taken = for_replay(serialized)
        recorded = taken.overrides if recorded_flags else ()
        # A static constructor in jaxlib 0.10.2: it returns the options, leaving ``self`` be.
        options = _attr(options_cls, "ParseFromString", "CompileOptions.ParseFromString")(
            taken.serialized
        )
    else:
        options = options_cls()
        options.num_replicas = num_replicas
        options.num_partitions = num_partitions
    if recorded or overrides:
        # Applied over the process's XLA_FLAGS for this compile only (seen with 0.10.2: a
        # fast-math override flips a NaN-sensitive result either way), which lets one process
        # compile under the recorded flags and under the conservative ones.
        options.env_option_overrides = [*recorded, *overrides]
    if _DUMP_TO:
        # Set on the options themselves: an override (env_option_overrides) moves XLA's
        # own dumps, but not the compile's inputs that PJRT dumps beside them.
        options.executable_build_options.debug_options.xla_dump_to = _DUMP_TO[-1]
    return options


# Where this process's compiles dump for now (``dumping_to``); empty: where XLA_FLAGS says.
_DUMP_TO: list[str] = []


@contextlib.contextmanager
def dumping_to(folder: Path) -> Iterator[None]:
    """Every compile made here in the block dumps into ``folder``, not where the process's
    XLA_FLAGS say (a replay served by the program's own process, whose run's dump folder
    XLA_FLAGS names)."""
    _DUMP_TO.append(str(folder))
    try:
        yield
    finally:
        _DUMP_TO.pop()


def compile_options_layout(serialized: bytes) -> tuple[int, int]:
    """(num_replicas, num_partitions) recorded in a serialized CompileOptionsProto."""
    options = _compile_options(serialized, 1, 1)
    return max(1, int(options.num_replicas)), max(1, int(options.num_partitions))


def compile(
    mlir: bytes,
    *,
    platform: str,
    compile_options: bytes | None = None,
    num_replicas: int = 1,
    num_partitions: int = 1,
    overrides: Sequence[Override] = (),
    recorded_flags: bool = True,
) -> Executable:
    """Compile StableHLO (bytecode or text) for ``platform`` and load it on its devices.

    ``overrides`` set DebugOptions fields for this compile only. Of ``compile_options``,
    only what ``compile_options.for_replay`` allows is applied; ``recorded_flags=False``
    drops its recorded overrides too, so that only the process's XLA_FLAGS and
    ``overrides`` apply. XLA errors (an unknown override among them)
    propagate as jaxlib's own exception, whose message carries the status code the caller
    classifies.
    """
    client = _client(platform)
    options = _compile_options(
        compile_options, num_replicas, num_partitions, overrides, recorded_flags
    )
    count = max(1, int(options.num_replicas) * int(options.num_partitions))
    devices = client.devices()
    if len(devices) < count:
        raise BugkitError(f"the module needs {count} {platform} devices; {len(devices)} here")
    compile_and_load = getattr(client, "compile_and_load", None)
    if compile_and_load is None:  # before 0.6: the options' device assignment, by default
        return _attr(client, "compile", "Client.compile")(mlir, options)  # the first devices
    device_list = _attr(_xla_client(), "DeviceList", "DeviceList")(tuple(devices[:count]))
    return compile_and_load(mlir, device_list, options)


def _exact_dtypes() -> Any:
    """A context in which ``jax.device_put`` keeps 64-bit dtypes.

    With ``jax_enable_x64`` off (JAX's default, and so the replay child's), ``device_put``
    canonicalises f64/s64/u64/c128 host arrays to their 32-bit types. A module that takes
    f64 then rejects them (``INVALID_ARGUMENT: E0102: RuntimeProgramInputMismatch``), and
    the op-by-op reference would silently compute in the wrong precision.
    """
    jax = _module("jax")
    context = getattr(jax, "enable_x64", None)  # public since jax 0.6-ish
    if context is None:
        experimental = _module("jax.experimental")
        context = _attr(experimental, "enable_x64", "the enable_x64 context manager")
        return context()
    return context(True)


def _sharding(devices: Sequence[Any], op_sharding: Any) -> Any:
    cls = _attr(_module("jax._src.sharding_impls"), "GSPMDSharding", "GSPMDSharding")
    return cls(tuple(devices), op_sharding)


def _shardings(executable: Executable, which: str, count: int) -> list[Any]:
    shardings = _attr(executable, f"get_{which}_shardings", f"get_{which}_shardings")()
    if shardings is None or len(shardings) != count:
        raise BugkitError(f"the executable does not say how its {which}s are sharded")
    return list(shardings)


def execute(
    executable: Executable,
    args: Sequence[np.ndarray],
    result_types: Sequence[ArrayType] | None = None,
) -> list[np.ndarray]:
    """Run an executable on host arrays; the outputs come back as host arrays.

    On several devices each argument is split by the executable's parameter sharding and
    each output assembled by its output sharding into ``result_types`` (the unpartitioned
    module's result). Arguments reach the device with exactly their own dtypes: a module's
    parameter types are fixed, and JAX's dtype canonicalisation must not touch them.
    """
    devices = list(_attr(executable, "local_devices", "LoadedExecutable.local_devices")())
    host = [np.asarray(a) for a in args]
    if alone.active():
        if len(devices) > 1:
            raise BugkitError("jaxlib alone replays on one device; this needs jax")
        outputs = _run([alone.put(a, devices[0]) for a in host], executable)
        return [alone.host(shards[0]) for shards in outputs]
    jax = _module("jax")
    if len(devices) > 1 and result_types is None:
        raise BugkitError(f"running on {len(devices)} devices needs the result types")
    with _exact_dtypes():
        if len(devices) == 1:
            placed = [jax.device_put(a, devices[0]) for a in host]
        else:
            shardings = _shardings(executable, "parameter", len(host))
            placed = [
                jax.device_put(a, _sharding(devices, s))
                for a, s in zip(host, shardings, strict=True)
            ]
        for i, (a, p) in enumerate(zip(host, placed, strict=True)):
            if np.dtype(p.dtype) != a.dtype:
                raise BugkitError(
                    f"argument {i} ({a.dtype}) reached the device as {np.dtype(p.dtype)}"
                )
        outputs = _run(placed, executable)
        if len(devices) == 1:
            return [np.asarray(shards[0]) for shards in outputs]
        assert result_types is not None
        return _assemble(executable, devices, outputs, result_types)


def _run(placed: Sequence[Any], executable: Executable) -> list[list[Any]]:
    """Each output's per-device arrays, once computed."""
    run = _attr(executable, "execute_sharded", "LoadedExecutable.execute_sharded")
    results = run(list(placed))
    outputs = _attr(results, "disassemble_into_single_device_arrays", "ExecuteResults")()
    # An output XLA failed to compute (out of memory, a kernel's error) aborts the process
    # when read (raw_buffer.h: buffer_.IsConcrete()); waiting on it raises its status.
    for shards in outputs:
        for shard in shards:
            shard.block_until_ready()
    return [list(shards) for shards in outputs]


def _assemble(
    executable: Executable,
    devices: Sequence[Any],
    outputs: Sequence[Sequence[Any]],
    result_types: Sequence[ArrayType],
) -> list[np.ndarray]:
    """Each output's per-device shards put back together into one array."""
    if len(outputs) != len(result_types):
        raise BugkitError(f"{len(outputs)} outputs, but the module returns {len(result_types)}")
    assembled = []
    shardings = _shardings(executable, "output", len(outputs))
    for shards, sharding, (dtype, dims) in zip(outputs, shardings, result_types, strict=True):
        where = _sharding(devices, sharding).devices_indices_map(dims)
        full = np.empty(dims, dtype)
        for shard in shards:
            (device,) = shard.devices()
            full[where[device]] = np.asarray(shard)
        assembled.append(full)
    return assembled
