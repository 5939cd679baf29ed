"""The native replay child: ``python -m xla_bugkit.replay.child.native_worker SPEC.json``.

Replays a PyTorch/XLA module under torch_xla's own XLA (``_torch_xla``), the one that
failed, where the ``worker`` child replays it under jaxlib's. It speaks the same protocol
(marker lines, ``test.npz`` in the spec's ``out`` folder), so ``judge`` reads it alike, and
it never imports jax: two XLAs in one process are asking for trouble.

Every recorded flag reaches XLA through ``XLA_FLAGS`` (torch_xla has no per-compile
override), set by the parent. No references are computed here: a wrong result is the
jaxlib replay's to judge, with its op-by-op reference.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit.errors import BugkitError
from xla_bugkit.hlo import hlo_proto, literal
from xla_bugkit.hlo.generated import generated
from xla_bugkit.replay import _torch_xla, extreme
from xla_bugkit.replay.protocol import (
    EXIT_NOT_REPLAYABLE,
    INPUTS,
    NOT_REPLAYABLE,
    PHASE,
    RECORDED,
    TEST,
    arrays_path,
    run_and_exit,
    save_arrays,
    say,
)

ArrayType = tuple[np.dtype[Any], tuple[int, ...]]


def parameter_types(proto: Any) -> list[ArrayType]:
    """(dtype, dimensions) of each entry parameter, read from the HloProto itself."""
    types: list[ArrayType] = []
    for shape in hlo_proto.parameter_shapes(proto):
        if shape.element_type == hlo_proto.PrimitiveType.TUPLE:
            raise BugkitError("the module takes a tuple parameter; cannot generate inputs for it")
        dtype = literal.dtype_of(shape.element_type)
        if dtype is None:
            raise BugkitError(f"no numpy type for a {literal.format_shape(shape)} parameter")
        types.append((dtype, tuple(shape.dimensions)))
    return types


def load_inputs(spec: dict[str, Any], proto: Any, out: Path) -> list[np.ndarray]:
    """The snapshot's arguments (saving its recorded result), or seeded generated ones."""
    if spec["snapshot"] and spec["use_data"]:
        snapshot = hlo_proto.read_snapshot(spec["snapshot"])
        args = [literal.literal_to_numpy(a) for a in snapshot.arguments]
        if any(isinstance(a, tuple) for a in args):
            raise BugkitError("the snapshot has a tuple argument; torch_xla takes arrays only")
        if snapshot.HasField("result"):
            result = literal.literal_to_numpy(snapshot.result)
            flat = list(result) if isinstance(result, tuple) else [result]
            arrays = [r for r in flat if isinstance(r, np.ndarray)]
            if len(arrays) == len(flat):
                save_arrays(arrays_path(out, RECORDED), arrays)
        say(INPUTS, "snapshot")
        return [a for a in args if isinstance(a, np.ndarray)]
    types = parameter_types(proto)
    if spec.get("extreme"):
        say(INPUTS, extreme.label(spec["extreme"], int(spec["seed"])))
        return extreme.arrays(types, spec["extreme"], int(spec["seed"]))
    say(INPUTS, f"generated (seed {spec['seed']})")
    return generated(types, int(spec["seed"]))


def work(spec: dict[str, Any]) -> int:
    if spec["hlo"].endswith(".txt"):
        raise BugkitError("torch_xla's replay reads the before-optimizations .hlo.pb only")
    proto = hlo_proto.read_hlo_proto(spec["hlo"])
    out = Path(spec["out"])
    args = load_inputs(spec, proto, out)
    _torch_xla.load()  # seconds: a timeout before the compile proves nothing
    say(PHASE, "compile")
    graph = _torch_xla.Graph(hlo_proto.module_bytes(proto), args)
    graph.compile()
    say(PHASE, "run")
    save_arrays(arrays_path(out, TEST), graph.run())
    say(PHASE, "done")
    return 0


def main(argv: Sequence[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    try:
        return work(spec)
    except BugkitError as e:
        # torch_xla's own errors propagate with their traceback: the parent classifies them.
        say(NOT_REPLAYABLE, str(e).replace("\n", " "))
        return EXIT_NOT_REPLAYABLE


if __name__ == "__main__":
    run_and_exit(lambda: main(sys.argv[1:]))
