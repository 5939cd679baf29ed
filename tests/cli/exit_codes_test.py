"""collect's exit codes, held to docs/exit-codes.md over real runs.

Each program is real: a Python error with and without jax, a success, a program stopped with
Ctrl-C (SIGINT to collect) before it compiles anything and after. A stop is sent once the
program says where it is (a file it writes), never after a sleep. A stop during the replay
is tests/cli/commands/collect_test.py::test_ctrl_c_during_the_replay_stops_it_and_still_bundles.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.programs import READY_TIMEOUT, XLA_BUGKIT, clean_env, run_collect, wait_for_child
from xla_bugkit.cli.main import main
from xla_bugkit.errors import ExitCode

FLAGS_HINT = "XLA_FLAGS"

# Says it is ready (the file argv[1]), then waits in Python until stopped.
WAIT = """\
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text("ready")
time.sleep(3600)
"""
JITTED = "import jax.numpy as jnp\nprint(jnp.arange(3.0).sum())\n"


def _script(tmp_path: Path, name: str, text: str) -> Path:
    script = tmp_path / name
    script.write_text(textwrap.dedent(text))
    return script


def test_a_program_that_never_imports_jax_and_raises_is_not_reproduced_without_a_flags_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.zip"
    script = _script(tmp_path, "plain.py", "raise ValueError('a plain Python error')\n")
    code = main(["collect", "-q", "-o", str(out), "--", sys.executable, str(script)])
    err = capsys.readouterr().err
    assert code == ExitCode.NOT_REPRODUCED, err
    assert err.splitlines()[-1] == (
        "xla-bugkit: the program wrote no XLA dumps (non-XLA failure: ValueError: a plain "
        "Python error): it failed with no sign of XLA (no process of it loaded jax, "
        "TensorFlow or PyTorch/XLA), so the failure is not XLA's and there is nothing to bundle"
    )
    assert FLAGS_HINT not in err and "error:" not in err
    assert not out.exists()


def test_a_shell_command_that_fails_is_not_reproduced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.zip"
    assert main(["collect", "-q", "-o", str(out), "--", "bash", "-c", "exit 7"]) == 3
    err = capsys.readouterr().err
    assert "(non-XLA failure: exit status 7)" in err and FLAGS_HINT not in err
    assert not out.exists()


@pytest.mark.jax
def test_a_python_error_after_importing_jax_before_compiling_is_not_reproduced(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, "early.py", "import jax\nraise ValueError('before any jit')\n")
    done = run_collect(tmp_path / "b.zip", [sys.executable, str(script)], "-q")
    assert done.returncode == ExitCode.NOT_REPRODUCED, done.stderr
    assert "it failed before it started XLA (1 Python process, none started it)" in done.stderr
    assert FLAGS_HINT not in done.stderr
    assert not done.bundle.exists()


@pytest.mark.jax
def test_a_python_error_after_jax_compiled_is_bundled_and_not_reproduced(tmp_path: Path) -> None:
    script = _script(tmp_path, "late.py", f"{JITTED}raise ValueError('after jax ran')\n")
    done = run_collect(tmp_path / "b.zip", [sys.executable, str(script)], "-q")
    assert done.returncode == ExitCode.NOT_REPRODUCED, done.stderr
    assert done.manifest()["modules"]
    assert "this does not look like an XLA bug" in done.stderr


@pytest.mark.jax
def test_a_program_that_succeeds_is_no_failure(tmp_path: Path) -> None:
    script = _script(tmp_path, "fine.py", JITTED)
    done = run_collect(tmp_path / "b.zip", [sys.executable, str(script)], "-q")
    assert done.returncode == ExitCode.NO_FAILURE, done.stderr
    assert "no failure seen" in done.stderr
    assert not done.bundle.exists()


def _stopped(tmp_path: Path, program: str) -> tuple[int, str, Path]:
    """collect of ``program``, sent Ctrl-C once the program says it is waiting."""
    script = _script(tmp_path, "program.py", program)
    out, ready = tmp_path / "b.zip", tmp_path / "ready"
    argv = [XLA_BUGKIT, "collect", "-q", "-o", str(out), "--",
            sys.executable, str(script), str(ready)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=clean_env())  # fmt: skip
    try:
        wait_for_child(ready, child)
    finally:
        child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=READY_TIMEOUT)
    return child.returncode, err, out


def test_ctrl_c_before_the_program_compiles_anything_is_interrupted(tmp_path: Path) -> None:
    code, err, out = _stopped(tmp_path, WAIT)
    assert code == ExitCode.INTERRUPTED, err
    assert err.splitlines()[-1] == (
        "xla-bugkit: the program wrote no XLA dumps (interrupted: stopped by the user): "
        "stopped with no sign of XLA (no process of it loaded jax, TensorFlow or PyTorch/XLA)"
    )
    assert FLAGS_HINT not in err
    assert not out.exists()


@pytest.mark.jax
def test_ctrl_c_after_jax_compiled_is_interrupted_and_bundled(tmp_path: Path) -> None:
    code, err, out = _stopped(tmp_path, JITTED + WAIT)
    assert code == ExitCode.INTERRUPTED, err
    assert FLAGS_HINT not in err
    assert out.exists()
