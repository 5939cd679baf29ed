"""collect on programs of the shapes users have (tests/programs/shapes): each fails inside
XLA for real, and the output or the process tree hides the failure from a reader of the
output alone. The answer each must get is its folder's expect.json."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, run_collect

pytestmark = [pytest.mark.jax, pytest.mark.slow]

SHAPES = PROGRAMS / "shapes"


def expected(shape: str) -> dict:  # type: ignore[type-arg]
    return json.loads((SHAPES / shape / "expect.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "shape",
    [
        "pytest_crash",  # pytest's fd capture swallows XLA's CHECK line
        "spawn_workers",  # a spawn worker dies in XLA; its parent (no jax) exits 1
        "rank_launcher",  # a launcher prefixes each rank's lines with "[rank1] "
        "run_twice",  # bash runs the program twice; the second run fails
        "logging_info",  # the program logs XLA's error at ERROR and exits on its own
        "stderr_to_file",  # the program sends its own stderr to a file: no CHECK line
        "shard_map_wrong",  # a wrong result inside shard_map: no one-device reference
        "small_values_wrong",  # values near 1.5e-5, 21% off: every error is tiny
        "package_module",  # python -m; a later first call takes an argument XLA never made
        "debug_print_crash",  # one jax.debug.print in the crashing function
        "exec_self",  # os.execv: the same pid's next image crashes XLA
        "own_dump_folder",  # the program's own --xla_dump_to: its folder stays as it was
        "executor_hang",  # a watchdog's os._exit while an executor thread waits on XLA
    ],
)
def test_the_culprit_and_the_verdict(shape: str, tmp_path: Path) -> None:
    want = expected(shape)
    argv = [sys.executable if word == "python" else word for word in want["command"]]
    # The wrong-value search's budget is wall time: generous, for a loaded machine.
    options = ["--budget", "30m", *want.get("collect_args", [])]
    started = time.time()
    done = run_collect(tmp_path / "bundle.zip", argv, *options, cwd=SHAPES / shape)
    # 0 only for XLA's bug, proven; 3 where the replay shows it and it is still not XLA's.
    assert done.returncode == want.get("exit", 0), done.stderr
    m = done.manifest()
    assert m["failure"]["kind"] == want["kind"], done.stderr
    first = m["modules"][0]
    assert first["name"] == want["module"], done.stderr
    assert first["replay"]["outcome"] == want["replay"], done.stderr
    if shape == "pytest_crash":
        # The run only showed SIGABRT; the bundle names the CHECK, from the replay, and says so.
        failure = m["failure"]
        assert failure["message_lost"] is True and failure["site"]
        assert failure["evidence"].startswith("the run's message was not captured; the replay's")
        assert "Check failed" in m["title"]
    if shape == "small_values_wrong":
        # The bundle's own script judges as the replay did: 21% off at 1.5e-5 is wrong.
        folder = done.unpack(tmp_path / "unpacked")
        repro = subprocess.run([sys.executable, str(folder / "repro.py")], capture_output=True,
                               text=True, timeout=600)  # fmt: skip
        assert repro.returncode == 1, repro.stdout + repro.stderr
        assert "WRONG RESULT: 1 of 32769 elements differ" in repro.stdout
    if shape == "logging_info":
        # The job logs at INFO: nothing collect turned on may add a line to what it shows.
        assert "Dumping" not in done.stderr and "Dumping" not in done.text("log.txt")
    if shape == "spawn_workers":
        assert "died on SIGABRT" in m["failure"]["evidence"]
        assert "no sign of an XLA bug" not in m["title"]
    if shape == "own_dump_folder":
        written = [
            f for f in (SHAPES / shape / "xla_dump").rglob("*") if f.stat().st_mtime >= started
        ]
        assert not written, written[:3]
        assert "your dumps: " in done.stderr and "nothing was written there" in done.stderr
    if shape == "executor_hang":
        assert m["failure"]["evidence"].endswith("the thread that waited for them never got them")
        # The fast-math loop computes without end: no proof of a hang of XLA's, no link.
        assert "computing all along" in first["replay"]["evidence"], done.stderr
        assert (
            m["title"].endswith("(not shown to be XLA's yet)") and "issues/new" not in done.stderr
        )


def test_an_exception_of_the_programs_own_host_callback_is_not_called_an_xla_bug(
    tmp_path: Path,
) -> None:
    want = expected("callback_keyerror")
    argv = [sys.executable if word == "python" else word for word in want["command"]]
    done = run_collect(tmp_path / "bundle.zip", argv, cwd=SHAPES / "callback_keyerror")
    assert done.returncode == 3, done.stderr
    m = done.manifest()
    assert m["failure"]["kind"] == "non-XLA failure"
    assert m["failure"]["callback"] == "lookup_calibration (calibrate.py:46)"
    said = " ".join(done.stderr.split())
    assert "this does not look like an XLA bug: the program's own host callback" in said
    assert m["title"].startswith("KeyError: 7, raised in the program's host callback")
