"""Recorded calls tied to their own modules, end to end: two modules of one function
compiled at once on two threads, and an ahead-of-time executable whose error the next call
met. Whatever order the threads ran in, each module's recorded inputs are its own, and the
failure is the call that made it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, Collected, run_collect
from xla_bugkit.errors import ExitCode

pytestmark = [pytest.mark.jax, pytest.mark.slow]
_PARAMETERS = re.compile(r"entry_computation_layout=\{\((.*?)\)->")


def parameter_dims(c: Collected, label: str) -> list[tuple[int, ...]]:
    """The dimensions of each parameter of module ``label``, from its bundled text."""
    header = c.text(f"modules/{label}/{label}.before_optimizations.txt").splitlines()[0]
    found = _PARAMETERS.search(header)
    assert found, header
    arrays = re.findall(r"[a-z0-9]+\[([\d,]*)\]", found.group(1))
    return [tuple(int(d) for d in dims.split(",") if d) for dims in arrays]


def modules(c: Collected, name: str) -> list[dict]:  # type: ignore[type-arg]
    return [m for m in c.manifest()["modules"] if m["label"].endswith(f".{name}")]


def test_two_modules_of_one_function_compiled_at_once_keep_their_own_inputs(
    tmp_path: Path,
) -> None:
    program = PROGRAMS / "concurrent_compile_oom.py"
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(program)])
    # Reproduced; 16 TiB is more than the machine has: not XLA's bug, so 3.
    assert c.returncode == ExitCode.NOT_REPRODUCED, c.stderr[-3000:]
    failure = c.manifest()["failure"]
    assert (failure["kind"], failure["executing"]) == ("runtime error", "affinity")
    # The large batch's module, and the small one's where it was the last to run.
    both = modules(c, "jit_affinity")
    for m in both:  # whichever XLA numbered first
        inputs = [a.shape for a in c.recorded_inputs(m["label"])]
        assert inputs == parameter_dims(c, m["label"]), m["label"]
    first = c.manifest()["modules"][0]
    assert first in both and parameter_dims(c, first["label"]) == [(2**21,)]
    # Replayed on its own recorded inputs, which reproduce the error.
    assert (first["replay"]["outcome"], first["replay"]["inputs"]) == (
        "reproduced: error",
        "snapshot",
    )
    raised = (
        "XLA raised JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 17592186044416"
    )
    assert any(r.startswith(raised) for r in first["reasons"]), first["reasons"]
    for other in (m for m in both if m != first):
        assert not any(r.startswith("XLA raised") for r in other["reasons"]), other["reasons"]


def test_an_ahead_of_time_executables_error_met_by_the_next_call_is_its_own(
    tmp_path: Path,
) -> None:
    c = run_collect(tmp_path / "b.zip", [sys.executable, str(PROGRAMS / "aot_pending_oom.py")])
    # Reproduced; more than the machine has: not XLA's bug, so 3.
    assert c.returncode == ExitCode.NOT_REPRODUCED, c.stderr[-3000:]
    failure = c.manifest()["failure"]
    # spread's call raised the error; nearest_gap's execution made it.
    assert (failure["kind"], failure["executing"]) == ("runtime error", "nearest_gap")
    (gap,) = modules(c, "jit_nearest_gap")
    assert c.manifest()["modules"][0] == gap
    assert (gap["replay"]["outcome"], gap["replay"]["inputs"]) == ("reproduced: error", "snapshot")
    assert (
        "XLA raised JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 1099511627776 "
        "bytes. while executing it (jit_nearest_gap); the program met it in a later call on its "
        "outputs (jit_spread)"
    ) in gap["reasons"], gap["reasons"]
    assert [a.shape for a in c.recorded_inputs(gap["label"])] == parameter_dims(c, gap["label"])
    for spread in modules(c, "jit_spread"):
        assert not any(r.startswith("XLA raised") for r in spread["reasons"]), spread["reasons"]
