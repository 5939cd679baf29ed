"""Real bundles, each made once per session by the installed ``xla-bugkit collect``.

Every program fails for real (tests/programs/); build_test reads what the bundles say and
repro_test runs their repro.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from tests.helpers.programs import PROGRAMS, Collected, run_collect


@pytest.fixture(scope="session")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Collected]:
    """``bundles("compile_crash", "--no-replay")``: the bundle of a tests/programs program,
    collected once per session for each set of options (and the user's ``xla_flags``)."""
    root = tmp_path_factory.mktemp("bundles")
    made: dict[tuple[str, ...], Collected] = {}

    def get(program: str, *extra: str, xla_flags: str = "") -> Collected:
        key = (program, xla_flags, *extra)
        if key not in made:
            out = root / f"{program}-{len(made)}.zip"
            argv = [sys.executable, str(PROGRAMS / f"{program}.py")]
            made[key] = run_collect(out, argv, *extra, cwd=root, xla_flags=xla_flags)
        return made[key]

    return get
