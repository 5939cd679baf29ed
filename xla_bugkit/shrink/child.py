"""One probe, in a child process: parse HLO text, compile it, run it, save the outputs.

Started either forked from the probe server (``server``) or as a fresh process
(``python -m xla_bugkit.shrink.child SPEC``, for the pass trace, whose logging settings XLA
reads only at start-up). It writes its arrays into the spec's ``out`` folder and marker lines
on stdout (``replay.protocol``); whatever XLA does to it (abort, hang) stays here.

Tasks: ``run`` (the test), ``values`` (every entry value, op by op: the reference table),
``text`` (the parsable text of a ``.hlo.pb``), ``proto`` (the HloProto of HLO text).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import jaxlib_adapter
from xla_bugkit.replay import PHASE, protocol, say
from xla_bugkit.replay.child import opbyop

INVALID = f"{protocol.MARKER}_INVALID: "  # the candidate does not parse or convert
EXIT_INVALID = 3
OUTPUTS = "outputs"
VALUES = "values"
TEXT = "module.hlo"
PROTO = "module.hlo.pb"


def _overrides(spec: dict[str, Any]) -> list[jaxlib_adapter.Override]:
    return [(str(name), value) for name, value in spec.get("overrides", [])]


def _text_task(spec: dict[str, Any]) -> int:
    from xla_bugkit.hlo import hlo_proto

    module_bytes = hlo_proto.module_bytes(hlo_proto.read_hlo_proto(spec["hlo"]))
    Path(spec["out"], TEXT).write_text(jaxlib_adapter.module_text(module_bytes), "utf-8")
    return 0


def _proto_task(spec: dict[str, Any]) -> int:
    from xla_bugkit.hlo import hlo_proto

    module_bytes = jaxlib_adapter.hlo_text_to_module_bytes(Path(spec["hlo"]).read_text("utf-8"))
    wrapper = hlo_proto.HloProto()
    wrapper.hlo_module.ParseFromString(module_bytes)
    Path(spec["out"], PROTO).write_bytes(wrapper.SerializeToString())
    return 0


def _values_task(spec: dict[str, Any], text: str, args: list[np.ndarray]) -> int:
    runner = opbyop.compile_and_run(spec["platform"], _overrides(spec))
    values = opbyop.entry_values(text, args, runner)
    arrays = {k: v for k, v in values.items() if isinstance(v, np.ndarray)}
    protocol.save_arrays(protocol.arrays_path(Path(spec["out"]), VALUES), list(arrays.values()))
    Path(spec["out"], "values.json").write_text(json.dumps(list(arrays)))
    return 0


def work(spec: dict[str, Any]) -> int:
    if spec["task"] == "text":
        return _text_task(spec)
    if spec["task"] == "proto":
        return _proto_task(spec)
    text = Path(spec["hlo"]).read_text("utf-8")
    try:
        mlir = jaxlib_adapter.hlo_proto_to_stablehlo(jaxlib_adapter.hlo_text_to_module_bytes(text))
    except Exception as e:  # the parser's and converter's status errors alike
        say(INVALID, " ".join(str(e).split())[:300])
        return EXIT_INVALID
    if opbyop_needs_lapack(text):
        jaxlib_adapter.initialize_lapack()
    args = protocol.load_arrays(Path(spec["args"]))
    if spec["task"] == VALUES:
        return _values_task(spec, text, args)
    say(PHASE, "compile")
    exe = jaxlib_adapter.compile(mlir, platform=spec["platform"], overrides=_overrides(spec))
    say(PHASE, "run")
    outputs = jaxlib_adapter.execute(exe, args)
    protocol.save_arrays(protocol.arrays_path(Path(spec["out"]), OUTPUTS), outputs)
    say(PHASE, "done")
    return 0


def opbyop_needs_lapack(text: str) -> bool:
    # jaxlib's CPU LAPACK kernels segfault when they run without being set up first.
    return 'custom_call_target="lapack_' in text


def main(argv: Sequence[str]) -> int:
    return work(json.loads(Path(argv[0]).read_text()))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
