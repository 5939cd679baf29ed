"""xla-bugkit: turn a failing JAX/XLA program into a replayable bug bundle."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
