"""The size budget before compression: real inputs that cannot fit are left out before
anything is compressed (their LZMA would take longer than the run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import run_collect
from xla_bugkit.bundle import members

pytestmark = [pytest.mark.jax, pytest.mark.slow]

# 16 MB of random float32 inputs to a jitted function whose result XLA cannot allocate.
PROGRAM = """
import jax, jax.numpy as jnp, numpy as np
x = np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32)
@jax.jit
def spread(x):
    return jnp.broadcast_to(x.sum(), (1 << 20, 1 << 20)) * 2
print(spread(x))
"""


def test_inputs_that_cannot_fit_are_left_out_before_compressing(tmp_path: Path) -> None:
    program = tmp_path / "spread.py"
    program.write_text(PROGRAM)
    argv = [sys.executable, str(program)]
    done = run_collect(tmp_path / "b.zip", argv, "--max-size", "2MB")
    said = [line for line in done.stderr.splitlines() if "over the size budget" in line]
    assert len(said) == 1, done.stderr
    assert ".snapshot." in said[0] and "estimated before compressing" in said[0]
    m = done.manifest()
    assert m["data"] == "no real inputs: the snapshots were left out to fit the size budget"
    assert (tmp_path / "b.zip").stat().st_size <= 2_000_000


def test_repro_py_reads_the_snapshot_so_its_arguments_travel_once(tmp_path: Path) -> None:
    # The snapshot (about 15 MB compressed) fits 20 MB; a second copy of its arguments for
    # repro.py would not. repro.py reads them from the snapshot: the bundle keeps them.
    program = tmp_path / "spread.py"
    program.write_text(PROGRAM)
    done = run_collect(tmp_path / "b.zip", [sys.executable, str(program)], "--max-size", "20MB")
    assert "over the size budget" not in done.stderr, done.stderr
    assert done.manifest()["data"].startswith("real inputs"), done.manifest()["data"]
    assert any(".snapshot." in name for name in done.names())
    assert members.REPRO in done.names() and members.INPUTS not in done.names()
    assert "SNAPSHOT = HERE / 'modules/" in done.text(members.REPRO)
    assert (tmp_path / "b.zip").stat().st_size <= 20_000_000


# The same inputs; a second function is given the first's failed result, and plans the
# same allocation: both modules are bundled, each with its extra files.
TWO_MODULES = PROGRAM.replace(
    "print(spread(x))",
    "@jax.jit\ndef halve(y):\n    return y / 2\nprint(halve(spread(x)))",
)


def test_over_the_budget_after_compressing_the_next_files_go_together(tmp_path: Path) -> None:
    # Estimated before compressing, the 16 MB snapshot fits 14 MB; compressed, it does not.
    program = tmp_path / "spread.py"
    program.write_text(TWO_MODULES)
    timings = tmp_path / "timings.jsonl"
    done = run_collect(
        tmp_path / "b.zip",
        [sys.executable, str(program)],
        "--max-size",
        "14MB",
        env={"XLA_BUGKIT_TIMINGS": str(timings)},
    )
    said = [line for line in done.stderr.splitlines() if "over the size budget" in line]
    assert len(said) > 2 and ".snapshot." in said[-1], done.stderr
    # The other module's files and the snapshot left out at once: the archive written twice,
    # not once more for each file.
    archives = [
        s for s in map(json.loads, timings.read_text().splitlines()) if s["stage"] == "archive"
    ]
    assert len(archives) == 2, done.stderr
    assert (tmp_path / "b.zip").stat().st_size <= 14_000_000
