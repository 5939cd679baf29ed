"""Layers point down: a module imports only from its own package and from layers below it.

The data path is the architecture (ARCHITECTURE.md): run -> choose -> replay -> bundle, with
collect and verify on top of the stages and the command line (``cli``) on top of everything.
A new top-level module or package must be given its layer here.
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
        "errors _version filememo templates",
        "config proc ui _lazy",
        "hlo failure",
        "frameworks platforms redact archive verdict jaxlib_adapter",
        "run",
        "choose",
        "replay",
        "bundle convert releases",
        "verify bisect shrink",
        "collecting",
        "notebook",
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


# replay/'s front door: outside it, a stage imports the names that ``replay/__init__.py``
# exports, and reaches in for these parts only: the protocol the replay children speak (and
# shrink's and repro.py's children read), collect's differential search, the extreme inputs
# repro.py replays on, what verify can say without the module's platform (``elsewhere``),
# and the child's side that other children run.
REPLAY_PARTS = frozenset({"protocol", "differential", "extreme", "elsewhere", "child"})


def test_stages_enter_replay_by_its_front_door() -> None:
    reached = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module.startswith("xla_bugkit.replay."):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "xla_bugkit.replay":
                parts = [a.name for a in node.names if a.name.islower() and a.name[0] != "_"]
                parts = [p for p in parts if (PACKAGE / "replay" / f"{p}.py").exists()
                         or (PACKAGE / "replay" / p).is_dir()]  # fmt: skip
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "xla_bugkit.replay."
            ):
                parts = [(node.module or "").split(".")[2]]
            else:
                continue
            reached += [f"{module} imports replay.{p}" for p in parts if p not in REPLAY_PARTS]
    assert reached == []


ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
_LABELS = ("on top", "stages", "bottom")


def _unit_name(text: str) -> str:
    return text.strip().removesuffix("/").removesuffix(".py")


def test_architecture_md_draws_the_layers_the_code_has() -> None:
    text = ARCHITECTURE.read_text("utf-8")
    block = text.split("## Layers", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    drawn = []
    for line in block.splitlines():
        line = line.strip()
        for label in _LABELS:
            line = line.removeprefix(label).strip()
        drawn.append(frozenset(_unit_name(u) for u in line.split(",")))
    assert drawn == list(LAYERS[::-1])


def test_architecture_md_describes_every_unit() -> None:
    text = ARCHITECTURE.read_text("utf-8")
    rows = {_unit_name(line.split("`")[1]) for line in text.splitlines() if line.startswith("| `")}
    assert sorted(set(RANK) - rows) == []
    assert sorted(rows - set(RANK)) == []
