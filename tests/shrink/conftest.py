"""Bundles of real failing programs (tests/shrink/programs), collected once per session."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.programs import Collected, run_collect

PROGRAMS = Path(__file__).resolve().parent / "programs"
# The flag that makes XLA:CPU's code generator abort, among flags that change nothing here.
SPLIT_COUNT = "--xla_cpu_parallel_codegen_split_count=-1"
USER_FLAGS = f"--xla_cpu_enable_fast_math=false {SPLIT_COUNT} --xla_cpu_enable_fast_min_max=true"


@pytest.fixture(scope="session")
def shrink_bundles(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Collected]:
    """``shrink_bundles("log_exp_big")``: the bundle ``collect`` writes for that program."""
    root = tmp_path_factory.mktemp("shrink-bundles")
    made: dict[tuple[str, str], Collected] = {}

    def get(program: str, xla_flags: str = "") -> Collected:
        key = (program, xla_flags)
        if key not in made:
            argv = [sys.executable, str(PROGRAMS / f"{program}.py")]
            out = root / f"{Path(program).name}-{len(made)}.zip"
            made[key] = run_collect(out, argv, cwd=root, xla_flags=xla_flags)
            assert out.exists(), made[key].stderr
        return made[key]

    return get
