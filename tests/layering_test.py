"""Layers point down: a module imports only from its own package and from layers below it.

The data path is the architecture (ARCHITECTURE.md): run -> choose -> replay -> bundle, with
collect and verify on top of the stages and the commands on top of everything. A new
top-level module or package must be given its layer here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "xla_bugkit"

# Each top-level module or package of xla_bugkit, by layer (bottom first). Within a layer,
# units do not import each other either.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(units.split())
    for units in (
        "errors __version__ filememo templates",
        "config proc ui _lazy",
        "hlo failure",
        "frameworks redact archive verdict jaxlib_adapter",
        "run",
        "choose",
        "replay",
        "bundle convert",
        "shrink",
        "bisect",
        "collecting verify",
        "commands notebook",
        "cli examples",
        "__main__ __init__",
    )
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def _unit(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, importing module) for every import of the package:
    those made inside functions and those for type hints only (``if TYPE_CHECKING:``) too, since
    a type-only import ties two units as surely as any other."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xla_bugkit"):
                assert node.module is not None
                if node.module == "xla_bugkit":
                    targets = [f"xla_bugkit.{a.name}" for a in node.names]
                else:
                    targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("xla_bugkit.")]
            found += [(_unit(module), _unit(t), module) for t in targets]
    return found


def test_every_unit_has_a_layer() -> None:
    units = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()}
    units = {u for u in units if not u.startswith(".") and u not in ("__pycache__", "py")}
    assert sorted(units - set(RANK)) == []


def test_imports_point_down() -> None:
    upward = [
        f"{module} imports {target} ({LAYERS[RANK[target]]!r} is not below {source})"
        for source, target, module in imports()
        if source != target and RANK[source] <= RANK[target]
    ]
    assert upward == []
