"""jaxlib without jax: a replay child that starts in a fraction of ``import jax``'s time.

``import jax`` is most of a small module's replay (1.0-1.7 s of 1.2-1.9 s); jaxlib's own
modules load in a few tenths of a second and compile and run a dumped module just as well,
when it needs nothing that jax sets up: one CPU device, and no custom call that jax
registers (LAPACK kernels, host callbacks). ``start`` blocks jax's import for that
(``sys.modules["jax"] = None``: otherwise jaxlib's array code imports all of jax the first
time it makes an array) and ``stop`` lifts the block, for a module found to need jax after
all; jax then loads in the same process as it would have at the start.

Checked against jaxlib 0.10.2: ``batched_device_put`` wants an aval-like object and, of
the sharding, one method that jax normally adds to jaxlib's class; an array comes back to
the host by its own method, jax's ``__array__`` being absent.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from xla_bugkit.jaxlib_adapter.lookup import jaxlib_version

# The releases whose calls this module was checked against; older ones replay through jax.
FROM = (0, 7)
PLATFORM = "cpu"  # the only platform whose client jaxlib makes without jax's plugins


class _State:
    jaxlib: types.SimpleNamespace | None = None  # what jax._src.lib would have given
    client: Any = None


_state = _State()


def active() -> bool:
    """Whether this process replays through jaxlib alone (``start`` and no ``stop``)."""
    return _state.jaxlib is not None


def start() -> bool:
    """Replay through jaxlib alone from now on, where this jaxlib allows it: jax is not
    loaded yet and the release is one this module knows. Returns whether it does."""
    if active():
        return True
    if sys.modules.get("jax") is not None or not _known_release():
        return False
    sys.modules["jax"] = None  # type: ignore[assignment]
    try:
        _state.jaxlib = _namespace()
    except (ImportError, AttributeError):
        del sys.modules["jax"]
        return False
    return True


def stop() -> None:
    """Let jax load again; the caller goes on through jax (``jax._src.lib``)."""
    if active():
        _state.jaxlib = None
        if sys.modules.get("jax", ...) is None:
            del sys.modules["jax"]


def lib() -> types.SimpleNamespace:
    assert _state.jaxlib is not None, "alone.start() first"
    return _state.jaxlib


def _known_release() -> bool:
    try:
        numbers = tuple(int(part) for part in jaxlib_version().split(".")[:2])
    except ValueError:
        return False
    return numbers >= FROM


def _namespace() -> types.SimpleNamespace:
    """The names of ``jax._src.lib`` that the adapter uses, taken from jaxlib itself."""
    import importlib

    xla_client = importlib.import_module("jaxlib.xla_client")
    _jax = importlib.import_module("jaxlib._jax")
    try:
        hlo = importlib.import_module("jaxlib._hlo")
    except ImportError:
        hlo = _jax  # where releases before 0.7 kept the HLO bindings
    for owner, name in (
        (xla_client, "make_cpu_client"),
        (xla_client, "batched_device_put"),
        (xla_client, "SingleDeviceSharding"),
        (xla_client, "HloSharding"),
        (_jax, "mlir"),
        (hlo, "HloModule"),
    ):
        getattr(owner, name)  # AttributeError: this release lacks it
    return types.SimpleNamespace(xla_client=xla_client, _jax=_jax, hlo=hlo)


def backends() -> dict[str, Any]:
    if _state.client is None:
        _state.client = lib().xla_client.make_cpu_client(asynchronous=True)
    return {PLATFORM: _state.client}


class _Aval:
    """What ``batched_device_put`` reads of jax's abstract value."""

    def __init__(self, array: np.ndarray) -> None:
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim
        self.weak_type = False


def _replicated(_sharding: Any, _ndim: int) -> Any:
    return lib().xla_client.HloSharding.replicate()


def put(array: np.ndarray, device: Any) -> Any:
    """``array`` on ``device``, with exactly its own dtype (64-bit types are kept)."""
    client = lib().xla_client
    sharding_cls = client.SingleDeviceSharding
    if not hasattr(sharding_cls, "_to_xla_hlo_sharding"):
        # Of the methods jax adds to jaxlib's sharding classes, the one a put calls.
        sharding_cls._to_xla_hlo_sharding = _replicated
    sharding = sharding_cls(device)
    return client.batched_device_put(
        _Aval(array), sharding, [array], [device], True, enable_x64=True
    )


def host(array: Any) -> np.ndarray:
    """A device array as a numpy array of its own."""
    value, copied = array._single_device_array_to_np_array_did_copy()
    return np.asarray(value) if copied else np.array(value, copy=True)
