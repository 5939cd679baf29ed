"""The replay child: ``python -m xla_bugkit.replay.child.worker SPEC.json``.

Runs in its own process (started by ``judge.replay``) because XLA may abort, hang or eat
memory. It tells the parent where it got to with marker lines on stdout and leaves its arrays
in the spec's ``out`` folder. One child does all the work, so jax is imported once:

1. compile the module with the recorded flags, run it, save ``test.npz`` (saved before any
   reference runs, so a reference that crashes or hangs cannot lose it);
2. unless the spec says ``"reference": false``, under conservative flags run the module op by
   op (``opbyop.npz``) and compiled whole (``conservative.npz``); a reference that fails
   leaves ``<name>.error``.

Both sets of flags are per-compile DebugOptions overrides, not XLA_FLAGS (which XLA reads
once per process): the parent keeps XLA_FLAGS for what no override can set. The snapshot's
recorded result is saved as ``recorded.npz`` when there is one.

The child replays through jaxlib alone, never importing jax, when the module needs nothing
that jax sets up (``jaxlib_adapter.alone``: one CPU device, no custom call of jax's), and through
jax otherwise.

Started as ``worker -`` (``children.Spares``), the child imports jaxlib first and then reads
its spec from stdin, with the memory limit to set on itself: the parent gets on with its own
work (unpacking a bundle) meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import jaxlib_adapter, platforms
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import flags
from xla_bugkit.hlo.compile_options import for_replay
from xla_bugkit.hlo.generated import generated
from xla_bugkit.hlo.parser import custom_call_targets
from xla_bugkit.replay import extreme
from xla_bugkit.replay.child import opbyop, replayable, tpu_reference
from xla_bugkit.replay.protocol import (
    CONSERVATIVE,
    EXIT_NEEDS_DEVICES,
    EXIT_NOT_REPLAYABLE,
    EXIT_REJECTED_FLAG,
    INPUTS,
    KERNEL_ONLY,
    NEEDS_DEVICES,
    NOT_REPLAYABLE,
    OPBYOP,
    PHASE,
    RECORDED,
    REJECTED_FLAG,
    SPEC_ON_STDIN,
    TEST,
    UNDER,
    WITHHELD,
    arrays_path,
    error_path,
    run_and_exit,
    save_arrays,
    say,
)

# XLA's answers to an override that is no DebugOptions field, or whose value it cannot take
# that way (a map such as xla_backend_extra_options); such a flag must go by XLA_FLAGS.
_REJECTED = re.compile(r"No such compile option: '([^']+)'|While setting option (\w+),")


class FlagRejected(Exception):
    """XLA took a recorded flag only through XLA_FLAGS; ``name`` is the flag's name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def overrides(xla_flags: Sequence[str]) -> list[jaxlib_adapter.Override]:
    """XLA flags (``--name=value``) as per-compile overrides."""
    result: list[jaxlib_adapter.Override] = []
    for flag in xla_flags:
        name, value = flags.name_of(flag).lstrip("-"), flags.value_of(flag)
        if value is None:
            result.append((name, True))  # "--xla_foo" alone turns a bool on
        elif value.lower() in ("true", "false"):
            result.append((name, value.lower() == "true"))
        else:
            result.append((name, value))
    return result


def rejected_option(error: Exception) -> str | None:
    """The override XLA refused, when that is what ``error`` says."""
    found = _REJECTED.search(str(error))
    return None if found is None else found.group(1) or found.group(2)


def load_inputs(spec: dict[str, Any], module_bytes: bytes, out: Path) -> list[Any]:
    """The snapshot's arguments (saving its recorded result), or seeded generated ones."""
    from xla_bugkit.hlo import hlo_proto, literal

    if spec["snapshot"] and spec["use_data"]:
        snapshot = hlo_proto.read_snapshot(spec["snapshot"])
        try:
            args = [literal.literal_to_numpy(a) for a in snapshot.arguments]
            if snapshot.HasField("result"):
                result = opbyop.leaves(literal.literal_to_numpy(snapshot.result))
                save_arrays(arrays_path(out, RECORDED), result)
        except BugkitError as e:
            raise replayable.NotReplayable(str(e)) from e
        say(INPUTS, "snapshot")
        return args
    if spec.get("extreme"):
        say(INPUTS, extreme.label(spec["extreme"], int(spec["seed"])))
        types = jaxlib_adapter.parameter_types(module_bytes)
        return extreme.arrays(types, spec["extreme"], int(spec["seed"]))
    say(INPUTS, f"generated (seed {spec['seed']})")
    return generated(jaxlib_adapter.parameter_types(module_bytes), int(spec["seed"]))


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def run_module(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> None:
    say(UNDER, f"jaxlib {jaxlib_adapter.jaxlib_version()}")
    say(PHASE, "compile")
    options = _read(spec["compile_options"])
    if options is not None:
        for line in for_replay(options).withheld:
            say(WITHHELD, line)
    recorded = overrides(spec["flags"])
    try:
        exe = _compile_as_run(spec, module_bytes, layout, recorded)
    except Exception as e:
        name = rejected_option(e)
        if name is None or all(n != name for n, _ in recorded):
            raise
        raise FlagRejected(name) from e
    say(PHASE, "run")
    outputs = _execute(exe, module_bytes, args, layout)
    save_arrays(arrays_path(Path(spec["out"]), TEST), outputs)


def _compile_as_run(
    spec: dict[str, Any],
    module_bytes: bytes,
    layout: tuple[int, int],
    chosen: Sequence[jaxlib_adapter.Override],
) -> jaxlib_adapter.Executable:
    """The module compiled as the run compiled it (its PJRT folder's MLIR and options, when
    there), with the per-compile ``chosen`` overrides."""
    mlir, options = _read(spec["mlir"]), _read(spec["compile_options"])
    if mlir is None:
        mlir = jaxlib_adapter.hlo_proto_to_stablehlo(module_bytes)
        options = None
    return jaxlib_adapter.compile(
        mlir,
        platform=spec["platform"],
        compile_options=options,
        num_replicas=layout[0],
        num_partitions=layout[1],
        overrides=chosen,
        # Flags given by hand replace the recorded ones, those in compile_options.pb too.
        recorded_flags=not spec["flags_given"],
    )


def _execute(
    exe: jaxlib_adapter.Executable, module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> list[np.ndarray]:
    # On several devices the shards are put back together into the module's own result.
    types = jaxlib_adapter.result_types(module_bytes) if layout != (1, 1) else None
    return jaxlib_adapter.execute(exe, [np.asarray(a) for a in args], types)


def _partitioned_conservative(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> None:
    """The conservative reference of a module that runs only partitioned (shard_map): the
    same partitioned module, compiled with the conservative flags after the recorded ones."""
    recorded = overrides(spec["flags"])

    def run(chosen: Sequence[jaxlib_adapter.Override]) -> list[np.ndarray]:
        exe = _compile_as_run(spec, module_bytes, layout, [*recorded, *chosen])
        return _execute(exe, module_bytes, args, layout)

    _conservative_run(Path(spec["out"]), overrides(spec["conservative"]), run)


def _conservative(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any]
) -> list[jaxlib_adapter.Override]:
    """Run the whole module under the conservative flags; returns the overrides this jaxlib
    knows (an older one lacks some), for the op-by-op reference to use too."""
    mlir = jaxlib_adapter.hlo_proto_to_stablehlo(module_bytes)

    def run(chosen: Sequence[jaxlib_adapter.Override]) -> list[np.ndarray]:
        exe = jaxlib_adapter.compile(mlir, platform=spec["platform"], overrides=chosen)
        return jaxlib_adapter.execute(exe, [np.asarray(a) for a in args])

    return _conservative_run(Path(spec["out"]), overrides(spec["conservative"]), run)


def _conservative_run(
    out: Path,
    chosen: list[jaxlib_adapter.Override],
    run: Callable[[Sequence[jaxlib_adapter.Override]], list[np.ndarray]],
) -> list[jaxlib_adapter.Override]:
    """Save ``run(chosen)`` (the module compiled under the conservative overrides, and run)
    as the conservative reference, or why it has none; an override this jaxlib rejects is
    left out and the run tried again. Returns the overrides kept."""
    while True:
        try:
            arrays = run(chosen)
        except Exception as e:  # the reference is best effort; the parent reports why
            name = rejected_option(e)
            if name is not None and any(n == name for n, _ in chosen):
                chosen = [(n, v) for n, v in chosen if n != name]
                continue
            error_path(out, CONSERVATIVE).write_text(str(e))
            return chosen
        save_arrays(arrays_path(out, CONSERVATIVE), arrays)
        return chosen


def run_reference(
    spec: dict[str, Any],
    module_bytes: bytes,
    text: str,
    args: list[Any],
    layout: tuple[int, int] = (1, 1),
) -> None:
    out = Path(spec["out"])
    manual = [t for t in custom_call_targets(text) if t.startswith("xla.sdy.")]
    manual = [t for t in manual if t not in replayable.INTERNAL_TARGETS]
    if manual:
        # Op by op runs the unpartitioned module on one device; a per-shard body has no
        # meaning there, and the markers around it have no one-device implementation. The
        # conservative reference compiles it partitioned, as the test does.
        reason = (
            f"the module has a Shardy manual computation (custom-call {manual[0]}, from "
            "shard_map or pmap), which runs only partitioned"
        )
        error_path(out, OPBYOP).write_text(reason)
        _partitioned_conservative(spec, module_bytes, args, layout)
        return
    if replayable.lowered(spec["platform"]) & set(custom_call_targets(text)):
        # A kernel only its platform's compiler lowers (a Pallas kernel on a TPU) runs
        # nowhere else: neither reference can.
        for stem in (OPBYOP, CONSERVATIVE):
            error_path(out, stem).write_text(KERNEL_ONLY)
        return
    chosen = _conservative(spec, module_bytes, args)
    found = platforms.find(spec["platform"])
    if found is not None and found.cpu_reference:
        tpu_reference.run(out, spec["platform"], overrides(spec["conservative"]), text, args)
        return
    try:
        runner = opbyop.compile_and_run(spec["platform"], chosen)
        save_arrays(arrays_path(out, OPBYOP), opbyop.run_op_by_op(text, args, runner))
    except Exception as e:
        error_path(out, OPBYOP).write_text(str(e))


# Where a process's own temporary files go, by what each reader of the environment looks at
# (tsl's and Python's; Bazel's test variables, which an XLA dump path may name).
_TEMP_VARIABLES = ("TMPDIR", "TMP", "TEMP", "TEST_TMPDIR", "TEST_UNDECLARED_OUTPUTS_DIR")
_PATH_KEYS = ("hlo", "hlo_text", "snapshot", "mlir", "compile_options", "out")


def contain(spec: dict[str, Any]) -> dict[str, Any]:
    """Make the spec's ``out`` folder this process's working and temporary folder, so that
    whatever XLA writes on its own (a relative path, a temporary file) stays in the replay's
    folder, which the parent deletes; returns the spec with its paths made absolute."""
    spec = {k: str(Path(v).absolute()) if k in _PATH_KEYS and v else v for k, v in spec.items()}
    scratch = Path(spec["out"]) / "tmp"
    scratch.mkdir(exist_ok=True)
    os.chdir(spec["out"])
    for name in _TEMP_VARIABLES:
        os.environ[name] = str(scratch)
    tempfile.tempdir = None  # read again from the environment
    return spec


def work(spec: dict[str, Any]) -> int:
    spec = contain(spec)
    out = Path(spec["out"])
    platform = spec["platform"]
    if platform != jaxlib_adapter.alone.PLATFORM:
        jaxlib_adapter.with_jax()  # only jax loads the other platforms' plugins
    if platform not in jaxlib_adapter.available_platforms():
        raise replayable.NotReplayable(
            f"platform {platform!r} {jaxlib_adapter.UNAVAILABLE} "
            f"(jaxlib {jaxlib_adapter.jaxlib_version()})"
        )
    module_bytes, text = _loaded(spec)
    text, printing = replayable.without_print_callbacks(text)
    if printing:
        module_bytes = jaxlib_adapter.hlo_text_to_module_bytes(text)
        spec["mlir"] = None  # the run's StableHLO still holds them
        which = "callback that only prints" if printing == 1 else "callbacks that only print"
        said = "or log (jax.debug.print, jax.debug.callback): left out of the replay"
        say(WITHHELD, f"{printing} host {which} {said}")
    targets = set(custom_call_targets(text)) - replayable.INTERNAL_TARGETS
    targets -= replayable.lowered(platform)
    if targets - jaxlib_adapter.custom_call_targets(platform):
        jaxlib_adapter.with_jax()  # whose libraries register them (LAPACK's kernels, ...)
    if any(t.startswith(replayable.LAPACK_PREFIX) for t in targets):
        # Once per process: the test and both references (op by op too) run here.
        jaxlib_adapter.initialize_lapack()
    options = _read(spec["compile_options"])
    layout = replayable.check_module(
        text, platform, pjrt=bool(spec["mlir"]) and options is not None
    )
    if options is not None:
        # The HLO header omits partitions that only the compile options record (shard_map).
        recorded = jaxlib_adapter.compile_options_layout(options)
        layout = (max(layout[0], recorded[0]), max(layout[1], recorded[1]))
    if layout != (1, 1):
        jaxlib_adapter.with_jax()  # jaxlib alone makes one device, and lacks jax's shardings
    if layout[0] * layout[1] > jaxlib_adapter.device_count(platform):
        say(NEEDS_DEVICES, f"{layout[0] * layout[1]} {jaxlib_adapter.device_count(platform)}")
        return EXIT_NEEDS_DEVICES
    args = load_inputs(spec, module_bytes, out)
    run_module(spec, module_bytes, args, layout)
    if spec["reference"]:
        say(PHASE, "reference")
        run_reference(spec, module_bytes, text, args, layout)
    say(PHASE, "done")
    return 0


def _loaded(spec: dict[str, Any]) -> tuple[bytes, str]:
    """The module as this jaxlib reads it (its proto, its parsable text): from the
    ``.hlo.pb``, or where this jaxlib cannot read that proto (a release older than the one
    that wrote it: "Instruction with id > INT_MAX" on 0.4.38), from its metadata-free text
    (``hlo_text``), said as the metadata withheld."""
    module_bytes = replayable.module_bytes(spec["hlo"])
    try:
        return module_bytes, jaxlib_adapter.module_text(module_bytes)
    except BugkitError as e:
        if not spec.get("hlo_text"):
            raise
        unread = str(e)
    module_bytes = replayable.module_bytes(spec["hlo_text"])
    text = jaxlib_adapter.module_text(module_bytes)
    withheld = "the module's metadata"
    if spec["mlir"]:
        # The run's StableHLO is as new as its proto: this jaxlib converts the text itself.
        spec["mlir"] = None
        withheld = "the run's StableHLO (pjrt/module.mlir) and the module's metadata"
    short = unread if len(unread) <= 120 else f"...{unread[-117:]}"
    said = f"{withheld}: replayed from its metadata-free text, this jaxlib cannot read the proto"
    say(WITHHELD, f"{said} ({short})")
    return module_bytes, text


def limit_memory(spec: dict[str, Any]) -> None:
    """Set the spec's ``memory_limit`` on this process, as the launcher sets a child's own
    (``proc.Limits``) when it starts with its module."""
    if memory := spec.get("memory_limit"):
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


# Set (to anything) to replay through jax even where jaxlib alone would do: the figure
# before, in benchmarks, and a way around a jaxlib-alone replay that misbehaves.
THROUGH_JAX = "XLA_BUGKIT_REPLAY_THROUGH_JAX"


def main(argv: Sequence[str]) -> int:
    if not os.environ.get(THROUGH_JAX):
        jaxlib_adapter.start_alone()
    try:
        if argv[0] != SPEC_ON_STDIN:
            return work(json.loads(Path(argv[0]).read_text()))
        # Started ahead of its module: jax is imported while the parent gets the spec ready.
        jaxlib_adapter.preload()
        text = sys.stdin.read()
        if not text:  # the parent had no module for this child
            return 0
        spec = json.loads(text)
        limit_memory(spec)
        return work(spec)
    except BugkitError as e:
        # XLA's own errors propagate with their traceback: the parent classifies them.
        say(NOT_REPLAYABLE, str(e).replace("\n", " "))
        return EXIT_NOT_REPLAYABLE
    except FlagRejected as e:
        say(REJECTED_FLAG, e.name)
        return EXIT_REJECTED_FLAG


if __name__ == "__main__":
    run_and_exit(lambda: main(sys.argv[1:]))
