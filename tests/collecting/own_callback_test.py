"""Failures inside the program's own host callback, collected end to end: a callback that
aborts its process (tests/programs/callback_abort.py), the same in a worker process that
its parent started (benchmarks/heldout5/tile_pipeline.py), and a ``jax.debug.callback``
that raised in a helper it called (benchmarks/heldout5/gradnorm_monitor.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import (
    PROGRAMS,
    READY_TIMEOUT,
    XLA_BUGKIT,
    Collected,
    clean_env,
    run_collect,
)

pytestmark = [pytest.mark.slow, pytest.mark.jax]  # real jax programs, collected and replayed
TRACKERS = ("github.com/jax-ml/jax", "github.com/openxla/xla", "gh issue create")
EXIT_NOT_REPRODUCED, EXIT_UNVERIFIED = 3, 6
# Programs of the held-out set that found these failures, run as they are there.
HELDOUT5 = Path(__file__).resolve().parents[2] / "benchmarks" / "heldout5"


def _collected(tmp_path: Path, program: str) -> Collected:
    folder = HELDOUT5 if (HELDOUT5 / program).exists() else PROGRAMS
    argv = [sys.executable, str(folder / program)]
    return run_collect(tmp_path / "bundle.zip", argv, cwd=tmp_path)


def _verified(c: Collected) -> subprocess.CompletedProcess[str]:
    return subprocess.run([XLA_BUGKIT, "verify", str(c.bundle)], capture_output=True,
                          text=True, env=clean_env(), timeout=READY_TIMEOUT)  # fmt: skip


def _said(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("program", "callback", "call", "worker"),
    [
        ("callback_abort.py", "_check_header (callback_abort.py:25)", "normalise", False),
        ("tile_pipeline.py", "_decoder_check_header (tile_worker.py:32)", "tone_map", True),
    ],
)
def test_an_abort_in_the_programs_own_callback_is_its_own_crash(
    tmp_path: Path, program: str, callback: str, call: str, worker: bool
) -> None:
    c = _collected(tmp_path, program)
    assert c.returncode == EXIT_NOT_REPRODUCED, c.stderr
    said = _said(c.stderr)
    assert (
        f"xla-bugkit: process crash (SIGABRT): the process died inside the program's own host "
        f"callback {callback} while jit({call}) ran it"
    ) in said, c.stderr
    assert (
        f"this does not look like an XLA bug: the process died on SIGABRT inside the "
        f"program's own host callback {callback} while jit({call}) ran it: not XLA's"
    ) in said
    assert "no replay ran: the replay of" in said and "did not fail" not in said
    assert not any(tracker in c.stderr for tracker in TRACKERS), c.stderr
    manifest = c.manifest()
    assert manifest["failure"]["kind"] == "process crash"
    assert manifest["failure"]["callback"] == callback
    name = callback.split(" (")[0]
    assert manifest["title"].startswith(f"The program's own callback {name} dies on SIGABRT")
    assert manifest["title"].endswith("(no sign of an XLA bug)")
    issue = _said(c.text("ISSUE.md"))
    assert "XLA CPU crash" not in issue
    if worker:
        # The shard-2 worker, and only its module: the parent's log names a module of its
        # own, whose number a module of the worker shares.
        assert "tile_worker.py 2 0.5" in issue, issue
        assert said.count("selected module_") == 1, c.stderr
    verified = _verified(c)
    assert verified.returncode == EXIT_UNVERIFIED, verified.stdout + verified.stderr
    assert "the recorded failure is unverified here" in _said(verified.stdout)


def test_an_error_raised_in_a_helper_of_the_callback_names_the_callback_jax_called(
    tmp_path: Path,
) -> None:
    c = _collected(tmp_path, "gradnorm_monitor.py")
    assert c.returncode == EXIT_NOT_REPRODUCED, c.stderr
    said = _said(c.stderr)
    assert (
        "xla-bugkit: non-XLA failure: ValueError: gradient norm 146 is beyond the last "
        "histogram edge 100, raised in _edge_index (gradnorm_monitor.py:22), from the "
        "host callback record_grad_norm"
    ) in said, c.stderr
    assert (
        "this does not look like an XLA bug: the program's own host callback record_grad_norm "
        "(gradnorm_monitor.py:36) raised ValueError"
    ) in said
    assert not any(tracker in c.stderr for tracker in TRACKERS), c.stderr
    assert c.manifest()["failure"]["callback"] == "record_grad_norm (gradnorm_monitor.py:36)"
