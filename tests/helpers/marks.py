"""The unit tier's guard: a test that starts jax (in its own process, or a real program
through the helpers) must say so with the ``jax`` marker (or ``slow``), so that the unit tier
(``-m "not jax and not slow"``) stays fast. A missing marker fails the test at once, with
the marker to add, instead of slowing the tier unseen.

``tests/conftest.py`` sets the test under way (``running``) and installs ``NoJaxImport`` for
an unmarked one; the helpers that start real programs call ``require_jax``.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from types import ModuleType

import pytest

_RUNNING: list[pytest.Item] = []
TIERS = ("jax", "slow", "frontends", "gpu", "tpu")  # markers of tests allowed to start jax


def running(item: pytest.Item | None) -> None:
    """The test under way (None: between tests)."""
    _RUNNING[:] = [] if item is None else [item]


def marked(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in TIERS)


def require_jax(what: str) -> None:
    """Fail the test under way unless it is marked as one that starts jax."""
    if _RUNNING and not marked(_RUNNING[0]):
        pytest.fail(
            f"{_RUNNING[0].nodeid} starts {what} but is not marked @pytest.mark.jax: mark it, "
            "so that the unit tier (-m 'not jax and not slow') leaves it out",
            pytrace=False,
        )


class NoJaxImport(importlib.abc.MetaPathFinder):
    """Refuses ``import jax`` (and jaxlib) in a test not marked as one that starts jax."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if fullname.split(".")[0] in ("jax", "jaxlib"):
            raise ImportError(
                f"{self.nodeid} imports {fullname} but is not marked @pytest.mark.jax: mark "
                "it, so that the unit tier leaves it out"
            )


def guard(item: pytest.Item) -> NoJaxImport | None:
    """The import guard for ``item``, installed first on sys.meta_path (None: it may)."""
    if marked(item):
        return None
    finder = NoJaxImport(item.nodeid)
    sys.meta_path.insert(0, finder)
    return finder


def unguard(finder: NoJaxImport | None) -> None:
    if finder is not None and finder in sys.meta_path:
        sys.meta_path.remove(finder)
