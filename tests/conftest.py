"""Shared, expensive fixtures: real jax programs, each run once per test session.

Every jax process costs seconds to start, so the programs that several test modules need
(tests/programs/*.py and a small two-function program) run once, two at a time, in the
background from the first test that asks for them; a test waits only for the run it reads.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xla_bugkit import proc
from xla_bugkit.capture import rerun
from xla_bugkit.errors import BugkitError
from xla_bugkit.replay.literal import literal_to_numpy, shape_of

TESTS = Path(__file__).resolve().parent
PROGRAMS = TESTS / "programs"

# Two jitted functions and some jnp helper calls (each helper compiles its own module).
# The big constant shows whether --xla_dump_large_constants reached XLA.
TWO_FUNCTIONS = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    TABLE = np.arange(2000, dtype=np.float32)

    @jax.jit
    def step(w, x):
        return jnp.tanh(x @ w).sum()

    @jax.jit
    def scale(x):
        return x * 2.0 + TABLE

    x = jnp.ones((4, 4))
    print(step(x, jnp.zeros((2, 4))), scale(jnp.full((2000,), 3.0)).sum())
    """
)
# The user's own flags for the two-function run: a repeated field (the pass list), a plain
# one, and a dump filter; its debug_options file then shows all three kinds.
TWO_FUNCTIONS_FLAGS = (
    "--xla_disable_hlo_passes=algsimp,cse --xla_cpu_enable_fast_math=false "
    "--xla_dump_hlo_pass_re=^dce$"
)


def literal_to_array(lit: Any) -> np.ndarray:
    """Decode a ``LiteralProto`` that must hold an array (not a tuple)."""
    value = literal_to_numpy(lit)
    if isinstance(value, tuple):
        raise BugkitError(f"expected an array literal, got {shape_of(lit)}")
    return value


def clean_env(xla_flags: str | None = None) -> dict[str, str]:
    """This process's environment without the caller's JAX/XLA settings, on CPU."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "LIBTPU_", "TPU_"))
    }
    env["JAX_PLATFORMS"] = "cpu"
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    return env


@dataclass(frozen=True)
class Variant:
    """One program run: the script, the user's XLA_FLAGS, and whether collect's dumps are on."""

    script: str  # a file in tests/programs, or "two_functions"
    xla_flags: str | None = None
    timeout: float = 120.0
    dumps: bool = True
    dump_subdir: str = "dumps"


VARIANTS: Mapping[str, Variant] = {
    # Longest first: the hang holds one worker for its whole timeout.
    "hang": Variant("hang.py", timeout=5.0),
    "wrong_result": Variant("wrong_result.py"),
    "compile_crash": Variant("compile_crash.py"),
    "compile_crash_again": Variant("compile_crash.py"),
    "compile_error": Variant("compile_error.py"),
    "runtime_error": Variant("runtime_error.py"),
    "success": Variant("success.py"),
    "two_functions": Variant("two_functions", xla_flags=TWO_FUNCTIONS_FLAGS),
    # XLA must still find a dump dir whose path has a space in it.
    "space_in_dump_dir": Variant("success.py", dump_subdir="dump dir"),
    # An unknown LLVM option: XLA's backend exits the process with status 1.
    "llvm_option": Variant(
        "success.py", xla_flags="--xla_backend_extra_options=bogus_opt", dumps=False
    ),
}


@dataclass(frozen=True)
class ProgramRun:
    name: str
    completed: proc.Completed
    dump_dir: Path  # empty when the variant ran without dumps
    env: Mapping[str, str]

    @property
    def output(self) -> str:
        return self.completed.output


def log_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment collect's classification relies on, without dumps."""
    return dict(base, JAX_LOG_COMPILES="1", JAX_TRACEBACK_FILTERING="off", PYTHONUNBUFFERED="1")


class ProgramRuns:
    """Runs every variant once, two at a time (this machine has two cores)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "two_functions.py").write_text(TWO_FUNCTIONS, "utf-8")
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="program-run")
        self._runs: dict[str, Future[ProgramRun]] = {
            name: self._pool.submit(self._run, name, v) for name, v in VARIANTS.items()
        }

    def _run(self, name: str, variant: Variant) -> ProgramRun:
        if variant.script == "two_functions":
            script = self.root / "two_functions.py"
        else:
            script = PROGRAMS / variant.script
        dump_dir = self.root / name / variant.dump_subdir
        dump_dir.mkdir(parents=True)
        base = clean_env(variant.xla_flags)
        env = rerun.child_env(base, dump_dir)[0] if variant.dumps else log_env(base)
        completed = proc.run(
            [sys.executable, str(script)], env=env, cwd=self.root, timeout=variant.timeout
        )
        return ProgramRun(name, completed, dump_dir, env)

    def __getitem__(self, name: str) -> ProgramRun:
        return self._runs[name].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def program_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProgramRuns]:
    runs = ProgramRuns(tmp_path_factory.mktemp("program_runs"))
    try:
        yield runs
    finally:
        runs.close()
