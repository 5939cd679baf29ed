"""The benchmark script runs end to end on a tiny input and writes its table.

Benchmarks are not tests: nothing here checks a time. This only keeps ``benchmarks/run.py``
from rotting between the runs that fill ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real jax programs, end to end

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "benchmarks" / "run.py"


def test_smoke_run_writes_a_table(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--work", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,  # a hung child fails the test instead of the whole session
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = out.read_text("utf-8")
    assert "| Figure | xla-bugkit | Baseline | Ratio | Target | Met | Notes |" in table
    for figure in ("P1 `collect --no-replay`", "P2 `dumps.index`", "P3 peak RSS", "P4 `verify"):
        assert figure in table
    # The training program crashed XLA under collect, which bundled it; its stages were timed.
    assert "of a training program that crashes XLA" in table
    assert "FAILED to write its bundle" not in table
    for stage in ("run", "index", "select", "environment", "stage", "archive"):
        assert f"collect stage `{stage}`" in table
    # Correctness the figures rest on: index() opened no dump file; both searches agree.
    assert "dump files opened by index(): 0" in table
    assert "MISMATCH" not in table
    assert "\npython benchmarks/run.py --smoke" in table
