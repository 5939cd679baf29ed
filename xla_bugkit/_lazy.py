"""A package's public names, each imported from its module on first use (PEP 562).

A package whose ``__init__`` imported every stage would make each of its modules pay for
all of them: ``collect`` starts the program before it imports what runs after it, and the
replay child starts with what it needs and no more.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def exports(
    package: str, homes: Mapping[str, str], public: Iterable[str], namespace: Mapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``homes`` maps each public name to
    the module that defines it; ``__dir__`` lists ``public`` and what ``namespace`` (the
    package's globals) holds when it is asked, submodules imported since included."""
    public = set(public)

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return sorted(set(namespace) | public)

    return __getattr__, __dir__
