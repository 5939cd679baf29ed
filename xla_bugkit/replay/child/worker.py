"""The replay child: ``python -m xla_bugkit.replay.child.worker SPEC.json``.

Runs in its own process (started by ``judge.replay``) because XLA may abort, hang or eat
memory. It tells the parent where it got to with marker lines on stdout and leaves its arrays
in the spec's ``out`` folder. One child does all the work, so jax is imported once:

1. compile the module with the recorded flags, run it, save ``test.npz`` (saved before any
   reference runs, so a reference that crashes or hangs cannot lose it);
2. unless the spec says ``"reference": false``, under conservative flags run the module op by
   op (``opbyop.npz``) and compiled whole (``conservative.npz``); a reference that fails
   leaves ``<name>.error`` (``references``).

Both sets of flags are per-compile DebugOptions overrides (``compiled``), not XLA_FLAGS
(which XLA reads once per process): the parent keeps XLA_FLAGS for what no override can set.
The snapshot's recorded result is saved as ``recorded.npz`` when there is one.

The child replays through jaxlib alone, never importing jax, when the module needs nothing
that jax sets up (``jaxlib_adapter.alone``: one CPU device, no custom call of jax's), and through
jax otherwise.

Started as ``worker -`` (``children.Spares``), the child imports jaxlib first and then reads
its spec from stdin, with the memory limit to set on itself: the parent gets on with its own
work (unpacking a bundle) meanwhile. Started as ``worker +`` on a platform whose opening is
costly (a TPU), it is kept: it reads one spec a line and replays each in turn (``serve``).
"""

from __future__ import annotations

import gc
import io
import json
import os
import resource
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xla_bugkit import jaxlib_adapter
from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo.compile_options import for_replay
from xla_bugkit.hlo.generated import generated
from xla_bugkit.hlo.parser import custom_call_targets
from xla_bugkit.replay import extreme
from xla_bugkit.replay.child import compiled, early, opbyop, references, replayable
from xla_bugkit.replay.protocol import (
    ENDED,
    EXIT_NEEDS_DEVICES,
    EXIT_NOT_REPLAYABLE,
    EXIT_REJECTED_FLAG,
    INPUTS,
    NAN_INPUTS,
    NEEDS_DEVICES,
    NOT_REPLAYABLE,
    PHASE,
    PID,
    RECORDED,
    REJECTED_FLAG,
    SPEC_ON_STDIN,
    SPECS_ON_STDIN,
    STARTS,
    TEST,
    UNDER,
    WITHHELD,
    arrays_path,
    phase_ended,
    run_and_exit,
    save_arrays,
    say,
)


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
        if _fits(args, module_bytes):
            say(INPUTS, "snapshot")
            if (holding := _holding_nan(args)) > 0:
                say(NAN_INPUTS, holding)
            return args
        # XLA's snapshot of a module partitioned over several processes holds this
        # process's shards: they are not the module's inputs, and run on nothing.
        say(INPUTS, f"generated (seed {spec['seed']}; the snapshot held one process's shards)")
        return generated(jaxlib_adapter.parameter_types(module_bytes), int(spec["seed"]))
    if spec.get("extreme"):
        say(INPUTS, extreme.label(spec["extreme"], int(spec["seed"])))
        types = jaxlib_adapter.parameter_types(module_bytes)
        return extreme.arrays(types, spec["extreme"], int(spec["seed"]))
    say(INPUTS, f"generated (seed {spec['seed']})")
    return generated(jaxlib_adapter.parameter_types(module_bytes), int(spec["seed"]))


def _holding_nan(args: list[Any]) -> int:
    """How many of the recorded ``args`` hold a NaN."""
    import numpy as np

    def nan(a: Any) -> bool:
        value = np.asarray(a)
        return value.dtype.kind in "fc" and bool(np.isnan(value).any())

    return sum(1 for a in args if nan(a))


def _fits(args: list[Any], module_bytes: bytes) -> bool:
    """Whether a snapshot's ``args`` have the shapes of the module's entry parameters (or
    the parameters cannot be told: a tuple's, a count the snapshot does not share)."""
    try:
        types = jaxlib_adapter.parameter_types(module_bytes)
    except BugkitError:
        return True
    if len(types) != len(args):
        return True
    pairs = zip(args, types, strict=True)
    return all(tuple(getattr(a, "shape", ())) == tuple(dims) for a, (_, dims) in pairs)


def run_module(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> None:
    say(UNDER, f"jaxlib {jaxlib_adapter.jaxlib_version()}")
    say(PHASE, "compile")
    options = compiled.read(spec["compile_options"])
    if options is not None:
        for line in for_replay(options).withheld:
            say(WITHHELD, line)
    recorded = compiled.overrides(spec["flags"])
    try:
        exe = compiled.compile_as_run(spec, module_bytes, layout, recorded)
    except Exception as e:
        name = compiled.rejected_option(e)
        if name is None or all(n != name for n, _ in recorded):
            raise
        raise compiled.FlagRejected(name) from e
    say(PHASE, "run")
    outputs = compiled.execute(exe, module_bytes, args, layout)
    save_arrays(arrays_path(Path(spec["out"]), TEST), outputs)


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
    say(PID, os.getpid())
    spec = contain(spec)
    out = Path(spec["out"])
    platform = spec["platform"]
    if platform != jaxlib_adapter.alone.PLATFORM:
        jaxlib_adapter.with_jax()  # only jax loads the other platforms' plugins
    if platform not in jaxlib_adapter.available_platforms():
        said = jaxlib_adapter.backend_error()
        raise replayable.NotReplayable(
            f"platform {platform!r} {jaxlib_adapter.UNAVAILABLE} "
            f"(jaxlib {jaxlib_adapter.jaxlib_version()})" + (f": {said}" if said else "")
        )
    module_bytes, text = _loaded(spec)
    text, printing = replayable.without_print_callbacks(text)
    if printing:
        module_bytes = jaxlib_adapter.hlo_text_to_module_bytes(text)
        spec["mlir"] = None  # the run's StableHLO still holds them
        which = "callback" if printing == 1 else "callbacks"
        said = "whose result the module does not read (jax.debug.print, jax.debug.callback)"
        say(WITHHELD, f"{printing} host {which} {said}: left out of the replay")
    targets = set(custom_call_targets(text)) - replayable.INTERNAL_TARGETS
    targets -= replayable.lowered(platform)
    if targets - jaxlib_adapter.custom_call_targets(platform):
        jaxlib_adapter.with_jax()  # whose libraries register them (LAPACK's kernels, ...)
    if any(t.startswith(replayable.LAPACK_PREFIX) for t in targets):
        # Once per process: the test and both references (op by op too) run here.
        jaxlib_adapter.initialize_lapack()
    options = compiled.read(spec["compile_options"])
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
    started = early.start(spec, module_bytes, text, args) if layout == (1, 1) else None
    try:
        run_module(spec, module_bytes, args, layout)
    finally:
        if started is not None:
            started.settle()  # a test that raised: nothing of the replay runs on after it
    if spec["reference"]:
        say(PHASE, "reference")
        references.run_reference(spec, module_bytes, text, args, layout, started)
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
    if argv[0] == SPECS_ON_STDIN:
        return serve()
    if argv[0] != SPEC_ON_STDIN:
        return replay(json.loads(Path(argv[0]).read_text()))
    # Started ahead of its module: jax is imported while the parent gets the spec ready.
    jaxlib_adapter.preload()
    text = sys.stdin.read()
    if not text:  # the parent had no module for this child
        return 0
    spec = json.loads(text)
    limit_memory(spec)
    return replay(spec)


def replay(spec: dict[str, Any]) -> int:
    """Replay one module: the status a one-module child exits with. XLA's own errors
    propagate with their traceback: the parent classifies them."""
    try:
        return work(spec)
    except BugkitError as e:
        say(NOT_REPLAYABLE, str(e).replace("\n", " "))
        return EXIT_NOT_REPLAYABLE
    except compiled.FlagRejected as e:
        say(REJECTED_FLAG, e.name)
        return EXIT_REJECTED_FLAG
    finally:
        phase_ended()


def serve() -> int:
    """Kept for several modules (``SPECS_ON_STDIN``): each spec a line of stdin, replayed
    between a ``STARTS`` and an ``ENDED`` line, until stdin ends. An error XLA raises ends
    that module's part as it would end a one-module child (its traceback, status 1), and
    the next module still runs; a crash or a hang ends the child, and the parent replays
    the next module in a fresh one. Each module sets again what it changes of the process
    (``contain``: its folder, its temporary variables; ``limit_memory``: the same limit,
    since the parent keeps a child only for modules of the same limit). A module that needed
    jax leaves it loaded, and the next replay through it rather than jaxlib alone: the
    same outputs to the bit (``benchmarks/REPLAY_CHILD.md``); on a TPU every module does."""
    jaxlib_adapter.preload()
    if isinstance(sys.stdout, io.TextIOWrapper):
        # Its markers and tracebacks (stderr, the same pipe) reach the parent in order.
        sys.stdout.reconfigure(line_buffering=True)
    for number, line in enumerate(iter(sys.stdin.readline, "")):
        say(STARTS, number)
        try:
            spec = json.loads(line)
            limit_memory(spec)
            status = replay(spec)
        except Exception:
            traceback.print_exc()
            status = 1
        for stream in (sys.stderr, sys.stdout):
            stream.flush()
        say(ENDED, f"{number} {status}")
        gc.collect()  # the module's arrays and executables, before the next one's
    return 0


if __name__ == "__main__":
    run_and_exit(lambda: main(sys.argv[1:]))
