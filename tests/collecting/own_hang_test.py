"""Hangs that are the program's own, and one whose replay outweighs the program's own words,
collected end to end (tests/programs/callback_sleep_hang.py, callback_event_hang.py,
watchdog_exit_hang.py)."""

from __future__ import annotations

import re
import signal
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
    wait_for_child,
)

pytestmark = [pytest.mark.slow, pytest.mark.jax]  # real jax programs, collected and replayed
TRACKERS = ("github.com/jax-ml/jax", "github.com/openxla/xla", "gh issue create")


def _stopped_in_callback(tmp_path: Path, program: str) -> Collected:
    """Collect ``program``, stopped (as by the user) once its own callback is running."""
    out, ready = tmp_path / "bundle.zip", tmp_path / "ready"
    argv = [XLA_BUGKIT, "collect", "-o", str(out), "--",
            sys.executable, str(PROGRAMS / program), str(ready)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=clean_env(), cwd=tmp_path)  # fmt: skip
    try:
        wait_for_child(ready, child)
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=READY_TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
    return Collected(child.returncode, stderr, out)


@pytest.mark.parametrize(
    ("program", "callback", "call"),
    [
        ("callback_sleep_hang.py", "fetch_gain (callback_sleep_hang.py:30)", "calibrate"),
        ("callback_event_hang.py", "log_metrics (callback_event_hang.py:31)", "train_step"),
    ],
)
def test_a_hang_in_the_programs_own_callback_is_its_own(
    tmp_path: Path, program: str, callback: str, call: str
) -> None:
    c = _stopped_in_callback(tmp_path, program)
    said = " ".join(c.stderr.split())
    assert (
        f"this does not look like an XLA bug: the program's own host callback {callback} was "
        f"running in jit({call}) when it was stopped: not XLA's"
    ) in said, c.stderr
    assert not any(tracker in c.stderr for tracker in TRACKERS), c.stderr
    manifest = c.manifest()
    assert manifest["failure"]["kind"] == "hang"
    assert manifest["failure"]["callback"] == callback
    name = callback.split(" (")[0]
    assert manifest["title"] == (
        f"The program's own callback {name} hangs in jit({call}) (no sign of an XLA bug)"
    )
    issue = " ".join(c.text("ISSUE.md").split())
    assert "did not reproduce" not in issue
    assert "no replay ran: the replay of" in issue
    assert "host callbacks cannot run outside the original process" in issue


def test_a_hang_whose_replay_computes_without_end_is_unproven_though_xla_ran_it(
    tmp_path: Path,
) -> None:
    """The watchdog ended the program while XLA ran jit(recalibrate)'s while loop; the
    replay runs past its bound too, computing all along: a loop that never ends, which may
    be the program's own condition, proves no hang of XLA's. No link, no "XLA" title."""
    c = run_collect(tmp_path / "bundle.zip",
                    [sys.executable, str(PROGRAMS / "watchdog_exit_hang.py")],
                    "--replay-timeout", "120", cwd=tmp_path)  # fmt: skip
    assert "recalibration exceeded the 20s SLA" in c.stderr
    manifest = c.manifest()
    assert manifest["failure"]["kind"] == "hang", c.stderr
    assert manifest["failure"]["executing"] == "recalibrate"
    assert manifest["title"] == "CPU hang (not shown to be XLA's yet)"
    assert re.search(r"replay module_\d+\.jit_recalibrate: reproduced: hang", c.stderr), c.stderr
    assert "computing all along" in c.stderr and manifest["blame"]["whose"] == "unproven"
    assert c.returncode == 3 and "issues/new" not in c.stderr
    assert "XLA was not busy" not in c.stderr
    assert "not reproduced" not in c.stderr
    issue = " ".join(c.text("ISSUE.md").split())
    assert "**Not shown to be an XLA bug yet:** the replay of module_" in issue
    assert "called jit(recalibrate), which XLA ran inside the call" in str(
        manifest["failure"]["evidence"]
    )
    # A while loop that never ends may be the program's own: the maintainer is told to look.
    assert "check that the condition can turn false" in issue


def test_a_watchdogs_exit_inside_the_programs_own_callback_is_its_own_hang(
    tmp_path: Path,
) -> None:
    c = run_collect(tmp_path / "bundle.zip",
                    [sys.executable, str(PROGRAMS / "callback_watchdog_exit.py")],
                    cwd=tmp_path)  # fmt: skip
    said = " ".join(c.stderr.split())
    assert (
        "this does not look like an XLA bug: the program's own host callback read_sensor "
        "(callback_watchdog_exit.py:28) was running in jit(fuse) when the program ended "
        "itself: not XLA's"
    ) in said, c.stderr
    assert not any(tracker in c.stderr for tracker in TRACKERS), c.stderr
    assert c.manifest()["title"] == (
        "The program's own callback read_sensor hangs in jit(fuse) (no sign of an XLA bug)"
    )
    issue = " ".join(c.text("ISSUE.md").split())
    assert "did not reproduce" not in issue and "no replay ran: the replay of" in issue
