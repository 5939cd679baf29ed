"""The version of xla-bugkit, at the bottom so that every layer may name it.

The wheel's version is set in ``pyproject.toml``; this one must say the same.
"""

from __future__ import annotations

__version__ = "0.1.0"
