"""The conversion child: ``python -m xla_bugkit.convert.child SPEC.json``.

jaxlib parses the module here, never in the command's own process: XLA's parser may CHECK on
a module from someone else. jaxlib is used alone (``jaxlib_adapter.alone``): no jax is imported.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xla_bugkit import jaxlib_adapter
from xla_bugkit.errors import BugkitError
from xla_bugkit.jaxlib_adapter import convert
from xla_bugkit.replay import run_and_exit

ERROR = "XLA_BUGKIT_CONVERT_ERROR: "


def module_bytes(kind: str, data: bytes) -> bytes:
    """The serialized HloModuleProto of the input, whatever its form."""
    if kind == "module":
        jaxlib_adapter.module_text(data)  # a proto jaxlib cannot load is a clear error here
        return data
    if kind == "hlo":
        return jaxlib_adapter.hlo_text_to_module_bytes(data.decode("utf-8", "replace"))
    return convert.from_stablehlo(data)  # "mlir" text or "mlirbc"


def output(form: str, module: bytes) -> bytes:
    if form == "pb":
        return module  # the parent wraps it in an HloProto
    if form == "mlirbc":
        return jaxlib_adapter.hlo_proto_to_stablehlo(module)
    text = {
        "hlo": convert.hlo_text,
        "hlo-short": jaxlib_adapter.module_text,
        "stablehlo": convert.stablehlo_text,
        "dot": convert.dot_graph,
    }[form](module)
    return text.encode("utf-8")


def work(spec: dict[str, Any]) -> int:
    data = Path(spec["input"]).read_bytes()
    result = output(spec["form"], module_bytes(spec["kind"], data))
    Path(spec["out"]).write_bytes(result)
    return 0


def main(argv: Sequence[str]) -> int:
    jaxlib_adapter.start_alone()
    try:
        return work(json.loads(Path(argv[0]).read_text()))
    except BugkitError as e:
        print(ERROR + " ".join(str(e).split()), flush=True)
        return 2


if __name__ == "__main__":
    run_and_exit(lambda: main(sys.argv[1:]))
