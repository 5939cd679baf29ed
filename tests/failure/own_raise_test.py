"""The program's own exception worded as XLA's: real tracebacks, several Pythons and ways."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.programs import PROGRAMS, READY_TIMEOUT, clean_env
from xla_bugkit.failure.classify import Kind, classify
from xla_bugkit.failure.own_raise import raised_by_program

DATA = Path(__file__).parent / "data" / "own_raise"


def _last_line(name: str) -> tuple[str, str]:
    text = (DATA / name).read_text()
    exception = [line for line in text.splitlines() if line and not line[0].isspace()]
    return text, next(line for line in reversed(exception) if ": " in line)


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("runbook_words.txt", "check (reshard_verify.py:53)"),  # 3.11: carets, raise on 2 lines
        ("runbook_words_py310.txt", "validate (export.py:41)"),  # no carets
    ],
)
def test_a_raise_in_the_programs_own_file_is_the_programs(name: str, where: str) -> None:
    text, line = _last_line(name)
    found = raised_by_program(text, line)
    assert found is not None and found.where == where


@pytest.mark.parametrize(
    "name",
    [
        "xla_filtered.txt",  # jax's error: the last frame is the program's call, not a raise
        "xla_wrapped_by_program.txt",  # the program re-raised XLA's error in its own words
        "raised_in_a_package.txt",  # an installed package may wrap XLA's status: left as it was
    ],
)
def test_xla_errors_and_their_wrappers_are_not_the_programs_own(name: str) -> None:
    text, _ = _last_line(name)
    line = [x for x in text.splitlines() if x.startswith(("jax.", "RuntimeError"))][-1]
    assert raised_by_program(text, line) is None


def test_classified_as_the_programs_own_error_not_xlas() -> None:
    # A count the program checked ("mismatch"): its own check of a value, never XLA's status.
    text = (DATA / "runbook_words.txt").read_text()
    failure = classify(text, exit_status=1)
    assert failure.kind is Kind.WRONG_RESULT and failure.status_code is None, failure
    # No words of a check: the program's own error, raised where it says.
    failure = classify((DATA / "runbook_words_py310.txt").read_text(), exit_status=1)
    assert failure.kind is Kind.EXIT and failure.status_code is None, failure
    assert failure.headline == (
        "ValueError: INVALID_ARGUMENT: batch 3 has 7 rows, expected 8, raised by the program "
        "itself in validate (export.py:41)"
    )
    # jax's own error, as it reaches a program, stays XLA's runtime error.
    xla = classify((DATA / "xla_filtered.txt").read_text(), exit_status=1)
    assert xla.kind is Kind.RUNTIME_ERROR and xla.status_code == "RESOURCE_EXHAUSTED"


@pytest.mark.jax
def test_a_real_program_raising_its_own_status_words() -> None:
    program = PROGRAMS / "own_status_words.py"
    done = subprocess.run([sys.executable, str(program)], env=clean_env(), capture_output=True,
                          text=True, timeout=READY_TIMEOUT)  # fmt: skip
    assert done.returncode == 1 and "1024 rows: 8 shards" in done.stdout, done.stderr
    failure = classify(done.stdout + done.stderr, exit_status=done.returncode)
    assert failure.kind is Kind.EXIT, failure
    assert failure.status_code is None
    assert failure.headline.startswith("RuntimeError: INTERNAL: Check failed: layout_ok")
    said = ", raised by the program itself in verify (own_status_words.py:25)"
    assert failure.headline.endswith(said), failure.headline


def test_a_raise_in_the_standard_library_is_not_the_programs(tmp_path: Path) -> None:
    """The traceback's last frame is a ``raise`` in subprocess's own source, which the
    program called: not a raise of the program's (before, "run (subprocess.py:571)")."""
    program = tmp_path / "export.py"
    program.write_text(
        "import subprocess, sys\n\n"
        "subprocess.run([sys.executable, '-c', 'raise SystemExit(1)'], check=True)\n"
    )
    done = subprocess.run([sys.executable, str(program)], env=clean_env(), capture_output=True,
                          text=True, timeout=READY_TIMEOUT)  # fmt: skip
    text = done.stderr
    line = text.strip().splitlines()[-1]
    assert line.startswith("subprocess.CalledProcessError: "), text
    assert re.search(r'subprocess\.py", line \d+, in run\n\s+raise ', text), text
    assert raised_by_program(text, line) is None
