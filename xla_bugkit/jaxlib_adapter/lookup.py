"""Looking up jaxlib's private objects by name, so that a missing one is a clear error.

These APIs move between releases. Each is looked up at use, and a missing one becomes a
``BugkitError`` that names the jaxlib version and the feature, never an ``AttributeError``
traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

from xla_bugkit.errors import BugkitError

# The oldest jaxlib whose private APIs match what this package calls.
MIN_JAXLIB = "0.4.18"


def jaxlib_version() -> str:
    """The installed jaxlib version, or "not installed"."""
    try:
        module = importlib.import_module("jaxlib.version")
    except ImportError:
        return "not installed"
    return str(getattr(module, "__version__", "unknown"))


def lacks(feature: str) -> BugkitError:
    return BugkitError(
        f"this jaxlib ({jaxlib_version()}) lacks {feature}; "
        f"xla-bugkit supports jaxlib >= {MIN_JAXLIB}"
    )


def module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise lacks(f"the module {name}") from e


def attr(owner: Any, path: str, feature: str) -> Any:
    value = owner
    for part in path.split("."):
        if not hasattr(value, part):
            raise lacks(feature)
        value = getattr(value, part)
    return value


def first(owner: Any, paths: tuple[str, ...], feature: str) -> Any:
    """The first of ``paths`` that ``owner`` has: where a release keeps what an older or a
    newer one keeps elsewhere."""
    for path in paths:
        try:
            return attr(owner, path, feature)
        except BugkitError:
            continue
    raise lacks(feature)
