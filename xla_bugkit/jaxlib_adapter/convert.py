"""jaxlib's conversions between a module's forms, as XLA's ``hlo-opt`` makes them.

Each takes or gives a serialized ``HloModuleProto`` (the module field of a dump's
``.hlo.pb``), so that the caller converts any form to any other through it. Checked against
jaxlib 0.10.2; every name is looked up at use (``lookup``).
"""

from __future__ import annotations

from typing import Any

from xla_bugkit import jaxlib_adapter
from xla_bugkit.errors import BugkitError
from xla_bugkit.jaxlib_adapter.lookup import attr, jaxlib_version


def _computation(module_bytes: bytes) -> Any:
    cls = attr(jaxlib_adapter._xla_client(), "XlaComputation", "XlaComputation")
    return cls(module_bytes)


def _failed(what: str, error: Exception) -> BugkitError:
    message = " ".join(str(error).split())[:500]
    return BugkitError(f"this jaxlib ({jaxlib_version()}) cannot {what}: {message}")


def from_stablehlo(mlir: bytes) -> bytes:
    """The module of StableHLO (MLIR text or bytecode), as XLA's HLO."""
    convert = attr(jaxlib_adapter._lib(), "_jax.mlir.mlir_module_to_xla_computation", "MLIR to HLO")
    try:
        computation = convert(mlir, use_tuple_args=False, return_tuple=False)
    except Exception as e:  # jaxlib raises its own status exception types
        raise _failed("read the StableHLO", e) from e
    return bytes(computation.as_serialized_hlo_module_proto())


def hlo_text(module_bytes: bytes) -> str:
    """The module as XLA prints it, metadata included (what a dump's ``.txt`` holds), its
    constants whole so that it parses back."""
    jaxlib_adapter.module_text(module_bytes)  # validates: a bad proto is a clear error
    hlo = jaxlib_adapter._hlo()
    load = attr(hlo, "HloModule.from_serialized_hlo_module_proto", "HloModule deserialization")
    options = attr(hlo, "HloPrintOptions", "HloPrintOptions")()
    options.print_large_constants = True
    return str(load(module_bytes).to_string(options))


def stablehlo_text(module_bytes: bytes) -> str:
    """The module as StableHLO, in MLIR's text form."""
    jaxlib_adapter.module_text(module_bytes)
    convert = attr(jaxlib_adapter._lib(), "_jax.mlir.xla_computation_to_mlir_module", "HLO to MLIR")
    try:
        return str(convert(_computation(module_bytes)))
    except Exception as e:  # jaxlib raises its own status exception types
        raise _failed("convert the HLO to StableHLO", e) from e


def dot_graph(module_bytes: bytes) -> str:
    """The module's graph in Graphviz's DOT language, as XLA renders it."""
    jaxlib_adapter.module_text(module_bytes)
    computation = _computation(module_bytes)
    render = attr(computation, "as_hlo_dot_graph", "XlaComputation.as_hlo_dot_graph")
    return str(render())
