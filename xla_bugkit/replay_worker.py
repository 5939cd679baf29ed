"""The replay child: ``python -m xla_bugkit.replay_worker SPEC.json``.

Runs in its own process (started by ``replay.replay``) because XLA may abort, hang or eat
memory, and because XLA_FLAGS are read once per process. It tells the parent where it got to
with marker lines on stdout and leaves its arrays in the spec's ``out`` folder:

* mode "test": compile the module with the recorded flags, run it, save ``test.npz``;
* mode "reference": under conservative flags, run the module op by op (``opbyop.npz``) and
  compiled whole (``conservative.npz``); a reference that fails leaves ``<name>.error``.

Both modes save the snapshot's recorded result as ``recorded.npz`` when there is one.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from xla_bugkit import _jaxlib, opbyop
from xla_bugkit.errors import BugkitError

MARKER = "XLA_BUGKIT"
PHASE = f"{MARKER}_PHASE: "  # compile | run | done
NOT_REPLAYABLE = f"{MARKER}_NOT_REPLAYABLE: "
NEEDS_DEVICES = f"{MARKER}_NEEDS_DEVICES: "
INPUTS = f"{MARKER}_INPUTS: "
EXIT_NOT_REPLAYABLE = 3
EXIT_NEEDS_DEVICES = 4

# Host callbacks run Python code of the original process; they cannot be replayed.
CALLBACK_TARGETS = re.compile(r"python.*callback|callback.*python|^xla_.*_callback$")
# Targets that XLA's own passes consume; they are never registered as handlers.
INTERNAL_TARGETS = frozenset(
    {
        "Sharding",
        "SPMDFullToShardShape",
        "SPMDShardToFullShape",
        "LayoutConstraint",
        "MoveToHost",
        "MoveToDevice",
        "PadToStatic",
        "SliceToDynamic",
        "annotate_device_placement",
        "AllocateBuffer",
        "X64Combine",
        "X64SplitLow",
        "X64SplitHigh",
        "ShardBarrierFrom",
        "ShardBarrierTo",
        "local_sharding",
        "xla.sdy.FuncResultSharding",
    }
)
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_REPLICAS = re.compile(r"\breplica_count=(\d+)")
_PARTITIONS = re.compile(r"\bnum_partitions=(\d+)")


class NotReplayable(BugkitError):
    """The module cannot be replayed here; the message says why."""


def say(marker: str, value: object) -> None:
    # Flushed at once: the parent reads the markers even when XLA aborts right after.
    print(f"{marker}{value}", flush=True)


def save_arrays(path: Path, arrays: Sequence[np.ndarray]) -> None:
    """Save arrays to ``.npz``; ml_dtypes types travel as raw bits plus their names."""
    stored: dict[str, np.ndarray] = {}
    names: list[str] = []
    for i, array in enumerate(arrays):
        array = np.asarray(array)
        names.append(array.dtype.name)
        plain = array.dtype.kind != "V"
        stored[f"a{i}"] = array if plain else array.view(f"u{array.dtype.itemsize}")
    stored["dtypes"] = np.array(names, dtype=str)
    np.savez(path, **stored)  # type: ignore[arg-type]


def load_arrays(path: Path) -> list[np.ndarray]:
    """Arrays saved by ``save_arrays``, with their ml_dtypes types restored."""
    with np.load(path, allow_pickle=False) as data:
        names = [str(n) for n in data["dtypes"]]
        arrays = [data[f"a{i}"] for i in range(len(names))]
    return [
        a if a.dtype.name == n else a.view(getattr(ml_dtypes, n))
        for a, n in zip(arrays, names, strict=True)
    ]


def check_module(text: str, platform: str) -> tuple[int, int]:
    """Refuse what cannot run here; return the module's (replicas, partitions)."""
    targets = sorted(set(_TARGET.findall(text)))
    for target in targets:
        if CALLBACK_TARGETS.search(target):
            raise NotReplayable(
                f"the module calls back into Python (custom-call {target}); "
                "host callbacks cannot run outside the original process"
            )
        if target.startswith("xla.sdy.") and target not in INTERNAL_TARGETS:
            # Shardy's markers only compile inside its partitioner, which this replay
            # (single device, via the HLO -> StableHLO round trip) does not drive.
            raise NotReplayable(
                f"the module is partitioned with Shardy (custom-call {target}); "
                "multi-device replay is not supported yet"
            )
    registered = _jaxlib.custom_call_targets(platform)
    missing = [t for t in targets if t not in registered and t not in INTERNAL_TARGETS]
    if missing:
        raise NotReplayable(
            f"custom-call target {missing[0]!r} is not registered for {platform} here "
            "(its library must be loaded)"
        )
    header = text.split("\n", 1)[0]
    replicas = _REPLICAS.search(header)
    partitions = _PARTITIONS.search(header)
    return (
        int(replicas.group(1)) if replicas else 1,
        int(partitions.group(1)) if partitions else 1,
    )


def _generated(module_bytes: bytes, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays: list[np.ndarray] = []
    for dtype, dims in _jaxlib.parameter_types(module_bytes):
        if dtype == np.bool_:
            arrays.append(rng.integers(0, 2, dims).astype(np.bool_))
        elif dtype.kind in "iu" or dtype.name.startswith(("int", "uint")):
            # Small values: integers often index, and out-of-range indices are clamped anyway.
            arrays.append(rng.integers(0, 4, dims).astype(dtype))
        elif dtype.kind == "c":
            arrays.append(
                (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
            )
        else:
            arrays.append(rng.standard_normal(dims).astype(dtype))
    return arrays


def load_inputs(spec: dict[str, Any], module_bytes: bytes, out: Path) -> list[Any]:
    """The snapshot's arguments (saving its recorded result), or seeded generated ones."""
    from xla_bugkit import hlo_proto, literal

    if spec["snapshot"] and spec["use_data"]:
        snapshot = hlo_proto.read_snapshot(spec["snapshot"])
        try:
            args = [literal.literal_to_numpy(a) for a in snapshot.arguments]
            if snapshot.HasField("result"):
                save_arrays(
                    out / "recorded.npz", opbyop.leaves(literal.literal_to_numpy(snapshot.result))
                )
        except BugkitError as e:
            raise NotReplayable(str(e)) from e
        say(INPUTS, "snapshot")
        return args
    say(INPUTS, f"generated (seed {spec['seed']})")
    return list(_generated(module_bytes, int(spec["seed"])))


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def run_test(
    spec: dict[str, Any], module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> None:
    say(PHASE, "compile")
    mlir, options = _read(spec["mlir"]), _read(spec["compile_options"])
    if mlir is None:
        mlir = _jaxlib.hlo_proto_to_stablehlo(module_bytes)
        options = None
    exe = _jaxlib.compile(
        mlir,
        platform=spec["platform"],
        compile_options=options,
        num_replicas=layout[0],
        num_partitions=layout[1],
    )
    say(PHASE, "run")
    outputs = _jaxlib.execute(exe, [np.asarray(a) for a in args])
    save_arrays(Path(spec["out"]) / "test.npz", outputs)
    say(PHASE, "done")


def run_reference(spec: dict[str, Any], module_bytes: bytes, text: str, args: list[Any]) -> None:
    out = Path(spec["out"])
    platform = spec["platform"]
    try:
        outputs = opbyop.run_op_by_op(text, args, opbyop.compile_and_run(platform))
        save_arrays(out / "opbyop.npz", outputs)
    except Exception as e:  # the reference is best effort; the parent reports why it is missing
        (out / "opbyop.error").write_text(str(e))
    try:
        exe = _jaxlib.compile(_jaxlib.hlo_proto_to_stablehlo(module_bytes), platform=platform)
        save_arrays(out / "conservative.npz", _jaxlib.execute(exe, [np.asarray(a) for a in args]))
    except Exception as e:
        (out / "conservative.error").write_text(str(e))
    say(PHASE, "done")


def work(spec: dict[str, Any]) -> int:
    from xla_bugkit import hlo_proto

    out = Path(spec["out"])
    platform = spec["platform"]
    if platform not in _jaxlib.available_platforms():
        raise NotReplayable(
            f"platform {platform!r} is not available here (jaxlib {_jaxlib.jaxlib_version()})"
        )
    module_bytes = hlo_proto.module_bytes(hlo_proto.read_hlo_proto(spec["hlo"]))
    text = _jaxlib.module_text(module_bytes)
    layout = check_module(text, platform)
    options = _read(spec["compile_options"])
    if options is not None:
        # The HLO header omits partitions that only the compile options record (shard_map).
        recorded = _jaxlib.compile_options_layout(options)
        layout = (max(layout[0], recorded[0]), max(layout[1], recorded[1]))
    if layout[0] * layout[1] > _jaxlib.device_count(platform):
        say(NEEDS_DEVICES, layout[0] * layout[1])
        return EXIT_NEEDS_DEVICES
    args = load_inputs(spec, module_bytes, out)
    if spec["mode"] == "test":
        run_test(spec, module_bytes, args, layout)
    else:
        run_reference(spec, module_bytes, text, args)
    return 0


def main(argv: Sequence[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    try:
        return work(spec)
    except BugkitError as e:
        # XLA's own errors propagate with their traceback: the parent classifies them.
        say(NOT_REPLAYABLE, str(e).replace("\n", " "))
        return EXIT_NOT_REPLAYABLE


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
