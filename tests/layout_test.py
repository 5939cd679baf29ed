"""tests/ mirrors the package: every folder under tests/ names a unit of xla_bugkit.

The tests of ``xla_bugkit/X/Y.py`` are in ``tests/X/Y_test.py``; a folder ``tests/X/`` holds
the tests of the package ``xla_bugkit/X/``, or of the module ``xla_bugkit/X.py`` where it has
several test files. At the top of tests/ are the tests of a top-level module
(``errors_test.py`` for ``errors.py``) and those of the package as a whole, named below. The
few folders that name no unit are named below too, each with what it holds.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "xla_bugkit"

# Folders under tests/ that name no unit of the package (with everything inside them).
NOT_UNITS = {
    "helpers": "what the tests share: programs run once a session, bundles, dumps, archives",
    "programs": "the failing programs the tests run under collect, not tests themselves",
    "tpu": "the on-chip tier (-m tpu) across the stages, with what was recorded on a chip",
    "choose/data": "file names of real dumps, read by choose/'s tests",
    "failure/data": "real outputs of failing runs, read by failure/'s tests",
    "frameworks/data": "real outputs of TensorFlow and PyTorch/XLA runs",
    "run/data": "records of real runs, read by run/'s tests",
    "releases/data": "package index answers as recorded, read by releases/'s tests",
    "shrink/programs": "programs of publicly reported XLA bugs, collected by shrink's tests",
}

# Tests at the top of tests/ that are not of one top-level module: of the package as a whole.
WHOLE_PACKAGE = {
    "api_test.py": "the public API (__all__) and what importing it costs",
    "benchmarks_smoke_test.py": "benchmarks/run.py end to end on a tiny input",
    "docs_test.py": "docs/cli.md is the parser's help; every link in the docs resolves",
    "gpu_test.py": "collect and verify on a CUDA device (-m gpu)",
    "layering_test.py": "ARCHITECTURE.md's layers, held on every import",
    "layout_test.py": "this file: tests/ mirrors the package",
    "packaging_test.py": "the sdist and the wheel hold every file of the package",
    "shapes_test.py": "collect on programs of the shapes users have, each its expect.json",
    "speedups_test.py": "what makes collect fast changes nothing it produces",
    "views_test.py": "one record in every view: text, --json, exit code, API, ISSUE.md",
}


def _kept(path: Path) -> bool:
    rel = path.relative_to(TESTS)
    return "__pycache__" not in rel.parts and not any(part.startswith(".") for part in rel.parts)


def _folders() -> list[Path]:
    """The folders under tests/, less those of NOT_UNITS and everything inside them, and less
    a folder left holding nothing but Python's caches (its tests moved away)."""
    found = []
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir() and _kept(p)):
        rel = folder.relative_to(TESTS)
        if any(rel.is_relative_to(name) for name in NOT_UNITS):
            continue
        if any(f.is_file() and _kept(f) for f in folder.rglob("*")):
            found.append(rel)
    return found


def test_every_folder_names_a_unit() -> None:
    strays = [
        str(rel)
        for rel in _folders()
        if not (PACKAGE / rel).is_dir() and not (PACKAGE / rel).with_suffix(".py").is_file()
    ]
    # A folder of tests goes beside the others of its unit; one that holds no tests goes in
    # NOT_UNITS, with what it holds.
    assert strays == []


def test_every_folder_of_tests_is_a_package() -> None:
    # pytest imports a test module by its dotted name from the repository root
    # (tests.bisect.search_test); in a folder without __init__.py it would import it by its
    # bare name, and two search_test.py in two folders would collide.
    missing = [str(rel) for rel in _folders() if not (TESTS / rel / "__init__.py").is_file()]
    assert missing == []


def test_the_tests_at_the_top_are_of_a_top_level_module_or_of_the_whole_package() -> None:
    strays = [
        path.name
        for path in sorted(TESTS.glob("*_test.py"))
        if path.name not in WHOLE_PACKAGE
        and not (PACKAGE / path.name.removesuffix("_test.py")).with_suffix(".py").is_file()
    ]
    assert strays == []


def test_the_lists_name_what_is_there() -> None:
    assert [name for name in NOT_UNITS if not (TESTS / name).is_dir()] == []
    assert [name for name in WHOLE_PACKAGE if not (TESTS / name).is_file()] == []
