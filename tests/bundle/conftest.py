"""Real bundles, each made once per session by the installed ``xla-bugkit collect``.

Every program fails for real (tests/programs/); build_test reads what the bundles say and
repro_test runs their repro.py.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable

import pytest

from tests.helpers import shared
from tests.helpers.programs import PROGRAMS, Collected, run_collect


@pytest.fixture(scope="session")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Collected]:
    """``bundles("compile_crash", "--no-replay")``: the bundle of a tests/programs program,
    collected once per session for each set of options (and the user's ``xla_flags``), for
    every xdist worker."""
    root = shared.shared_folder(tmp_path_factory, "bundles")

    def get(program: str, *extra: str, xla_flags: str = "") -> Collected:
        key = (program, xla_flags, *extra)
        name = f"{program}-" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]
        out = root / f"{name}.zip"

        def make() -> dict[str, object]:
            argv = [sys.executable, str(PROGRAMS / f"{program}.py")]
            made = run_collect(out, argv, *extra, cwd=root, xla_flags=xla_flags)
            return {"returncode": made.returncode, "stderr": made.stderr}

        done = shared.once(root, name, make)
        return Collected(done["returncode"], done["stderr"], out)

    return get
