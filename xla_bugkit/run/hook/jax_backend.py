"""The recorder's patch of jax's backend start (``jax_patches``): before the first backend
starts, collect's XLA flags are kept, the run's dump folder becomes this process's own and
jax's jaxpr dumps stay out of the program's log; once it has started, the ``backend`` record.

Loaded by file path from ``jax_patches`` (as the recorder's siblings are), inside the
program's interpreter: standard library and the program's own jax only.
"""

from __future__ import annotations

import os
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
_LISTED = 64  # devices listed in the backend record; a pod's thousands are counted only


def patch_backend(recorder: Any) -> None:
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


def quiet_jaxpr_dumps(recorder: Any) -> None:
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
