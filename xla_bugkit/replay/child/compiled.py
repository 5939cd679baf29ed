"""The module compiled in the replay child (``worker``) as its run compiled it: its flags as
per-compile DebugOptions overrides (not XLA_FLAGS, which XLA reads once per process), XLA's
refusal of one, and the run's own StableHLO and compile options where its PJRT folder has
them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xla_bugkit import jaxlib_adapter
from xla_bugkit.hlo import flags

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


def read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def compile_as_run(
    spec: dict[str, Any],
    module_bytes: bytes,
    layout: tuple[int, int],
    chosen: Sequence[jaxlib_adapter.Override],
) -> jaxlib_adapter.Executable:
    """The module compiled as the run compiled it (its PJRT folder's MLIR and options, when
    there), with the per-compile ``chosen`` overrides."""
    mlir, options = read(spec["mlir"]), read(spec["compile_options"])
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


def execute(
    exe: jaxlib_adapter.Executable, module_bytes: bytes, args: list[Any], layout: tuple[int, int]
) -> list[np.ndarray]:
    # On several devices the shards are put back together into the module's own result.
    types = jaxlib_adapter.result_types(module_bytes) if layout != (1, 1) else None
    return jaxlib_adapter.execute(exe, [np.asarray(a) for a in args], types)
