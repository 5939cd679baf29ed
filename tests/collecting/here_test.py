"""start_capture: a program turns dumps on for itself, fails inside XLA, and its work dir is
bundled afterwards with ``xla-bugkit bundle``."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, XLA_BUGKIT, Collected, clean_env

# Captures into the folder given, then runs the program given, as its own main.
CAPTURING = textwrap.dedent(
    """
    import runpy
    import sys

    import xla_bugkit

    work = xla_bugkit.start_capture(sys.argv[1])
    print("capturing into", work)
    runpy.run_path(sys.argv[2], run_name="__main__")
    """
)


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "capturing.py"
    script.write_text(CAPTURING, "utf-8")
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=clean_env(), cwd=tmp_path, timeout=READY_TIMEOUT)  # fmt: skip


@pytest.mark.slow  # a real jax program, then a bundle with its replay
def test_a_program_that_captures_itself_then_crashes_in_xla(tmp_path: Path) -> None:
    work = tmp_path / "work"
    done = run(tmp_path, str(work), str(PROGRAMS / "compile_crash.py"))
    # It ends as the program did: killed by XLA's abort, its output on the terminal.
    assert done.returncode == -signal.SIGABRT, done.stderr
    assert "capturing into" in done.stdout
    assert "Check failed: const_instr == nullptr" in done.stderr
    assert f"xla-bugkit bundle {work} -o bug.zip" in done.stderr
    assert "Check failed: const_instr == nullptr" in (work / "run.log").read_text()
    out = tmp_path / "bug.zip"
    bundled = subprocess.run([XLA_BUGKIT, "bundle", str(work), "-o", str(out)],
                             capture_output=True, text=True, env=clean_env(),
                             timeout=READY_TIMEOUT)  # fmt: skip
    assert bundled.returncode == 0, bundled.stderr
    m = Collected(0, bundled.stderr, out).manifest()
    assert m["failure"]["kind"] == "compile crash"
    assert m["failure"]["signal"] == "SIGABRT"
    first = m["modules"][0]
    assert first["name"] == "jit_add_noise"
    assert first["replay"]["outcome"] == "reproduced: crash"


@pytest.mark.jax
def test_too_late_once_jax_is_imported(tmp_path: Path) -> None:
    program = tmp_path / "late.py"
    program.write_text("", "utf-8")
    script = tmp_path / "late_capture.py"
    script.write_text(CAPTURING.replace("import xla_bugkit", "import jax\nimport xla_bugkit"))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "w"), str(program)],
                          capture_output=True, text=True, env=clean_env(),
                          timeout=READY_TIMEOUT)  # fmt: skip
    assert done.returncode == 1
    assert (
        "start_capture() must run before jax, jaxlib is imported: XLA reads its flags once per "
        "process (call it first thing, or use xla-bugkit collect)"
    ) in done.stderr
    assert not (tmp_path / "w").exists()


def test_a_successful_program_exits_as_it_would(tmp_path: Path) -> None:
    program = tmp_path / "fine.py"
    program.write_text("import sys\nprint('fine')\nsys.exit(3)\n", "utf-8")
    done = run(tmp_path, str(tmp_path / "w"), str(program))
    assert done.returncode == 3
    assert done.stdout.splitlines()[-1] == "fine"
    assert '"exit_status": 3' in (tmp_path / "w" / "run.json").read_text()
