"""The only place that touches torch_xla's private APIs (``torch_xla._XLAC``), for the
native replay of a PyTorch/XLA module (``native_worker``).

torch_xla 2.9 has no call that compiles a module as it stands: its custom-op path
(``torch_xla.core.xla_builder.computation_from_module_proto``, then
``_xla_user_computation``) wraps the module in a graph of its own, as the ``to_apply`` of
one ``call`` whose operands are the input tensors, and compiles that graph with its own XLA
and the XLA flags of the process (``XLA_FLAGS``, read when its runtime starts). Layouts
and every instruction of the module are kept (seen: the dumped module of
tests/programs/ptxla_compile_crash.py aborts with the same CHECK as the program did).

Importing torch_xla takes many seconds and starts a PJRT client: only a replay child does.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import numpy as np

from xla_bugkit.errors import BugkitError

# Versions whose private API this module was written against (and seen working with).
KNOWN_VERSIONS = ("2.9",)
_DISTS = ("torch_xla", "torch-xla")
_NAME = "xla::xla_bugkit_replay"  # torch_xla's custom ops are named "xla::..."
_NEEDED = (
    "_xla_op_computation_from_module_proto",
    "_xla_user_computation",
    "_xla_warm_up_cache",
    "_set_xla_handle_special_scalars",
)


def version() -> str | None:
    """The installed torch_xla's version (without importing it); None when absent."""
    if importlib.util.find_spec("torch_xla") is None:
        return None
    for dist in _DISTS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown version"


def load() -> Any:
    """Import torch_xla (which starts its runtime) and check the calls this module uses;
    returns ``torch_xla._XLAC``."""
    import torch_xla

    found = version() or "?"
    xlac = getattr(torch_xla, "_XLAC", None)
    missing = [n for n in _NEEDED if not hasattr(xlac, n)]
    if missing:
        raise BugkitError(
            f"torch_xla {found} lacks {', '.join(missing)} (xla-bugkit knows torch_xla "
            f"{', '.join(KNOWN_VERSIONS)}): its own replay cannot run; the jaxlib one can"
        )
    return xlac


def _to_torch(array: np.ndarray) -> Any:
    import torch

    array = np.array(array, order="C")  # a copy; np.ascontiguousarray makes a scalar 1-d
    if array.dtype.kind != "V":
        return torch.from_numpy(array)
    # ml_dtypes types (bfloat16, float8_*): their bits, seen by torch as its own type.
    dtype = getattr(torch, array.dtype.name, None)
    if not isinstance(dtype, torch.dtype):
        raise BugkitError(f"torch has no {array.dtype.name} type for an input of the module")
    bits = array.view(f"u{array.dtype.itemsize}").astype(f"i{array.dtype.itemsize}")
    return torch.from_numpy(bits).view(dtype)


def _to_numpy(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach().cpu()
    try:
        return np.asarray(tensor.numpy())
    except TypeError:
        # bfloat16, float8_*: numpy gets their bits and ml_dtypes their meaning.
        import ml_dtypes

        name = str(tensor.dtype).removeprefix("torch.")
        ml = getattr(ml_dtypes, name, None)
        if ml is None:
            raise
        bits = tensor.view(getattr(torch, f"int{tensor.element_size() * 8}")).numpy()
        return np.asarray(bits).view(ml)


class Graph:
    """The module as torch_xla's lazy graph: its outputs on the XLA device, not yet run."""

    def __init__(self, module_bytes: bytes, args: Sequence[np.ndarray]) -> None:
        import torch_xla

        xlac = load()
        # 0 and 1 would become constants of torch_xla's graph instead of parameters, and XLA
        # could fold them into the module: every input stays a parameter.
        xlac._set_xla_handle_special_scalars(False)
        device = torch_xla.device()
        computation = xlac._xla_op_computation_from_module_proto(_NAME, module_bytes)
        inputs = [_to_torch(a).to(device) for a in args]
        self._outputs: list[Any] = list(xlac._xla_user_computation(_NAME, inputs, computation))
        self._xlac = xlac

    def compile(self) -> None:
        """Compile the graph (torch_xla caches the executable) without running it."""
        self._xlac._xla_warm_up_cache(self._outputs, [])

    def run(self) -> list[np.ndarray]:
        """Run it (the cached executable) and read every output back."""
        import torch_xla

        torch_xla.sync()
        return [_to_numpy(t) for t in self._outputs]
